package jobs_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// TestRunsNameTheirJob: the units a run spends are recorded under its job's
// name, so Store.Breakdown says which job spent them.
func TestRunsNameTheirJob(t *testing.T) {
	ctx := context.Background()
	store := quota.NewMemoryStore()
	lim, err := quota.New(store, "youtube", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(24 * time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "AIzaSy-jobs-breakdown", Label: "k"}
	var owner string
	sched := jobs.New(store, jobs.WithLogger(slog.New(slog.DiscardHandler)))
	if err := sched.Add("trending", "@every 1h", func(ctx context.Context, run *jobs.Run) error {
		r, err := lim.Take(ctx, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 3}})
		if err == nil {
			owner = r.Owner
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := sched.RunOnce(ctx, "trending"); err != nil {
		t.Fatal(err)
	}
	rows, err := store.Breakdown(ctx, &backend.BreakdownRequest{API: "youtube", Owner: owner, Since: time.Now().Add(-time.Hour)})
	if err != nil || len(rows) != 1 || rows[0].Job != "trending" || rows[0].Method != "videos.list" || rows[0].Units != 3 {
		t.Fatalf("Breakdown = %+v, %v; want 3 units of videos.list by trending", rows, err)
	}
}
