package cli

import (
	"strings"
	"testing"
	"time"
)

// TestMonthlyBudget: a budget set with --monthly says in words when it
// resets (the 1st at midnight in its zone), status names that reset as
// the next free capacity, exhaust --until reset marks it spent until then,
// a take past the limit is refused until then (exit 3), and the history
// charts the month a day per bucket in the budget's zone.
func TestMonthlyBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)                                          // 2026-11-22 09:00 UTC
	first := time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC) // December 1st, 00:00 in Paris
	out := e.ok("budget", "set", "openai/tokens", "--limit", "1000", "--monthly", "Europe/Paris")
	if want := "openai/tokens: 1000 units per month, reset on the 1st at midnight Europe/Paris\n"; out != want {
		t.Errorf("budget set printed %q, want %q", out, want)
	}
	var list []budgetJSON
	decode(t, e.ok("--json", "budget", "list"), &list)
	if len(list) != 1 || list[0].Window != "monthly:Europe/Paris" {
		t.Errorf("budget list --json = %+v", list)
	}
	e.vars["K"] = "sk-monthly-key"
	e.ok("take", "openai", "--credential-env", "K", "--label", "k", "--cost", "400", "--budget", "tokens", "--method", "chat")
	e.clock.Add(26 * time.Hour)
	e.ok("take", "openai", "--label", "k", "--cost", "500", "--budget", "tokens", "--method", "chat")

	out = e.ok("status", "openai", "--label", "k")
	if !strings.HasSuffix(out, "\tk\ttokens\t900/1000\t100\t[##################--]  90%\treset in 7d12h (2026-11-30 23:00:00 UTC)\t-\n") ||
		strings.Count(out, "\n") != 1 {
		t.Errorf("status piped:\n%s", out)
	}
	u := e.usage("openai")["k/tokens"]
	if u.Used != 900 || u.Window != "monthly:Europe/Paris" || u.Reset == nil || !u.Reset.Equal(first) {
		t.Errorf("status --json = %+v; want 900 used, reset %v", u, first)
	}

	r := e.run("take", "openai", "--label", "k", "--cost", "101", "--budget", "tokens")
	if r.code != ExitExhausted {
		t.Fatalf("take over the month's limit: exit %d", r.code)
	}
	oneLine(t, r.errOut, "openai/tokens", "2026-11-30 23:00:00 UTC")

	out = e.ok("history", "openai", "--label", "k")
	for _, want := range []string{
		"openai/tokens for k: 900 of 1000 used in the window (month, reset on the 1st at midnight Europe/Paris), per 1d in Europe/Paris; a full bar is the limit",
		"Nov 22 00:00  |################                        |  400  (1 call)", // a day a bucket, from November 1st
		"Nov 01 00:00  |                                        |    0",
		"Nov 23 00:00  |####################                    |  500  (1 call)",
		"by method: chat 900",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("history:\n%s\nwant a line with %q", out, want)
		}
	}
	var charts []historyJSON
	decode(t, e.ok("--json", "history", "openai", "--label", "k"), &charts)
	if h := charts[0]; h.Zone != "Europe/Paris" || h.EverySeconds != 24*3600 || len(h.Buckets) != 23 ||
		h.Buckets[21].Units != 400 || h.Buckets[22].Units != 500 || !h.From.Equal(time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC)) {
		t.Errorf("history --json: zone %s every %v, %d buckets from %v: %+v", h.Zone, h.EverySeconds, len(h.Buckets), h.From, h.Buckets)
	}

	var got struct{ Until time.Time }
	decode(t, e.ok("--json", "exhaust", "openai", "--label", "k", "--budget", "tokens", "--until", "reset"), &got)
	if !got.Until.Equal(first) {
		t.Errorf("exhaust --until reset: until %v, want %v (December 1st in Paris)", got.Until, first)
	}
	e.clock.Set(first)
	e.ok("take", "openai", "--label", "k", "--cost", "1000", "--budget", "tokens")
}
