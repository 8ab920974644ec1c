package jobview

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	if x := got[1].Expected; got[1].PlanError != "" || len(x) != 1 || x[0] != (view.BudgetCost{Budget: "units", Cost: 300, Left: 9800, Limit: 10000, After: 9500, Fits: true, Reset: x[0].Reset}) {
		t.Errorf("trending expected %+v (plan error %q)", x, got[1].PlanError)
	}
}
