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
