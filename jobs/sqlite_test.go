package jobs_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
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

// TestLeaseNotRenewedInTime: a run whose lease renewals fail (here another
// process holds the SQLite write lock longer than the busy timeout; on Redis,
// a partition from the server) must stop once its lease may have run out in
// the store, not when a renewal finally gets through: by then the store may
// have granted the lease to another process's run, and the two overlap.
// Staged on Redis with a proxy paused for 6s under a 3s lease, the holder's
// run went on past its lease while the other process's run started.
func TestLeaseNotRenewedInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "quota.db")
		store, err := sqlitestore.Open(path, sqlitestore.WithBusyTimeout(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		const ttl = 3 * time.Second
		var logs logBuf
		s := jobs.New(store, jobs.WithLogger(logs.logger()), jobs.WithLeaseTTL(ttl))
		started, stopped := make(chan time.Time, 1), make(chan time.Time, 1)
		s.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
			started <- time.Now()
			context.AfterFunc(ctx, func() { stopped <- time.Now() })
			<-ctx.Done() // work that does not touch the store, until stopped
			return context.Cause(ctx)
		})
		done := make(chan jobs.Record, 1)
		go func() { rec, _ := s.RunOnce(context.Background(), "ingest"); done <- rec }()
		start := <-started

		// Another process takes the write lock and keeps it for 20s.
		other, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		tx, err := other.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO state (key, value) VALUES ('other', x'00')`); err != nil {
			t.Fatal(err)
		}
		advance(20 * time.Second)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		rec := <-done
		if ran := (<-stopped).Sub(start); ran > ttl {
			t.Errorf("the run went on %v after its lease was granted for %v and never renewed", ran, ttl)
		}
		if rec.Outcome != jobs.Cancelled || !strings.Contains(rec.Error, "lease lost") {
			t.Errorf("run: %s %q; want cancelled, lease lost", rec.Outcome, rec.Error)
		}
	})
}
