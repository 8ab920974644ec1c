package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// TestControlCharactersEscaped: a label recorded by another program with an
// escape sequence (clear the screen, move the cursor, reorder text) prints
// as text in status, list and history, never raw.
func TestControlCharactersEscaped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, _, _ := e.g()
	evil := "key\x1b[2J\x1b[H\u202eeno\r\x07"
	l, err := quota.New(g.store, "youtube", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(context.Background(), quota.Credential{Secret: "AIzaSy-evil", Label: evil}, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	for _, tty := range []bool{true, false} {
		e.tty = tty
		for _, args := range [][]string{{"status"}, {"list"}, {"history", "youtube", "--label", "key"}} {
			r := e.run(args...)
			all := r.out + r.errOut
			if strings.ContainsAny(all, "\x1b\r\x07\u202e") {
				t.Errorf("quotactl %v (tty %v) printed a raw control character: %q", args, tty, all)
			}
			if args[0] != "history" && !strings.Contains(r.out, `key\x1b[2J\x1b[H\u202eeno\x0d\x07`) {
				t.Errorf("quotactl %v (tty %v): %q; want the label escaped", args, tty, r.out)
			}
		}
	}
	e.vars["K"] = "AIzaSy-other"
	r := e.run("take", "youtube", "--credential-env", "K", "--label", "bad\x1b[2J", "--cost", "1")
	if r.code != ExitUsage || !strings.Contains(r.errOut, "control characters") || strings.Contains(r.errOut, "\x1b") {
		t.Errorf("take with a control character in --label: exit %d, stderr %q; want a usage error saying so", r.code, r.errOut)
	}
}

// TestTabsAndNewlinesInLabelsKeepRows: a label another program recorded
// with a tab or a newline stays in its cell: piped output keeps one row per
// line and the same columns in every row, for cut and awk.
func TestTabsAndNewlinesInLabelsKeepRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, _, _ := e.g()
	l, err := quota.New(g.store, "youtube", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	for i, label := range []string{"plain", "tab\there", "line\nbreak"} {
		if _, err := l.Take(context.Background(), quota.Credential{Secret: "AIzaSy-" + label, Label: label}, quota.Units("units", int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	e.tty = false
	for _, args := range [][]string{{"status"}, {"list"}, {"credential", "list"}} {
		out := e.ok(args...)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		want := -1
		for _, line := range lines {
			n := strings.Count(line, "\t")
			if want < 0 && strings.Contains(line, "plain") {
				want = n
			}
		}
		rows := 0
		for _, line := range lines {
			if strings.Contains(line, "plain") || strings.Contains(line, `tab\x09here`) || strings.Contains(line, `line\x0abreak`) {
				rows++
				if n := strings.Count(line, "\t"); n != want {
					t.Errorf("quotactl %v: row %q has %d tabs, the plain label's row %d", args, line, n, want)
				}
			}
		}
		if rows != 3 {
			t.Errorf("quotactl %v: %d rows name the three labels (escaped), want 3:\n%s", args, rows, out)
		}
	}
}
