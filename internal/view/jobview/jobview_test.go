package jobview

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

// TestPlanErrorKeepsTheOthers: a job whose plan names a cost table that
// cannot be loaded here says why in PlanError; the other jobs, and its own
// runs, still show (the dashboard would otherwise go down for one job).
func TestPlanErrorKeepsTheOthers(t *testing.T) {
	now := time.Date(2026, 11, 22, 17, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st := quota.NewMemoryStore()
	la, _ := time.LoadLocation("America/Los_Angeles")
	l, err := quota.New(st, "youtube", []quota.Budget{{Name: "units", Limit: 10000, Window: quota.Daily(la)}}, quota.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "AIza-jobview", Label: "k"}
	sched := jobs.New(st, jobs.WithClock(clock), jobs.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	run := func(ctx context.Context, _ *jobs.Run) error {
		_, err := l.Take(ctx, key, quota.Units("units", 100))
		return err
	}
	missing := filepath.Join(t.TempDir(), "no-such-table.yaml")
	if err := sched.Add("elsewhere", "", run, jobs.WithPlan("youtube", missing, map[string]int64{"videos.list": 1})); err != nil {
		t.Fatal(err)
	}
	if err := sched.Add("trending", "", run, jobs.WithPlan("youtube", "", map[string]int64{"videos.list": 300})); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, j := range []string{"elsewhere", "trending"} {
		if rec, err := sched.RunOnce(ctx, j); err != nil || rec.Outcome != jobs.OK {
			t.Fatalf("%s: %+v, %v", j, rec, err)
		}
	}
	got, err := Read(ctx, view.New(st, view.WithClock(clock)), st, nil, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Job != "elsewhere" || got[1].Job != "trending" {
		t.Fatalf("jobs %+v", got)
	}
	if e := got[0]; !strings.Contains(e.PlanError, "no-such-table.yaml") || e.Expected != nil || e.Plan == nil || len(e.Runs) != 1 || e.Last == nil {
		t.Errorf("elsewhere: %+v", e)
	}
	// 200 units spent of 10,000 by the API's only owner: 300 more fit.
	if x := got[1].Expected; got[1].PlanError != "" || len(x) != 1 || x[0] != (view.BudgetCost{Budget: "units", Cost: 300, Left: 9800, Limit: 10000, After: 9500, Fits: true, Unit: quota.DefaultUnit, Reset: x[0].Reset}) {
		t.Errorf("trending expected %+v (plan error %q)", x, got[1].PlanError)
	}
}

// TestUnits: a job's view names the unit of each budget its runs spent in
// or were stopped by, and its expected cost is in each budget's unit, so
// that its tools show a spend budget's micro-dollars as dollars and tokens
// as tokens.
func TestUnits(t *testing.T) {
	now := time.Date(2026, 11, 22, 17, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	// the table the CLI's units tests use too: a request, 1,234 tokens and
	// $0.40 a call
	const path = "../../../costs/testdata/spend/llm.yaml"
	table, err := costs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	charge, err := table.Charge("complete")
	if err != nil {
		t.Fatal(err)
	}
	st := quota.NewMemoryStore()
	l, err := quota.New(st, "llm", table.Budgets, quota.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "sk-jobview", Label: "k"}
	sched := jobs.New(st, jobs.WithClock(clock), jobs.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	// Two calls pay $0.80 of $1.00; the third is refused.
	if err := sched.Add("enrich", "", func(ctx context.Context, _ *jobs.Run) error {
		for {
			if _, err := l.Take(ctx, key, charge); err != nil {
				return err
			}
		}
	}, jobs.WithPlan("llm", path, map[string]int64{"complete": 1})); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if rec, err := sched.RunOnce(ctx, "enrich"); err != nil || rec.Outcome != jobs.Exhausted {
		t.Fatalf("enrich: %+v, %v", rec, err)
	}
	j, found, err := ReadJob(ctx, view.New(st, view.WithClock(clock)), st, "enrich", 5)
	if err != nil || !found {
		t.Fatalf("ReadJob: %v, found %v", err, found)
	}
	if want := map[string]string{"llm/requests": quota.DefaultUnit, "llm/spend": quota.UnitUSDMicro, "llm/tokens": "tokens"}; !maps.Equal(j.Units, want) {
		t.Errorf("units %v, want %v", j.Units, want)
	}
	var spent []string
	for _, k := range []string{"llm/requests", "llm/spend", "llm/tokens"} {
		spent = append(spent, view.Amount(j.Last.Spent[k], j.Unit(k)))
	}
	if got := strings.Join(spent, ", "); got != "2, $0.80, 2,468 tokens" {
		t.Errorf("spent shown as %q", got)
	}
	if e := j.Last.Exhausted; e == nil || view.UsedOf(e.Used, e.Limit, j.Unit(e.Budget)) != "$0.80 / $1.00" {
		t.Errorf("exhausted %+v", e)
	}
	var expected []string
	for _, x := range j.Expected {
		expected = append(expected, x.Budget+" "+view.Amount(x.Cost, x.Unit)+" of "+view.Amount(x.Left, x.Unit))
	}
	if got := strings.Join(expected, ", "); got != "requests 1 of 98, spend $0.40 of $0.20, tokens 1,234 tokens of 27,532 tokens" {
		t.Errorf("expected shown as %q", got)
	}
	if u := j.Unit("llm/unknown"); u != quota.DefaultUnit {
		t.Errorf("the unit of a budget no run names: %q", u)
	}
}
