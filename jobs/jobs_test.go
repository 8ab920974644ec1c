package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

func TestOutcomes(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("upstream said no")
	tests := []struct {
		name      string
		job       func(l *quota.Limiter) jobs.Func
		ctx       func() context.Context
		want      jobs.Outcome
		wantErr   bool   // RunOnce returns an error
		errText   string // in Record.Error
		spent     map[string]int64
		exhausted *jobs.Exhaustion
	}{
		{
			name: "ok",
			job: func(l *quota.Limiter) jobs.Func {
				return func(ctx context.Context, _ *jobs.Run) error { _, err := take(ctx, l, "units", 3); return err }
			},
			want:  jobs.OK,
			spent: map[string]int64{"youtube/units": 3},
		},
		{
			name: "exhausted",
			job: func(l *quota.Limiter) jobs.Func {
				return func(ctx context.Context, _ *jobs.Run) error {
					for {
						if _, err := take(ctx, l, "units", 4); err != nil {
							return fmt.Errorf("fetch page: %w", err)
						}
					}
				}
			},
			want:    jobs.Exhausted,
			errText: "fetch page: quota: youtube/units exhausted",
			spent:   map[string]int64{"youtube/units": 8},
			exhausted: &jobs.Exhaustion{Budget: "youtube/units", Used: 8, Limit: 10, Left: 2, Cost: 4,
				RetryAt: newClock().Now().Add(time.Hour)},
		},
		{
			name: "exhausted by mark",
			job: func(l *quota.Limiter) jobs.Func {
				return func(ctx context.Context, _ *jobs.Run) error {
					if err := l.Exhaust(ctx, key, "units", newClock().Now().Add(3*time.Hour)); err != nil {
						return err
					}
					_, err := take(ctx, l, "units", 1)
					return err
				}
			},
			want:      jobs.Exhausted,
			errText:   "marked spent",
			exhausted: &jobs.Exhaustion{Budget: "youtube/units", Used: 0, Limit: 10, Left: 0, Cost: 1, RetryAt: newClock().Now().Add(3 * time.Hour)},
		},
		{
			name: "failed",
			job: func(l *quota.Limiter) jobs.Func {
				return func(ctx context.Context, _ *jobs.Run) error {
					if _, err := take(ctx, l, "units", 2); err != nil {
						return err
					}
					return errBoom
				}
			},
			want: jobs.Failed, wantErr: true, errText: "upstream said no",
			spent: map[string]int64{"youtube/units": 2},
		},
		{
			name: "invalid charge fails",
			job: func(l *quota.Limiter) jobs.Func {
				return func(ctx context.Context, _ *jobs.Run) error { _, err := take(ctx, l, "nosuch", 1); return err }
			},
			want: jobs.Failed, wantErr: true, errText: `unknown budget "nosuch"`,
		},
		{
			name: "panicked",
			job: func(l *quota.Limiter) jobs.Func {
				return func(ctx context.Context, _ *jobs.Run) error {
					if _, err := take(ctx, l, "units", 1); err != nil {
						return err
					}
					var m map[string]int
					m["x"] = 1 // nil map write
					return nil
				}
			},
			want: jobs.Panicked, wantErr: true, errText: "panic: assignment to entry in nil map",
			spent: map[string]int64{"youtube/units": 1},
		},
		{
			name: "cancelled",
			job: func(l *quota.Limiter) jobs.Func {
				return func(ctx context.Context, _ *jobs.Run) error { <-ctx.Done(); return ctx.Err() }
			},
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
			want: jobs.Cancelled, wantErr: true, errText: "context canceled",
		},
		{
			name: "cancelled but exhausted first",
			job: func(l *quota.Limiter) jobs.Func {
				return func(ctx context.Context, _ *jobs.Run) error {
					return &quota.ExhaustedError{API: "youtube", Budget: "units", Used: 10, Limit: 10, Cost: 1}
				}
			},
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
			want: jobs.Exhausted, errText: "exhausted",
			exhausted: &jobs.Exhaustion{Budget: "youtube/units", Used: 10, Limit: 10, Left: 0, Cost: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := quota.NewMemoryStore()
			clock := newClock()
			l := newLimiter(t, store, clock.Now, "units", 10)
			var logs logBuf
			s := jobs.New(store, jobs.WithLogger(logs.logger()), jobs.WithClock(clock.Now))
			if err := s.Add("ingest", "", tt.job(l)); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			rec, err := s.RunOnce(ctx, "ingest")
			if (err != nil) != tt.wantErr {
				t.Fatalf("RunOnce error = %v, want error: %v", err, tt.wantErr)
			}
			if rec.Outcome != tt.want {
				t.Errorf("outcome = %q, want %q (error %q)", rec.Outcome, tt.want, rec.Error)
			}
			if !strings.Contains(rec.Error, tt.errText) {
				t.Errorf("error text = %q, want it to contain %q", rec.Error, tt.errText)
			}
			if !maps.Equal(rec.Spent, tt.spent) {
				t.Errorf("spent = %v, want %v", rec.Spent, tt.spent)
			}
			if (rec.Exhausted == nil) != (tt.exhausted == nil) || rec.Exhausted != nil && !sameExhaustion(*rec.Exhausted, *tt.exhausted) {
				t.Errorf("exhausted = %+v, want %+v", rec.Exhausted, tt.exhausted)
			}
			if rec.Job != "ingest" || rec.Trigger != jobs.Once || rec.Run == "" || !rec.Start.Equal(clock.Now()) {
				t.Errorf("record = %+v", rec)
			}

			// The store holds the same record, as JSON.
			h := history(t, store, "ingest")
			if len(h) != 1 || h[0].Run != rec.Run || h[0].Outcome != rec.Outcome || !maps.Equal(h[0].Spent, rec.Spent) || h[0].Error != rec.Error {
				t.Errorf("history = %+v, want [%+v]", h, rec)
			}

			// One log line per run; the exhausted one names what the
			// operator needs.
			if got := logs.lines("job=ingest"); len(got) != 1 {
				t.Errorf("logged %d lines for the run, want 1:\n%s", len(got), strings.Join(got, "\n"))
			}
			if tt.want == jobs.Exhausted && tt.exhausted.RetryAt.IsZero() == false {
				want := []string{"budget exhausted", "job=ingest", "budget=youtube/units", fmt.Sprintf("left=%d", tt.exhausted.Left),
					"capacity_returns=" + tt.exhausted.RetryAt.Format("2006-01-02T15:04:05.000Z07:00")}
				if got := logs.lines(want...); len(got) != 1 {
					t.Errorf("no log line with %q:\n%s", want, strings.Join(logs.lines(), "\n"))
				}
			}
			if tt.want == jobs.Panicked && len(logs.lines("run panicked", "stack=", "jobs_test.go")) != 1 {
				t.Errorf("panic logged without its stack:\n%s", strings.Join(logs.lines(), "\n"))
			}
		})
	}
}

func TestRunOnceErrors(t *testing.T) {
	t.Parallel()
	s := jobs.New(quota.NewMemoryStore(), jobs.WithLogger(new(logBuf).logger()))
	if _, err := s.RunOnce(context.Background(), "nope"); !errors.Is(err, quota.ErrNotFound) {
		t.Errorf("unknown job: err = %v, want ErrNotFound", err)
	}
	for _, tc := range []struct{ name, spec string }{
		{"bad name!", ""}, {"ingest", "not a spec"}, {"ingest", "61 * * * *"}, {"ingest", "CRON_TZ=Nowhere/Land 0 0 * * *"},
	} {
		if err := s.Add(tc.name, tc.spec, func(context.Context, *jobs.Run) error { return nil }); !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("Add(%q, %q) = %v, want ErrInvalid", tc.name, tc.spec, err)
		}
	}
	if err := s.Add("ingest", "", nil); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("nil func: %v", err)
	}
	ok := func(context.Context, *jobs.Run) error { return nil }
	if err := s.Add("ingest", "@hourly", ok); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("ingest", "@hourly", ok); !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), "already registered") {
		t.Errorf("duplicate: %v", err)
	}
}

func TestSpentSubtractsRefunds(t *testing.T) {
	t.Parallel()
	store := quota.NewMemoryStore()
	clock := newClock()
	l := newLimiter(t, store, clock.Now, "units", 100, "search", 10)
	s := jobs.New(store, jobs.WithLogger(new(logBuf).logger()), jobs.WithClock(clock.Now))
	var mid map[string]int64
	err := s.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
		if _, err := l.Take(ctx, key, quota.Charge{Method: "search.list", Units: map[string]int64{"units": 5, "search": 1}}); err != nil {
			return err
		}
		res, err := take(ctx, l, "units", 7)
		if err != nil {
			return err
		}
		mid = run.Spent()
		if err := l.Refund(ctx, res); err != nil { // the call never reached the upstream
			return err
		}
		// Charges outside the run's context are not the run's.
		_, err = take(context.Background(), l, "units", 50)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.RunOnce(context.Background(), "ingest")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"youtube/units": 12, "youtube/search": 1}; !maps.Equal(mid, want) {
		t.Errorf("spent before the refund = %v, want %v", mid, want)
	}
	if want := map[string]int64{"youtube/units": 5, "youtube/search": 1}; !maps.Equal(rec.Spent, want) {
		t.Errorf("spent = %v, want %v", rec.Spent, want)
	}
	if rec.Charges != 2 {
		t.Errorf("charges = %d, want 2", rec.Charges)
	}
}

// TestCheckpointResume runs an ingestion of 10 items, one unit each, on a
// budget of 4 units an hour: each run stops exhausted and the next resumes
// where it stopped, until the cycle completes and starts over.
func TestCheckpointResume(t *testing.T) {
	t.Parallel()
	store := quota.NewMemoryStore()
	clock := newClock()
	l := newLimiter(t, store, clock.Now, "units", 4)
	s := jobs.New(store, jobs.WithLogger(new(logBuf).logger()), jobs.WithClock(clock.Now))
	type cursor struct {
		Next int `json:"next"`
	}
	var done []int
	resumedAt := []int{}
	err := s.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
		var c cursor
		found, err := run.Resume(ctx, &c)
		if err != nil {
			return err
		}
		if found {
			resumedAt = append(resumedAt, c.Next)
		} else {
			resumedAt = append(resumedAt, -1)
		}
		for ; c.Next < 10; c.Next++ {
			if _, err := take(ctx, l, "units", 1); err != nil {
				return err
			}
			done = append(done, c.Next)
			if err := run.Save(ctx, cursor{Next: c.Next + 1}); err != nil {
				return err
			}
		}
		return run.Clear(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []jobs.Outcome
	for range 4 {
		rec, err := s.RunOnce(context.Background(), "ingest")
		if err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, rec.Outcome)
		clock.Add(time.Hour) // the window frees up
	}
	if want := []jobs.Outcome{jobs.Exhausted, jobs.Exhausted, jobs.OK, jobs.Exhausted}; !slices.Equal(outcomes, want) {
		t.Errorf("outcomes = %v, want %v", outcomes, want)
	}
	if want := []int{-1, 4, 8, -1}; !slices.Equal(resumedAt, want) {
		t.Errorf("resumed at %v, want %v", resumedAt, want)
	}
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3}; !slices.Equal(done, want) {
		t.Errorf("items done %v, want %v", done, want)
	}
	cp, found, err := jobs.LoadCheckpoint(context.Background(), store, "ingest")
	if err != nil || !found || string(cp.Cursor) != `{"next":4}` || cp.Job != "ingest" {
		t.Errorf("checkpoint = %+v, %v, %v", cp, found, err)
	}
	if h := history(t, store, "ingest"); cp.Run != h[0].Run {
		t.Errorf("checkpoint saved by run %q, want the last run %q", cp.Run, h[0].Run)
	}
}

func TestResumeBadCheckpoint(t *testing.T) {
	t.Parallel()
	store := quota.NewMemoryStore()
	s := jobs.New(store, jobs.WithLogger(new(logBuf).logger()))
	err := s.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
		if err := run.Save(ctx, map[string]string{"next": "page-2"}); err != nil {
			return err
		}
		var n struct{ Next int }
		_, err := run.Resume(ctx, &n)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.RunOnce(context.Background(), "ingest")
	if rec.Outcome != jobs.Failed || err == nil || !strings.Contains(err.Error(), "checkpoint does not fit") {
		t.Errorf("outcome %q, err %v", rec.Outcome, err)
	}
	if err := s.Add("chan", "", func(ctx context.Context, run *jobs.Run) error { return run.Save(ctx, make(chan int)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunOnce(context.Background(), "chan"); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("unmarshalable cursor: %v, want ErrInvalid", err)
	}
}

func TestHistoryBounded(t *testing.T) {
	t.Parallel()
	store := quota.NewMemoryStore()
	clock := newClock()
	s := jobs.New(store, jobs.WithLogger(new(logBuf).logger()), jobs.WithClock(clock.Now), jobs.WithHistory(3))
	n := 0
	for _, name := range []string{"trending", "backfill"} {
		err := s.Add(name, "", func(ctx context.Context, run *jobs.Run) error {
			n++
			if n%2 == 0 {
				return fmt.Errorf("run %d failed", n)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var runs []string
	for range 5 {
		rec, _ := s.RunOnce(context.Background(), "trending")
		runs = append(runs, rec.Run)
		clock.Add(time.Minute)
	}
	if _, err := s.RunOnce(context.Background(), "backfill"); err == nil {
		t.Fatal("backfill run 6 should fail")
	}

	h := history(t, store, "trending")
	var got []string
	var outs []jobs.Outcome
	for _, r := range h {
		got = append(got, r.Run)
		outs = append(outs, r.Outcome)
	}
	if want := []string{runs[4], runs[3], runs[2]}; !slices.Equal(got, want) {
		t.Errorf("history runs = %v, want the newest 3 newest first %v", got, want)
	}
	if want := []jobs.Outcome{jobs.OK, jobs.Failed, jobs.OK}; !slices.Equal(outs, want) {
		t.Errorf("outcomes = %v, want %v", outs, want)
	}
	if !h[0].Start.Equal(newClock().Now().Add(4*time.Minute)) || h[0].Start.After(h[0].End) {
		t.Errorf("newest run start %v end %v", h[0].Start, h[0].End)
	}
	two, err := jobs.History(context.Background(), store, "trending", 2)
	if err != nil || len(two) != 2 || two[0].Run != runs[4] {
		t.Errorf("History(2) = %+v, %v", two, err)
	}
	names, err := jobs.Names(context.Background(), store)
	if err != nil || !slices.Equal(names, []string{"backfill", "trending"}) {
		t.Errorf("Names = %v, %v", names, err)
	}
	if h, err := jobs.History(context.Background(), store, "nothing", 5); err != nil || len(h) != 0 {
		t.Errorf("History of a job with no runs = %v, %v", h, err)
	}
	if _, err := jobs.History(context.Background(), store, "../x", 5); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("bad name: %v", err)
	}
}

// TestAllocation: backfill may spend at most 2,000 of the 9,500 units; its
// charges hit both budgets in one atomic take.
func TestAllocation(t *testing.T) {
	t.Parallel()
	store := quota.NewMemoryStore()
	clock := newClock()
	l := newLimiter(t, store, clock.Now, "units", 9500, "backfill", 2000)
	s := jobs.New(store, jobs.WithLogger(new(logBuf).logger()), jobs.WithClock(clock.Now))
	spend := func(ctx context.Context, _ *jobs.Run) error {
		for {
			if _, err := take(ctx, l, "units", 300); err != nil {
				return err
			}
		}
	}
	if err := s.Add("backfill", "", spend, jobs.WithAllocation("backfill", "units")); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("trending", "", spend); err != nil {
		t.Fatal(err)
	}
	status := func() map[string]int64 {
		t.Helper()
		us, err := l.Status(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		for _, u := range us {
			m[u.Budget] = u.Used
		}
		return m
	}

	rec, err := s.RunOnce(context.Background(), "backfill")
	if err != nil {
		t.Fatal(err)
	}
	// 6 × 300 = 1,800 fit in the allocation; the 7th would make 2,100.
	if rec.Outcome != jobs.Exhausted || rec.Exhausted.Budget != "youtube/backfill" || rec.Exhausted.Left != 200 {
		t.Errorf("backfill run: %q, %+v", rec.Outcome, rec.Exhausted)
	}
	if want := map[string]int64{"youtube/units": 1800, "youtube/backfill": 1800}; !maps.Equal(rec.Spent, want) {
		t.Errorf("backfill spent %v, want %v", rec.Spent, want)
	}
	if got, want := status(), map[string]int64{"units": 1800, "backfill": 1800}; !maps.Equal(got, want) {
		t.Errorf("usage %v, want %v", got, want)
	}

	// The shared budget stays open to other jobs: trending spends the rest.
	rec, err = s.RunOnce(context.Background(), "trending")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Outcome != jobs.Exhausted || rec.Exhausted.Budget != "youtube/units" || rec.Spent["youtube/units"] != 7500 || rec.Spent["youtube/backfill"] != 0 {
		t.Errorf("trending run: %q, %+v, spent %v", rec.Outcome, rec.Exhausted, rec.Spent)
	}

	// Atomic: with 200 units of the allocation left but the shared budget
	// full, backfill's take is refused by "units" and charges neither.
	clock.Add(time.Hour + time.Second)
	if err := l.Adjust(context.Background(), key, "units", 9400); err != nil {
		t.Fatal(err)
	}
	rec, err = s.RunOnce(context.Background(), "backfill")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Outcome != jobs.Exhausted || rec.Exhausted.Budget != "youtube/units" || len(rec.Spent) != 0 {
		t.Errorf("backfill on a full shared budget: %q, %+v, spent %v", rec.Outcome, rec.Exhausted, rec.Spent)
	}
	if got, want := status(), map[string]int64{"units": 9400, "backfill": 0}; !maps.Equal(got, want) {
		t.Errorf("usage after the refused take %v, want %v", got, want)
	}
}

// TestAllocationNeedsBudget: an allocation the limiter does not define fails
// the run loudly rather than spending uncapped.
func TestAllocationNeedsBudget(t *testing.T) {
	t.Parallel()
	store := quota.NewMemoryStore()
	l := newLimiter(t, store, newClock().Now, "units", 100)
	s := jobs.New(store, jobs.WithLogger(new(logBuf).logger()))
	err := s.Add("backfill", "", func(ctx context.Context, _ *jobs.Run) error { _, err := take(ctx, l, "units", 1); return err },
		jobs.WithAllocation("backfill", "units"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.RunOnce(context.Background(), "backfill")
	if rec.Outcome != jobs.Failed || !errors.Is(err, quota.ErrInvalid) || !strings.Contains(rec.Error, `"backfill"`) {
		t.Errorf("outcome %q, err %v", rec.Outcome, err)
	}
}

func sameExhaustion(a, b jobs.Exhaustion) bool {
	ta, tb := a.RetryAt, b.RetryAt
	a.RetryAt, b.RetryAt = time.Time{}, time.Time{}
	return a == b && ta.Equal(tb)
}
