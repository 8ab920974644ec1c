package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

// chargeEnrich adds to w's store an enrichment job's OpenAI budgets
// (enrichLimiter: requests and tokens a minute, $500 a month) and charges
// them one call: 1,234 tokens and $12.34.
func chargeEnrich(t testing.TB, w *world) {
	t.Helper()
	l, job := enrichLimiter(t, w)
	if _, err := l.Take(context.Background(), job, quota.Charge{Method: "chat.completions", Units: map[string]int64{"requests": 1, "tokens": 1234, "spend": 12_340_000}}); err != nil {
		t.Fatal(err)
	}
}

// enrichLimiter returns a limiter of the enrichment job's OpenAI budgets
// on w's store, from the cost table file with a spend section that the
// costs tests load, and the job's credential.
func enrichLimiter(t testing.TB, w *world) (*quota.Limiter, quota.Credential) {
	t.Helper()
	table, err := costs.Load("../costs/testdata/spend/enrich.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l, err := quota.New(w.store, table.API, table.Budgets, quota.WithClock(w.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	return l, quota.Credential{Secret: "sk-dashboard-enrich", Label: "enrich"}
}

// TestPageShowsUnits: the page shows tokens as tokens and a spend budget
// as dollars, in the budget rows and the charts, and /api/status names
// each budget's unit; budgets in the default unit keep bare numbers.
func TestPageShowsUnits(t *testing.T) {
	w := seed(t)
	chargeEnrich(t, w)
	srv := serve(t, w)
	code, page := get(t, srv, "/")
	if code != 200 {
		t.Fatalf("GET / = %d", code)
	}
	for _, want := range []string{
		`<span data-field="used">1,234 tokens</span>`,
		`<span data-field="limit">30,000 tokens</span>`,
		`<td class="n" data-field="remaining">28,766 tokens</td>`,
		`<span data-field="used">$12.34</span>`,
		`<span data-field="limit">$500.00</span>`,
		`<td class="n" data-field="remaining">$487.66</td>`,
		`<span data-field="used">1 request</span>`,
		`1,234 tokens of 30,000 tokens (4%)`,
		`$12.34 of $500.00 (2%)`,
		`<span data-field="used">9,700</span>`, // youtube's units: bare numbers
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	_, body := get(t, srv, "/api/status")
	var rows []view.Status
	if err := json.Unmarshal([]byte(body), &rows); err != nil {
		t.Fatal(err)
	}
	units := map[string]string{}
	for _, r := range rows {
		units[r.API+"/"+r.Budget] = r.Unit
	}
	for b, want := range map[string]string{"openai/tokens": "tokens", "openai/spend": quota.UnitUSDMicro, "youtube/units": quota.DefaultUnit} {
		if units[b] != want {
			t.Errorf("/api/status: %s has unit %q, want %q", b, units[b], want)
		}
	}
}

// TestJobsShowUnits: the page's job runs show what a run spent, and what
// stopped it, in each budget's unit (a spend budget in dollars, tokens as
// tokens; youtube's default unit as bare numbers), as do its charts' "by
// job" lines, and /api/jobs names the units.
func TestJobsShowUnits(t *testing.T) {
	w := seed(t)
	l, key := enrichLimiter(t, w)
	sched := jobs.New(w.store, jobs.WithClock(w.clock.Now), jobs.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	// Calls of 1,234 tokens and $12.34 until the tokens a minute run out:
	// 24 calls (29,616 tokens of 30,000), $296.16.
	if err := sched.Add("enrich", "", func(ctx context.Context, _ *jobs.Run) error {
		for {
			if _, err := l.Take(ctx, key, quota.Charge{Method: "chat.completions", Units: map[string]int64{"requests": 1, "tokens": 1234, "spend": 12_340_000}}); err != nil {
				return err
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if rec, err := sched.RunOnce(context.Background(), "enrich"); err != nil || rec.Outcome != jobs.Exhausted || rec.Spent["openai/tokens"] != 29_616 {
		t.Fatalf("enrich: %+v, %v", rec, err)
	}
	srv := serve(t, w)
	code, page := get(t, srv, "/")
	if code != 200 {
		t.Fatalf("GET / = %d", code)
	}
	for _, want := range []string{
		`<div data-spent="openai/requests">openai/requests <b data-field="units">24 requests</b></div>`,
		`<div data-spent="openai/spend">openai/spend <b data-field="units">$296.16</b></div>`,
		`<div data-spent="openai/tokens">openai/tokens <b data-field="units">29,616 tokens</b></div>`,
		`openai/tokens spent (29,616 tokens of 30,000 tokens used)`,
		`exhausted, took 0s, openai/requests 24 requests, openai/spend $296.16, openai/tokens 29,616 tokens`,
		`by job: enrich <b>$296.16</b>`,
		`by job: enrich <b>29,616 tokens</b>`,
		`<div data-spent="youtube/search">youtube/search <b data-field="units">89</b></div>`, // the default unit: bare numbers
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	_, body := get(t, srv, "/api/jobs/enrich")
	var j Job
	if err := json.Unmarshal([]byte(body), &j); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"openai/requests": "requests", "openai/spend": quota.UnitUSDMicro, "openai/tokens": "tokens"}; !maps.Equal(j.Units, want) {
		t.Errorf("/api/jobs/enrich units %v, want %v", j.Units, want)
	}
}
