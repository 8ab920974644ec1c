package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

// A job that pages through an upstream, one unit per page, stops cleanly
// when the budget is spent and resumes at the next page on the next run.
func ExampleScheduler_RunOnce() {
	ctx := context.Background()
	store := quota.NewMemoryStore() // in production: the shared SQLite or Redis store
	limiter, _ := quota.New(store, "youtube", []quota.Budget{
		{Name: "units", Limit: 3, Window: quota.Sliding(24 * time.Hour)},
	})
	key := quota.Credential{Secret: "AIza...", Label: "yt-key-1"}

	sched := jobs.New(store, jobs.WithLogger(slog.New(slog.DiscardHandler)))
	_ = sched.Add("trending", "*/15 * * * *", func(ctx context.Context, run *jobs.Run) error {
		page := 0
		if _, err := run.Resume(ctx, &page); err != nil {
			return err
		}
		for ; page < 10; page++ {
			// A metered http.Client does this Take for every request.
			if _, err := limiter.Take(ctx, key, quota.Units("units", 1)); err != nil {
				return err // quota.ErrExhausted: a clean stop
			}
			fmt.Println("fetched page", page)
			if err := run.Save(ctx, page+1); err != nil {
				return err
			}
		}
		return run.Clear(ctx)
	})

	rec, err := sched.RunOnce(ctx, "trending")
	fmt.Println(rec.Outcome, rec.Spent, rec.Exhausted.Budget, rec.Exhausted.Left, err)

	history, _ := jobs.History(ctx, store, "trending", 10)
	cp, _, _ := jobs.LoadCheckpoint(ctx, store, "trending")
	fmt.Printf("%d run(s) recorded, next page %s\n", len(history), cp.Cursor)
	// Output:
	// fetched page 0
	// fetched page 1
	// fetched page 2
	// exhausted map[youtube/units:3] youtube/units 0 <nil>
	// 1 run(s) recorded, next page 3
}

// Run blocks until its context is done; SignalContext makes one that SIGINT
// and SIGTERM cancel, for a long-running ingestion service.
func ExampleScheduler_Run() {
	store := quota.NewMemoryStore()
	sched := jobs.New(store, jobs.WithLogger(slog.New(slog.DiscardHandler)), jobs.WithStopTimeout(time.Minute))

	ctx, stop := jobs.SignalContext(context.Background())
	defer stop()
	_ = sched.Add("heartbeat", "@every 1s", func(context.Context, *jobs.Run) error {
		stop() // for the example: stop after the first run, as Ctrl-C would
		return nil
	})
	if err := sched.Run(ctx); err != nil {
		fmt.Println(err) // runs cut off at the stop timeout
	}

	h, _ := jobs.History(context.Background(), store, "heartbeat", 1)
	fmt.Println(h[0].Job, h[0].Trigger, h[0].Outcome)
	// Output: heartbeat schedule ok
}
