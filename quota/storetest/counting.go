package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// boundaryBurst: a fixed-window counter admits a full burst on each side of
// a boundary; a sliding log admits the limit in any window, whatever the
// alignment.
func (s suite) boundaryBurst(t *testing.T) {
	clock := NewClock(T0.Add(59 * time.Minute))
	l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)})
	for range 10 {
		mustTake(t, l, key, quota.Units("units", 1))
	}
	clock.Set(T0.Add(time.Hour)) // where a fixed window would reset
	ee := mustRefuse(t, l, key, quota.Units("units", 1))
	if ee.RetryAfter != 59*time.Minute || !ee.RetryAt.Equal(T0.Add(119*time.Minute)) {
		t.Fatalf("RetryAfter = %v (at %v), want 59m (at %v)", ee.RetryAfter, ee.RetryAt, T0.Add(119*time.Minute))
	}
	if ee.Budget != "units" || ee.Used != 10 || ee.Limit != 10 || ee.Cost != 1 {
		t.Fatalf("ExhaustedError = %+v", ee)
	}
	clock.Set(T0.Add(119*time.Minute - time.Microsecond))
	mustRefuse(t, l, key, quota.Units("units", 1))
	clock.Set(T0.Add(119 * time.Minute))
	for range 10 {
		mustTake(t, l, key, quota.Units("units", 1))
	}
	mustRefuse(t, l, key, quota.Units("units", 1))
}

func (s suite) weightedCosts(t *testing.T) {
	clock := NewClock(T0)
	l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "units", Limit: 250, Window: quota.Sliding(24 * time.Hour)})
	r := mustTake(t, l, key, quota.Units("units", 100))
	if got := r.Remaining("units"); got != 150 {
		t.Fatalf("Remaining after 100 = %d, want 150", got)
	}
	clock.Add(time.Second)
	r = mustTake(t, l, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 1}})
	if got := r.Remaining("units"); got != 149 || r.Usage[0].Used != 101 || r.Usage[0].Cost != 1 || r.Method != "videos.list" {
		t.Fatalf("after 100+1: %+v", r.Usage)
	}
	clock.Add(time.Second)
	mustTake(t, l, key, quota.Units("units", 100))
	ee := mustRefuse(t, l, key, quota.Units("units", 50))
	if ee.Used != 201 || ee.Cost != 50 {
		t.Fatalf("refusal = %+v, want used 201 cost 50", ee)
	}
	mustTake(t, l, key, quota.Units("units", 49))
	// One entry per call, the cost inside it.
	es, err := l.Entries(context.Background(), key, "units")
	if err != nil {
		t.Fatal(err)
	}
	var costs []int64
	for _, e := range es {
		costs = append(costs, e.Cost)
	}
	if !slices.Equal(costs, []int64{100, 1, 100, 49}) {
		t.Fatalf("entries' costs = %v, want [100 1 100 49]", costs)
	}
	// A cost over the limit can never succeed, and records nothing.
	_, err = l.Take(context.Background(), key, quota.Units("units", 251))
	if !errors.Is(err, quota.ErrCostExceedsLimit) || errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("cost 251 > limit 250: err = %v, want ErrCostExceedsLimit", err)
	}
	if got := used(t, l, key, "units"); got != 250 {
		t.Fatalf("used = %d, want 250", got)
	}
}

func (s suite) multiBudgetAtomic(t *testing.T) {
	clock := NewClock(T0)
	l := s.limiter(t, s.store(t), clock,
		quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)},
		quota.Budget{Name: "search", Limit: 2, Window: quota.Sliding(time.Hour)})
	both := quota.Charge{Method: "search.list", Units: map[string]int64{"units": 10, "search": 1}}
	r := mustTake(t, l, key, both)
	if len(r.Usage) != 2 {
		t.Fatalf("reservation usage = %+v, want 2 budgets", r.Usage)
	}
	mustTake(t, l, key, both)
	ee := mustRefuse(t, l, key, both)
	if ee.Budget != "search" {
		t.Fatalf("refusing budget = %q, want search", ee.Budget)
	}
	if got := used(t, l, key, "units"); got != 20 {
		t.Fatalf("units used after a refused multi-budget charge = %d, want 20 (nothing recorded)", got)
	}
	// The other order: units refuses, search must not be charged.
	l2 := s.limiter(t, s.store(t), clock,
		quota.Budget{Name: "units", Limit: 15, Window: quota.Sliding(time.Hour)},
		quota.Budget{Name: "search", Limit: 5, Window: quota.Sliding(time.Hour)})
	mustTake(t, l2, key, both)
	if ee := mustRefuse(t, l2, key, both); ee.Budget != "units" {
		t.Fatalf("refusing budget = %q, want units", ee.Budget)
	}
	if got := used(t, l2, key, "search"); got != 1 {
		t.Fatalf("search used = %d, want 1", got)
	}
	// When both refuse, the error names the one that frees up last.
	clock.Add(30 * time.Minute)
	l3 := s.limiter(t, s.store(t), clock,
		quota.Budget{Name: "a", Limit: 1, Window: quota.Sliding(time.Hour)},
		quota.Budget{Name: "b", Limit: 1, Window: quota.Sliding(2 * time.Hour)})
	mustTake(t, l3, key, quota.Charge{Units: map[string]int64{"a": 1, "b": 1}})
	ee = mustRefuse(t, l3, key, quota.Charge{Units: map[string]int64{"a": 1, "b": 1}})
	if ee.Budget != "b" || ee.RetryAfter != 2*time.Hour {
		t.Fatalf("refusal = %s after %v, want b after 2h", ee.Budget, ee.RetryAfter)
	}
}

func (s suite) retryAfterExact(t *testing.T) {
	clock := NewClock(T0)
	l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "units", Limit: 60, Window: quota.Sliding(time.Hour)})
	for i, c := range []int64{10, 20, 30} {
		clock.Set(T0.Add(time.Duration(i) * time.Minute))
		mustTake(t, l, key, quota.Units("units", c))
	}
	clock.Set(T0.Add(3 * time.Minute))
	for _, tc := range []struct {
		cost int64
		at   time.Time
	}{
		{1, T0.Add(time.Hour)},                  // the oldest entry frees 10
		{10, T0.Add(time.Hour)},                 // exactly covered by the oldest
		{11, T0.Add(time.Hour + time.Minute)},   // needs the second entry too
		{30, T0.Add(time.Hour + time.Minute)},   // 10+20 = 30
		{31, T0.Add(time.Hour + 2*time.Minute)}, // needs all three
		{60, T0.Add(time.Hour + 2*time.Minute)}, // the whole limit
	} {
		ee := mustRefuse(t, l, key, quota.Units("units", tc.cost))
		if !ee.RetryAt.Equal(tc.at) || ee.RetryAfter != tc.at.Sub(clock.Now()) {
			t.Errorf("cost %d: RetryAt %v (after %v), want %v (after %v)", tc.cost, ee.RetryAt, ee.RetryAfter, tc.at, tc.at.Sub(clock.Now()))
		}
	}
	// At RetryAt the charge fits, one microsecond before it does not.
	clock.Set(T0.Add(time.Hour + time.Minute - time.Microsecond))
	mustRefuse(t, l, key, quota.Units("units", 30))
	clock.Set(T0.Add(time.Hour + time.Minute))
	mustTake(t, l, key, quota.Units("units", 30))
	// A deficit covered deep in the log (stores may read it in batches).
	l2 := s.limiter(t, s.store(t), clock, quota.Budget{Name: "units", Limit: 150, Window: quota.Sliding(time.Hour)})
	for i := range 150 {
		clock.Set(T0.Add(time.Duration(i) * time.Second))
		mustTake(t, l2, key, quota.Units("units", 1))
	}
	for _, cost := range []int64{1, 4, 5, 37, 101, 150} {
		want := T0.Add(time.Hour + time.Duration(cost-1)*time.Second)
		if ee := mustRefuse(t, l2, key, quota.Units("units", cost)); !ee.RetryAt.Equal(want) {
			t.Errorf("150 entries, cost %d: RetryAt %v, want %v", cost, ee.RetryAt, want)
		}
	}
}

func (s suite) sameInstant(t *testing.T) {
	clock := NewClock(T0)
	l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Minute)})
	var rs []*quota.Reservation
	for range 5 {
		rs = append(rs, mustTake(t, l, key, quota.Units("units", 2)))
	}
	if got := used(t, l, key, "units"); got != 10 {
		t.Fatalf("five entries at one instant: used %d, want 10", got)
	}
	if err := l.Refund(context.Background(), rs[2]); err != nil {
		t.Fatal(err)
	}
	if got := used(t, l, key, "units"); got != 8 {
		t.Fatalf("refund of one of five same-instant entries: used %d, want 8", got)
	}
	es, err := l.Entries(context.Background(), key, "units")
	if err != nil || len(es) != 4 {
		t.Fatalf("Entries = %v, %v; want 4", es, err)
	}
}

// dailyDST checks the 23- and 25-hour days of America/Los_Angeles.
func (s suite) dailyDST(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		day   time.Time
		hours time.Duration
	}{
		{"spring-forward-23h", time.Date(2026, 3, 8, 0, 0, 0, 0, la), 23 * time.Hour},
		{"fall-back-25h", time.Date(2026, 11, 1, 0, 0, 0, 0, la), 25 * time.Hour},
		{"ordinary-24h", time.Date(2026, 11, 22, 0, 0, 0, 0, la), 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock(tc.day.Add(30 * time.Minute))
			l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "units", Limit: 10, Window: quota.Daily(la)})
			next := time.Date(tc.day.Year(), tc.day.Month(), tc.day.Day()+1, 0, 0, 0, 0, la)
			if next.Sub(tc.day) != tc.hours {
				t.Fatalf("test setup: day is %v long", next.Sub(tc.day))
			}
			r := mustTake(t, l, key, quota.Units("units", 4))
			if !r.Usage[0].Reset.Equal(next) {
				t.Fatalf("Reset = %v, want %v", r.Usage[0].Reset, next)
			}
			clock.Set(tc.day.Add(tc.hours - time.Hour)) // 23:00 local
			mustTake(t, l, key, quota.Units("units", 6))
			ee := mustRefuse(t, l, key, quota.Units("units", 1))
			if !ee.RetryAt.Equal(next) || ee.RetryAfter != time.Hour {
				t.Fatalf("RetryAt %v after %v, want %v after 1h", ee.RetryAt, ee.RetryAfter, next)
			}
			clock.Set(next.Add(-time.Microsecond))
			mustRefuse(t, l, key, quota.Units("units", 1))
			clock.Set(next)
			r = mustTake(t, l, key, quota.Units("units", 10))
			if r.Usage[0].Used != 10 {
				t.Fatalf("after reset: used %d, want 10", r.Usage[0].Used)
			}
		})
	}
}

func (s suite) expiry(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	l := s.limiter(t, st, clock, quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Minute)})
	mustTake(t, l, key, quota.Units("units", 7))
	us, err := l.Status(ctx, key)
	if err != nil || !us[0].Reset.Equal(T0.Add(time.Minute)) {
		t.Fatalf("Status = %+v, %v; want next free unit at %v", us, err, T0.Add(time.Minute))
	}
	clock.Add(time.Minute)
	us, err = l.Status(ctx, key)
	if err != nil || us[0].Used != 0 || us[0].Remaining != 10 || !us[0].Reset.IsZero() {
		t.Fatalf("Status after the window = %+v, %v", us, err)
	}
	if es, err := l.Entries(ctx, key, "units"); err != nil || len(es) != 0 {
		t.Fatalf("Entries after the window = %v, %v", es, err)
	}
	// Many decisions over a long time keep only the window's entries.
	for i := range 300 {
		clock.Add(time.Second)
		mustTake(t, l, key, quota.Units("units", 1))
		if i > 10 {
			if es, _ := l.Entries(ctx, key, "units"); len(es) != 10 {
				t.Fatalf("step %d: %d entries in the window, want 10", i, len(es))
			}
		}
		clock.Add(5 * time.Second)
	}
}
