package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/quotactl/quotactl/quota"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from this run")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// statusWorld is a store with the cases status must draw right: a budget at
// 97% (not a full bar), one used up, one marked spent with units left, a
// sliding window, a named owner with two keys, and a long label.
func statusWorld(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.ok("budget", "set", "youtube/units", "--limit", "10000", "--daily", "America/Los_Angeles")
	e.ok("budget", "set", "youtube/search", "--limit", "100", "--daily", "America/Los_Angeles")
	e.ok("budget", "set", "github/core", "--limit", "5000", "--window", "1h")
	e.ok("budget", "set", "gitlab/api", "--limit", "2000", "--window", "24h")
	e.vars["K1"], e.vars["K2"], e.vars["K3"] = "AIza-one", "AIza-two", "ghp-three"
	e.ok("take", "youtube", "--credential-env", "K2", "--label", "yt-key-2", "--cost", "2500", "--budget", "units")
	e.ok("take", "youtube", "--credential-env", "K1", "--label", "yt-key-1", "--cost", "9700", "--budget", "units")
	e.ok("take", "youtube", "--label", "yt-key-1", "--cost", "100", "--budget", "search")
	e.ok("take", "github", "--credential-env", "K3", "--label", "ingest-backfill-project-key", "--cost", "1234", "--budget", "core")
	// Two keys of one named owner share its budget.
	e.vars["K4"], e.vars["K5"] = "glpat-four", "glpat-five"
	e.ok("take", "gitlab", "--credential-env", "K4", "--label", "gl-1", "--owner", "team-x", "--cost", "300")
	e.ok("take", "gitlab", "--credential-env", "K5", "--label", "gl-2", "--owner", "team-x", "--cost", "200")
	e.clock.Add(20 * time.Minute)
	e.ok("exhaust", "youtube", "--label", "yt-key-2", "--budget", "units", "--until", "reset")
	e.tty = true
	return e
}

// TestStatusGolden80: status on an 80-column terminal fits, in a golden
// file; so do narrower and wider terminals, each in its layout.
func TestStatusGolden80(t *testing.T) {
	e := statusWorld(t)
	for _, w := range []int{80, 52, 160} {
		e.vars["COLUMNS"] = strconv.Itoa(w)
		out := e.ok("status")
		golden(t, "status-"+strconv.Itoa(w)+".golden", out)
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if n := utf8.RuneCountInString(l); n > w {
				t.Errorf("%d columns: a line of %d: %q", w, n, l)
			}
		}
	}
}

// TestStatusFitsEveryWidth: from 40 to 200 columns no line is wider than
// the terminal, and every budget is shown.
func TestStatusFitsEveryWidth(t *testing.T) {
	e := statusWorld(t)
	for w := 40; w <= 200; w += 4 {
		e.vars["COLUMNS"] = strconv.Itoa(w)
		out := e.ok("status")
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if n := utf8.RuneCountInString(l); n > w {
				t.Errorf("%d columns: a line of %d: %q", w, n, l)
			}
		}
		for _, b := range []string{"units", "search", "core", "api"} {
			if !strings.Contains(out, b) {
				t.Errorf("%d columns: budget %s missing:\n%s", w, b, out)
			}
		}
	}
	// No $COLUMNS: IO.Width, else 80.
	delete(e.vars, "COLUMNS")
	out := e.ok("status")
	golden(t, "status-80.golden", out)
}

// TestUsageBarAgreesWithPercent: the bar is rounded down like the
// percentage, full only when nothing is left, and full with "spent" under an
// exhaustion mark whatever the usage.
func TestUsageBarAgreesWithPercent(t *testing.T) {
	mark := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		used, limit int64
		marked      bool
		want        string
	}{
		{0, 100, false, "[----------]   0%"},
		{1, 1000, false, "[#---------]   0%"}, // something used shows one cell
		{97, 100, false, "[#########-]  97%"},
		{999, 1000, false, "[#########-]  99%"}, // 99.9% is not a full bar
		{100, 100, false, "[##########] 100%"},
		{25, 100, true, "[##########] spent"},
		{0, 100, true, "[##########] spent"},
	} {
		u := quota.Usage{Used: c.used, Limit: c.limit, Remaining: max(c.limit-c.used, 0)}
		if c.marked {
			u.ExhaustedUntil, u.Remaining = mark, 0
		}
		if got := usageText(u, 10); got != c.want {
			t.Errorf("%d/%d marked %v: %q, want %q", c.used, c.limit, c.marked, got, c.want)
		}
	}
}

// TestTookRounded: job durations are rounded to what a person reads.
func TestTookRounded(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1234567 * time.Nanosecond:                         "1ms",
		412345678 * time.Nanosecond:                       "412ms",
		12345678901 * time.Nanosecond:                     "12.3s",
		5*time.Minute + 30*time.Second + time.Millisecond: "5m30s",
		2*time.Hour + 5*time.Minute + 7*time.Second:       "2h5m",
		750 * time.Nanosecond:                             "1µs",
	} {
		if got := took(d); got != want {
			t.Errorf("took(%v) = %q, want %q", time.Duration(d), got, want)
		}
	}
}
