package jobs_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

// In these tests time is the synctest bubble's fake clock, which starts at
// 2000-01-01 00:00 UTC and moves only when every goroutine in the bubble is
// blocked. advance blocks on a bubble timer, so the fake clock jumps d at
// once (no wall time passes), then waits until the jobs the jump woke are
// blocked again.
func advance(d time.Duration) {
	<-time.NewTimer(d).C
	synctest.Wait()
}

var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// startRun runs s.Run in the bubble and returns a func that stops it and
// returns Run's error.
func startRun(s *jobs.Scheduler) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	synctest.Wait()
	return func() error {
		cancel()
		return <-errc
	}
}

func TestScheduleTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := quota.NewMemoryStore()
		l := newLimiter(t, store, time.Now, "units", 1000)
		s := jobs.New(store, jobs.WithLogger(new(logBuf).logger()), jobs.WithLocation(time.UTC))
		var starts []time.Time
		err := s.Add("trending", "*/15 * * * *", func(ctx context.Context, run *jobs.Run) error {
			starts = append(starts, run.Start())
			_, err := take(ctx, l, "units", 10)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var secs atomic.Int32
		if err := s.Add("heartbeat", "*/20 * * * * *", func(context.Context, *jobs.Run) error { secs.Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
		if got, want := s.Next("trending"), epoch.Add(15*time.Minute); !got.Equal(want) {
			t.Errorf("Next = %v, want %v", got, want)
		}
		stop := startRun(s)
		advance(time.Hour + time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		want := []time.Time{epoch.Add(15 * time.Minute), epoch.Add(30 * time.Minute), epoch.Add(45 * time.Minute), epoch.Add(60 * time.Minute)}
		if !slices.EqualFunc(starts, want, time.Time.Equal) {
			t.Errorf("runs started at %v, want %v", starts, want)
		}
		if n := secs.Load(); n != 61*3 {
			t.Errorf("seconds-field job ran %d times in 61 minutes, want %d", n, 61*3)
		}
		h := history(t, store, "trending")
		if len(h) != 4 {
			t.Fatalf("history has %d runs, want 4", len(h))
		}
		for _, r := range h {
			if r.Outcome != jobs.OK || r.Trigger != jobs.Scheduled || r.Spent["youtube/units"] != 10 {
				t.Errorf("record %+v", r)
			}
		}
		us, _ := l.Status(context.Background(), key)
		if us[0].Used != 40 {
			t.Errorf("units used %d, want 40", us[0].Used)
		}
	})
}

func TestScheduleTimeZones(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		la, err := time.LoadLocation("America/Los_Angeles")
		if err != nil {
			t.Fatal(err)
		}
		tokyo, err := time.LoadLocation("Asia/Tokyo")
		if err != nil {
			t.Fatal(err)
		}
		s := jobs.New(quota.NewMemoryStore(), jobs.WithLogger(new(logBuf).logger()), jobs.WithLocation(tokyo))
		noop := func(context.Context, *jobs.Run) error { return nil }
		for name, spec := range map[string]string{
			"la":    "CRON_TZ=America/Los_Angeles 5 0 * * *", // just after the YouTube reset
			"tokyo": "0 9 * * *",                             // the scheduler's zone
			"utc":   "CRON_TZ=UTC @daily",
			"once":  "",
		} {
			if err := s.Add(name, spec, noop); err != nil {
				t.Fatal(err)
			}
		}
		// The bubble starts at 2000-01-01 00:00 UTC = 1999-12-31 16:00 in LA
		// and 09:00 in Tokyo.
		for name, want := range map[string]time.Time{
			"la":    time.Date(2000, 1, 1, 0, 5, 0, 0, la),
			"tokyo": time.Date(2000, 1, 2, 9, 0, 0, 0, tokyo),
			"utc":   epoch.Add(24 * time.Hour),
		} {
			if got := s.Next(name); !got.Equal(want) {
				t.Errorf("Next(%q) = %v, want %v", name, got, want)
			}
		}
		if !s.Next("once").IsZero() || !s.Next("nosuch").IsZero() {
			t.Error("Next of a job with no schedule should be zero")
		}
	})
}

// TestNoOverlap: a job that takes 150s, ticking every minute, never runs
// twice at once; the ticks that find it running are skipped and logged, and
// RunOnce refuses with ErrBusy.
func TestNoOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := quota.NewMemoryStore()
		var logs logBuf
		s := jobs.New(store, jobs.WithLogger(logs.logger()))
		var running, maxRunning, runs atomic.Int32
		err := s.Add("slow", "* * * * *", func(ctx context.Context, run *jobs.Run) error {
			n := running.Add(1)
			defer running.Add(-1)
			if n > maxRunning.Load() {
				maxRunning.Store(n)
			}
			runs.Add(1)
			select {
			case <-time.After(150 * time.Second):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := startRun(s)
		advance(90 * time.Second) // the run started at 1:00 is going
		if _, err := s.RunOnce(context.Background(), "slow"); !errors.Is(err, jobs.ErrBusy) {
			t.Errorf("RunOnce during a run: %v, want ErrBusy", err)
		}
		advance(6*time.Minute + 20*time.Second) // to 7:50
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		// Runs start at 1:00, 4:00 and 7:00 (each ends at +2:30); the ticks
		// at 2:00, 3:00, 5:00 and 6:00 are skipped.
		if maxRunning.Load() != 1 || runs.Load() != 3 {
			t.Errorf("%d runs, at most %d at once; want 3 runs, 1 at once", runs.Load(), maxRunning.Load())
		}
		if n := len(logs.lines("tick skipped", "job=slow")); n != 4 {
			t.Errorf("%d skipped ticks logged, want 4:\n%s", n, strings.Join(logs.lines(), "\n"))
		}
		var outs []jobs.Outcome
		for _, r := range history(t, store, "slow") {
			outs = append(outs, r.Outcome)
		}
		// The run started at 7:00 was cancelled by the stop at 7:50.
		if want := []jobs.Outcome{jobs.Cancelled, jobs.OK, jobs.OK}; !slices.Equal(outs, want) {
			t.Errorf("outcomes newest first %v, want %v", outs, want)
		}
	})
}

// TestPanicRecorded: a panicking scheduled run is recorded as panicked and
// the schedule carries on.
func TestPanicRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := quota.NewMemoryStore()
		var logs logBuf
		s := jobs.New(store, jobs.WithLogger(logs.logger()))
		n := 0
		err := s.Add("flaky", "@every 10m", func(context.Context, *jobs.Run) error {
			n++
			if n == 1 {
				panic("index out of range in the parser")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := startRun(s)
		advance(21 * time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h := history(t, store, "flaky")
		if len(h) != 2 || h[1].Outcome != jobs.Panicked || h[1].Error != "panic: index out of range in the parser" || h[0].Outcome != jobs.OK {
			t.Errorf("history %+v", h)
		}
		if len(logs.lines("run panicked", "job=flaky", "stack=")) != 1 {
			t.Errorf("panic not logged with its stack:\n%s", strings.Join(logs.lines(), "\n"))
		}
	})
}

// TestGracefulStop: at stop, running jobs' contexts are cancelled; a job that
// saves its checkpoint and returns is recorded cancelled, one that ignores
// its context is cut off after the stop timeout, logged and recorded
// abandoned with what it had spent, and Run's error names it.
func TestGracefulStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := quota.NewMemoryStore()
		l := newLimiter(t, store, time.Now, "units", 1000)
		var logs logBuf
		s := jobs.New(store, jobs.WithLogger(logs.logger()), jobs.WithStopTimeout(20*time.Second))

		err := s.Add("polite", "@every 1m", func(ctx context.Context, run *jobs.Run) error {
			for page := 0; ; page++ {
				if _, err := take(ctx, l, "units", 1); err != nil {
					return err
				}
				select {
				case <-time.After(10 * time.Second): // fetch a page
				case <-ctx.Done():
					// Save where we are on the way out.
					if err := run.Save(context.WithoutCancel(ctx), page); err != nil {
						return err
					}
					return context.Cause(ctx)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var stubbornDone sync.WaitGroup
		stubbornDone.Add(1)
		err = s.Add("stubborn", "@every 1m", func(ctx context.Context, run *jobs.Run) error {
			defer stubbornDone.Done()
			if _, err := take(ctx, l, "units", 7); err != nil {
				return err
			}
			<-release // ignores ctx
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}

		stop := startRun(s)
		advance(time.Minute + 35*time.Second) // both started at 1:00
		stopErr := stop()
		if stopErr == nil || !strings.Contains(stopErr.Error(), "1 run(s) cut off") || !strings.Contains(stopErr.Error(), "stubborn") || strings.Contains(stopErr.Error(), "polite") {
			t.Errorf("Run error = %v, want stubborn named as cut off", stopErr)
		}
		// Run returned after the stop timeout, not later.
		if got, want := time.Now(), epoch.Add(time.Minute+35*time.Second+20*time.Second); !got.Equal(want) {
			t.Errorf("Run returned at %v, want %v", got, want)
		}

		h := history(t, store, "polite")
		if len(h) != 1 || h[0].Outcome != jobs.Cancelled || !strings.Contains(h[0].Error, jobs.ErrStopped.Error()) || h[0].Spent["youtube/units"] != 4 {
			t.Errorf("polite history %+v", h)
		}
		if cp, found, err := jobs.LoadCheckpoint(context.Background(), store, "polite"); err != nil || !found || string(cp.Cursor) != "3" {
			t.Errorf("polite checkpoint %s, %v, %v; want page 3", cp.Cursor, found, err)
		}
		h = history(t, store, "stubborn")
		if len(h) != 1 || h[0].Outcome != jobs.Abandoned || h[0].Spent["youtube/units"] != 7 || h[0].Duration() != 55*time.Second {
			t.Errorf("stubborn history %+v", h)
		}
		if n := len(logs.lines("cut off", "job=stubborn", "running_for=55s")); n != 1 {
			t.Errorf("cut-off logged %d times, want 1:\n%s", n, strings.Join(logs.lines(), "\n"))
		}

		// When the cut-off job returns at last, it is not recorded twice.
		close(release)
		stubbornDone.Wait()
		synctest.Wait()
		if h := history(t, store, "stubborn"); len(h) != 1 {
			t.Errorf("stubborn recorded %d times", len(h))
		}
	})
}

func TestRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := jobs.New(quota.NewMemoryStore(), jobs.WithLogger(new(logBuf).logger()))
		stop := startRun(s)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Run(ctx); err == nil {
			t.Error("second Run succeeded")
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestWithTimeout: a run past its own timeout fails (it is not a stop).
func TestWithTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := quota.NewMemoryStore()
		s := jobs.New(store, jobs.WithLogger(new(logBuf).logger()))
		err := s.Add("slow", "", func(ctx context.Context, _ *jobs.Run) error {
			<-ctx.Done()
			return ctx.Err()
		}, jobs.WithTimeout(5*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.RunOnce(context.Background(), "slow")
		if rec.Outcome != jobs.Failed || !errors.Is(err, context.DeadlineExceeded) || rec.Duration() != 5*time.Minute {
			t.Errorf("outcome %q after %v, err %v", rec.Outcome, rec.Duration(), err)
		}
	})
}
