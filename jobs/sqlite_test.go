package jobs_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// TestSQLiteAcrossProcesses: two schedulers, each with its own handle on one
// SQLite file (as two cron-started processes have), share the budget, the
// checkpoint and the bounded history.
func TestSQLiteAcrossProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "quota.db")
	clock := newClock()
	type cursor struct{ Next int }
	var done []int
	process := func() (*jobs.Scheduler, func()) {
		store, err := sqlitestore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		l := newLimiter(t, store, clock.Now, "units", 3)
		s := jobs.New(store, jobs.WithLogger(new(logBuf).logger()), jobs.WithClock(clock.Now), jobs.WithHistory(2))
		err = s.Add("ingest", "*/15 * * * *", func(ctx context.Context, run *jobs.Run) error {
			var c cursor
			if _, err := run.Resume(ctx, &c); err != nil {
				return err
			}
			for ; c.Next < 100; c.Next++ {
				if _, err := take(ctx, l, "units", 1); err != nil {
					return err
				}
				done = append(done, c.Next)
				if err := run.Save(ctx, cursor{c.Next + 1}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return s, func() { store.Close() }
	}

	var outs []jobs.Outcome
	for range 3 {
		s, closeStore := process()
		rec, err := s.RunOnce(context.Background(), "ingest")
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, rec.Outcome)
		closeStore()
		clock.Add(30 * time.Minute) // half the window: the first run's units are still counted
	}
	// Run 1 spends 3; run 2, 30 minutes later, reads run 1's waiting mark
	// from the store and does not start (the budget is full until 10:00);
	// run 3, an hour after run 1, gets 3 more and resumes at item 3.
	if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(done, want) {
		t.Errorf("items done %v, want %v", done, want)
	}
	if want := []jobs.Outcome{jobs.Exhausted, jobs.Waiting, jobs.Exhausted}; !slices.Equal(outs, want) {
		t.Errorf("outcomes %v", outs)
	}
	store, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h := history(t, store, "ingest")
	if len(h) != 2 || h[0].Spent["youtube/units"] != 3 || h[1].Spent["youtube/units"] != 3 {
		t.Errorf("history (keep 2) %+v", h)
	}
	names, err := jobs.Names(context.Background(), store)
	if err != nil || !slices.Equal(names, []string{"ingest"}) {
		t.Errorf("Names %v %v", names, err)
	}
}
