// Package storetest is the conformance suite every quota.Store passes, in
// the manner of testing/fstest: a backend's test calls Run with a function
// that makes a fresh, empty store.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) quota.Store { return quota.NewMemoryStore() })
//	}
//
// The suite drives each store through quota.Limiter with an injected clock
// (fixed instants, never sleeping): boundary bursts, weighted costs,
// multi-budget atomicity, exact RetryAfter, refund, exhaust, adjust, daily
// reset across DST, expiry, concurrency, bad input, the catalog, usage by
// method and job (Breakdown), threshold marks (MarkCrossing), a caller
// whose context is done (never a store outage, never admitted), and
// quota.StateStore, which every store must also implement (jobs keeps its
// checkpoints and run history there). MatchesMemory drives a store and the
// MemoryStore, the reference, through one long random run and requires the
// same answers at every step.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
)

// Clock is a fake clock for tests: Now returns the set instant; Set and Add
// move it. It is safe for concurrent use. It is the module's one fake
// clock, internal/testkit's, under the name the suite has always given it.
type Clock = testkit.Clock

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return testkit.NewClock(t) }

// T0 is the instant the suite starts its clocks at.
var T0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

type suite struct {
	newStore func(t *testing.T) quota.Store
}

// Run runs the conformance suite. newStore must return a fresh store with no
// data visible to other calls (a new database, or a unique key prefix); the
// suite closes it at the end of each subtest.
func Run(t *testing.T, newStore func(t *testing.T) quota.Store) {
	s := suite{newStore: newStore}
	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"BoundaryBurst", s.boundaryBurst},
		{"WeightedCosts", s.weightedCosts},
		{"MultiBudgetAtomic", s.multiBudgetAtomic},
		{"ManyBudgets", s.manyBudgets},
		{"RetryAfterExact", s.retryAfterExact},
		{"SameInstantEntries", s.sameInstant},
		{"Refund", s.refund},
		{"RefundByIDUndefinedBudget", s.refundUndefined},
		{"Settle", s.settle},
		{"SettleMultiBudget", s.settleMulti},
		{"HeldEntries", s.held},
		{"BudgetLeases", s.budgetLeases},
		{"LeaseBreakdownAcrossHour", s.leaseBreakdownAcrossHour},
		{"AdjustKeepsOpenLeases", s.adjustKeepsOpenLeases},
		{"ChangeVersion", s.changeVersion},
		{"LocalRefusals", s.localRefusals},
		{"Exhaust", s.exhaust},
		{"Adjust", s.adjust},
		{"DailyResetDST", s.dailyDST},
		{"Expiry", s.expiry},
		{"Isolation", s.isolation},
		{"Catalog", s.catalog},
		{"OwnersShareUsage", s.ownersShare},
		{"RotationKeepsUsage", s.rotation},
		{"RotateOntoRecordedSecret", s.rotateOntoRecorded},
		{"LabelCollision", s.labelCollision},
		{"ForgetKeepsUsage", s.forget},
		{"Relabel", s.relabel},
		{"CatalogRace", s.catalogRace},
		{"RegisterOwnerIfNew", s.registerOwnerIfNew},
		{"BadInput", s.badInput},
		{"Concurrency", s.concurrency},
		{"StateStore", s.stateStore},
		{"MidnightDST", s.midnightDST},
		{"ClockStepsBack", s.clockStepsBack},
		{"AdjustAfterClockStepsBack", s.adjustAfterStepBack},
		{"Extremes", s.extremes},
		{"Redefine", s.redefine},
		{"RedefineKeepsDay", s.redefineKeepsDay},
		{"StateStoreLeases", s.leases},
		{"BreakdownByMethod", s.breakdownByMethod},
		{"Crossings", s.crossings},
		{"CancelledTake", s.cancelledTake},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.fn)
	}
}

func (s suite) store(t *testing.T) quota.Store {
	t.Helper()
	st := s.newStore(t)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func (s suite) limiter(t *testing.T, st quota.Store, clock *Clock, budgets ...quota.Budget) *quota.Limiter {
	t.Helper()
	l, err := quota.New(st, "api", budgets, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatalf("quota.New: %v", err)
	}
	return l
}

var key = quota.Credential{Secret: "AIzaSy-test-secret-0123456789", Label: "key-1"}

func mustTake(t *testing.T, l *quota.Limiter, c quota.Credential, ch quota.Charge) *quota.Reservation {
	t.Helper()
	r, err := l.Take(context.Background(), c, ch)
	if err != nil {
		t.Fatalf("Take(%v) at %v: %v", ch.Units, r, err)
	}
	return r
}

func mustRefuse(t *testing.T, l *quota.Limiter, c quota.Credential, ch quota.Charge) *quota.ExhaustedError {
	t.Helper()
	r, err := l.Take(context.Background(), c, ch)
	var ee *quota.ExhaustedError
	if !errors.As(err, &ee) || !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("Take(%v) = %v, %v; want *ExhaustedError", ch.Units, r, err)
	}
	return ee
}

func used(t *testing.T, l *quota.Limiter, c quota.Credential, budget string) int64 {
	t.Helper()
	us, err := l.Status(context.Background(), c)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	for _, u := range us {
		if u.Budget == budget {
			return u.Used
		}
	}
	t.Fatalf("Status has no budget %q", budget)
	return 0
}

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

func (s suite) refund(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	l := s.limiter(t, s.store(t), clock,
		quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)},
		quota.Budget{Name: "search", Limit: 10, Window: quota.Sliding(time.Hour)})
	r1 := mustTake(t, l, key, quota.Charge{Units: map[string]int64{"units": 50, "search": 1}})
	clock.Add(time.Second)
	r2 := mustTake(t, l, key, quota.Units("units", 30))
	clock.Add(time.Second)
	if err := l.Refund(ctx, r1); err != nil {
		t.Fatalf("Refund: %v", err)
	}
	if u, s := used(t, l, key, "units"), used(t, l, key, "search"); u != 30 || s != 0 {
		t.Fatalf("after refund: units %d search %d, want 30 and 0", u, s)
	}
	if err := l.Refund(ctx, r1); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("second Refund = %v, want ErrNotFound", err)
	}
	// By ID alone, as `quotactl refund ID` does, from another limiter.
	p, err := quota.ParseReservationID(r2.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, p); err != nil {
		t.Fatalf("Refund by ID: %v", err)
	}
	if u := used(t, l, key, "units"); u != 0 {
		t.Fatalf("after refund by ID: used %d, want 0", u)
	}
	// A refund after the entry left the window finds nothing.
	r3 := mustTake(t, l, key, quota.Units("units", 5))
	clock.Add(time.Hour)
	if err := l.Refund(ctx, r3); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("Refund of expired = %v, want ErrNotFound", err)
	}
	if _, err := quota.ParseReservationID("not-an-id"); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("ParseReservationID(bad) = %v, want ErrInvalid", err)
	}
}

// refundUndefined: a refund by ID through a limiter that no longer
// defines one of the reservation's budgets (deleted from the store, as
// `quotactl budget delete` does) gives back the others and reports the
// rest (ErrPartialRefund); the undefined budget's entries stay, older ones
// included, and a refund once it is defined again gives them back.
func (s suite) refundUndefined(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	units := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	search := quota.Budget{Name: "search", Limit: 10, Window: quota.Daily(time.UTC)}
	l := s.limiter(t, st, clock, units, search)
	mustTake(t, l, key, quota.Units("search", 2))
	clock.Add(30 * time.Minute)
	r := mustTake(t, l, key, quota.Charge{Method: "search.list", Units: map[string]int64{"units": 50, "search": 1}})
	clock.Add(time.Second)
	if err := st.DeleteBudget(ctx, "api", "search"); err != nil {
		t.Fatal(err)
	}
	refund := func() error {
		t.Helper()
		byID, err := quota.Load(ctx, st, "api", quota.WithClock(clock.Now))
		if err != nil {
			t.Fatal(err)
		}
		p, err := quota.ParseReservationID(r.ID())
		if err != nil {
			t.Fatal(err)
		}
		return byID.Refund(ctx, p)
	}
	err := refund()
	var pe *quota.PartialRefundError
	if !errors.As(err, &pe) || !errors.Is(err, quota.ErrPartialRefund) || !reflect.DeepEqual(pe.NotRefunded, []string{"search"}) || pe.Refunded["units"] != 50 {
		t.Fatalf("refund by ID with search undefined = %v; want a partial refund of units 50, search named", err)
	}
	if u, sr := used(t, l, key, "units"), used(t, l, key, "search"); u != 0 || sr != 3 {
		t.Fatalf("after the partial refund: units %d, search %d; want 0 and 3 (both search entries kept)", u, sr)
	}
	if err := st.DefineBudgets(ctx, "api", []quota.Budget{search}); err != nil {
		t.Fatal(err)
	}
	if err := refund(); err != nil {
		t.Fatalf("refund by ID once search is defined again: %v", err)
	}
	if u, sr := used(t, l, key, "units"), used(t, l, key, "search"); u != 0 || sr != 2 {
		t.Fatalf("after the second refund: units %d, search %d; want 0 and 2", u, sr)
	}
}

func (s suite) exhaust(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(24 * time.Hour)})
	mustTake(t, l, key, quota.Units("units", 10))
	until := T0.Add(90 * time.Minute)
	if err := l.Exhaust(ctx, key, "units", until); err != nil {
		t.Fatal(err)
	}
	ee := mustRefuse(t, l, key, quota.Units("units", 1))
	if ee.RetryAfter != 90*time.Minute || !ee.ExhaustedUntil.Equal(until) || ee.Used != 10 {
		t.Fatalf("refusal while exhausted = %+v", ee)
	}
	us, err := l.Status(ctx, key)
	if err != nil || us[0].Remaining != 0 || !us[0].ExhaustedUntil.Equal(until) || us[0].Used != 10 {
		t.Fatalf("Status while exhausted = %+v, %v", us, err)
	}
	clock.Set(until.Add(-time.Microsecond))
	mustRefuse(t, l, key, quota.Units("units", 1))
	clock.Set(until)
	mustTake(t, l, key, quota.Units("units", 1))
	if us, _ := l.Status(ctx, key); !us[0].ExhaustedUntil.IsZero() || us[0].Remaining != 89 {
		t.Fatalf("Status after the mark ended = %+v", us)
	}
	// A zero until clears a mark early.
	if err := l.Exhaust(ctx, key, "units", until.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, l, key, quota.Units("units", 1))
	if err := l.Exhaust(ctx, key, "units", time.Time{}); err != nil {
		t.Fatal(err)
	}
	mustTake(t, l, key, quota.Units("units", 1))
}

func (s suite) adjust(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)})
	mustTake(t, l, key, quota.Units("units", 10))
	if err := l.Exhaust(ctx, key, "units", T0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := l.Adjust(ctx, key, "units", 95); err != nil {
		t.Fatal(err)
	}
	if got := used(t, l, key, "units"); got != 95 {
		t.Fatalf("after Adjust(95): used %d", got)
	}
	mustTake(t, l, key, quota.Units("units", 5)) // the exhaustion mark is gone
	mustRefuse(t, l, key, quota.Units("units", 1))
	if err := l.Adjust(ctx, key, "units", 0); err != nil {
		t.Fatal(err)
	}
	if got := used(t, l, key, "units"); got != 0 {
		t.Fatalf("after Adjust(0): used %d", got)
	}
	if err := l.Adjust(ctx, key, "units", 101); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("Adjust over the limit = %v, want ErrInvalid", err)
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

func (s suite) isolation(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 5, Window: quota.Sliding(time.Hour)}
	yt, _ := quota.New(st, "youtube", []quota.Budget{b}, quota.WithClock(clock.Now))
	gh, _ := quota.New(st, "github", []quota.Budget{b}, quota.WithClock(clock.Now))
	other := quota.Credential{Secret: "another-secret-key"}
	mustTake(t, yt, key, quota.Units("units", 5))
	mustRefuse(t, yt, key, quota.Units("units", 1))
	mustTake(t, gh, key, quota.Units("units", 5))
	mustTake(t, yt, other, quota.Units("units", 5))
	if us, err := gh.Status(ctx, other); err != nil || us[0].Used != 0 {
		t.Fatalf("github/units for another credential = %+v, %v; want unused", us, err)
	}
}

func (s suite) catalog(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	la, _ := time.LoadLocation("America/Los_Angeles")
	budgets := []quota.Budget{
		{Name: "units", Limit: 10000, Window: quota.Daily(la)},
		{Name: "search", Limit: 100, Window: quota.Sliding(24 * time.Hour)},
	}
	l, err := quota.New(st, "youtube", budgets, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	mustTake(t, l, key, quota.Units("units", 3))
	mustTake(t, l, quota.Credential{Secret: "second-key-xyz"}, quota.Units("units", 1))

	// Another process, with no configuration, sees the budgets and labels.
	l2, err := quota.Load(ctx, st, "youtube", quota.WithClock(clock.Now))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	got := l2.Budgets()
	slices.SortFunc(got, func(a, b quota.Budget) int { return cmpStr(a.Name, b.Name) })
	if len(got) != 2 || got[0].Name != "search" || got[0].Limit != 100 || got[0].Window.String() != "sliding:24h0m0s" ||
		got[1].Name != "units" || got[1].Window.String() != "daily:America/Los_Angeles" {
		t.Fatalf("loaded budgets = %v", got)
	}
	r := mustTake(t, l2, quota.Credential{Label: "key-1"}, quota.Units("units", 2))
	if r.Usage[0].Used != 5 {
		t.Fatalf("label-only take: used %d, want 5 (same credential)", r.Usage[0].Used)
	}
	if _, err := l2.Take(ctx, quota.Credential{Label: "nobody"}, quota.Units("units", 1)); !errors.Is(err, quota.ErrUnknownCredential) {
		t.Fatalf("unknown label: %v, want ErrUnknownCredential", err)
	}
	apis, err := st.List(ctx)
	if err != nil || len(apis) != 1 || apis[0].Name != "youtube" || len(apis[0].Credentials) != 2 {
		t.Fatalf("List = %+v, %v", apis, err)
	}
	fp := quota.DefaultFingerprint(key.Secret)
	var labels []string
	for _, c := range apis[0].Credentials {
		if c.ID == key.Secret || c.ID == "second-key-xyz" {
			t.Fatalf("the store lists a raw credential")
		}
		if c.ID == fp {
			labels = append(labels, c.Label)
		}
	}
	if !slices.Equal(labels, []string{"key-1"}) {
		t.Fatalf("labels of the fingerprint = %v, want [key-1]", labels)
	}
	if err := st.DeleteBudget(ctx, "youtube", "search"); err != nil {
		t.Fatal(err)
	}
	if apis, _ := st.List(ctx); len(apis[0].Budgets) != 1 {
		t.Fatalf("after DeleteBudget: %+v", apis[0].Budgets)
	}
	if err := st.DeleteBudget(ctx, "youtube", "search"); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("DeleteBudget of a missing budget = %v, want ErrNotFound", err)
	}
	if _, err := quota.Load(ctx, st, "nope"); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("Load of an unknown api = %v, want ErrNotFound", err)
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s suite) badInput(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	l := s.limiter(t, st, clock, quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)})
	mustTake(t, l, key, quota.Units("units", 3))
	for _, tc := range []struct {
		name string
		cred quota.Credential
		ch   quota.Charge
		want error
	}{
		{"zero cost", key, quota.Units("units", 0), quota.ErrInvalid},
		{"negative cost", key, quota.Units("units", -5), quota.ErrInvalid},
		{"unknown budget", key, quota.Units("nope", 1), quota.ErrInvalid},
		{"no budget", key, quota.Charge{Method: "x"}, quota.ErrInvalid},
		{"empty credential", quota.Credential{}, quota.Units("units", 1), quota.ErrInvalid},
		{"over the limit", key, quota.Units("units", 11), quota.ErrCostExceedsLimit},
	} {
		_, err := l.Take(ctx, tc.cred, tc.ch)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := used(t, l, key, "units"); got != 3 {
		t.Fatalf("bad input changed usage: %d, want 3", got)
	}
	for _, tc := range []struct {
		name    string
		api     string
		budgets []quota.Budget
	}{
		{"limit 0", "a", []quota.Budget{{Name: "u", Limit: 0, Window: quota.Sliding(time.Hour)}}},
		{"zero window", "a", []quota.Budget{{Name: "u", Limit: 1}}},
		{"zero duration", "a", []quota.Budget{{Name: "u", Limit: 1, Window: quota.Sliding(0)}}},
		{"nil zone", "a", []quota.Budget{{Name: "u", Limit: 1, Window: quota.Daily(nil)}}},
		{"duplicate", "a", []quota.Budget{{Name: "u", Limit: 1, Window: quota.Sliding(time.Hour)}, {Name: "u", Limit: 2, Window: quota.Sliding(time.Hour)}}},
		{"bad budget name", "a", []quota.Budget{{Name: "a/b", Limit: 1, Window: quota.Sliding(time.Hour)}}},
		{"bad api name", "x y", []quota.Budget{{Name: "u", Limit: 1, Window: quota.Sliding(time.Hour)}}},
		{"no budgets", "a", nil},
	} {
		if _, err := quota.New(st, tc.api, tc.budgets); !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("New with %s: err = %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, err := quota.ParseWindow("daily:Mars/Olympus_Mons"); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("unknown zone: %v", err)
	}
}

// concurrency: many goroutines with random costs at one instant. Accepted
// units never pass the limit, and no charge is refused while the budget
// could pay it (used only grows, so a refusal of cost c is right only if
// c > limit - final used).
func (s suite) concurrency(t *testing.T) {
	clock := NewClock(T0)
	st := s.store(t)
	const limit = 5000
	l := s.limiter(t, st, clock,
		quota.Budget{Name: "units", Limit: limit, Window: quota.Sliding(time.Hour)},
		quota.Budget{Name: "calls", Limit: 1000, Window: quota.Sliding(time.Hour)})
	creds := []quota.Credential{key, {Secret: "k2"}}
	var accepted [2]atomic.Int64
	var mu sync.Mutex
	refused := map[int][]int64{}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 40 {
				ci := g % 2
				cost := rng.Int64N(100) + 1
				_, err := l.Take(context.Background(), creds[ci], quota.Charge{Units: map[string]int64{"units": cost, "calls": 1}})
				switch {
				case err == nil:
					accepted[ci].Add(cost)
				case errors.Is(err, quota.ErrExhausted):
					mu.Lock()
					refused[ci] = append(refused[ci], cost)
					mu.Unlock()
				default:
					t.Errorf("Take: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for ci, c := range creds {
		u := used(t, l, c, "units")
		if u != accepted[ci].Load() || u > limit {
			t.Fatalf("credential %d: store says used %d, callers accepted %d, limit %d", ci, u, accepted[ci].Load(), limit)
		}
		if len(refused[ci]) == 0 {
			t.Fatalf("credential %d: nothing refused; the test did not reach the limit", ci)
		}
		for _, cost := range refused[ci] {
			if cost <= limit-u {
				t.Fatalf("credential %d: refused cost %d while %d units were free at the end", ci, cost, limit-u)
			}
		}
	}
}

func (s suite) stateStore(t *testing.T) {
	st, ok := s.store(t).(quota.StateStore)
	if !ok {
		t.Fatal("the store does not implement quota.StateStore, where the jobs package keeps checkpoints and run history")
	}
	ctx := context.Background()
	if _, err := st.LoadState(ctx, "jobs/x/checkpoint"); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("LoadState of a missing key = %v, want ErrNotFound", err)
	}
	for _, v := range []string{`{"region":"US"}`, `{"region":"GB"}`} {
		if err := st.SaveState(ctx, "jobs/x/checkpoint", []byte(v)); err != nil {
			t.Fatal(err)
		}
		got, err := st.LoadState(ctx, "jobs/x/checkpoint")
		if err != nil || string(got) != v {
			t.Fatalf("LoadState = %q, %v; want %q", got, err, v)
		}
	}
	for i := range 7 {
		if err := st.AppendRecord(ctx, "jobs/x/runs", []byte(fmt.Sprint(i)), 5); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AppendRecord(ctx, "jobs/y/runs", []byte("y"), 5); err != nil {
		t.Fatal(err)
	}
	recs, err := st.Records(ctx, "jobs/x/runs", 0)
	var got []string
	for _, r := range recs {
		got = append(got, string(r))
	}
	if err != nil || !slices.Equal(got, []string{"6", "5", "4", "3", "2"}) {
		t.Fatalf("Records = %v, %v; want the newest 5, newest first", got, err)
	}
	if recs, _ := st.Records(ctx, "jobs/x/runs", 2); len(recs) != 2 || string(recs[0]) != "6" {
		t.Fatalf("Records(limit 2) = %q", recs)
	}
	if recs, err := st.Records(ctx, "jobs/none/runs", 0); err != nil || len(recs) != 0 {
		t.Fatalf("Records of a missing stream = %q, %v", recs, err)
	}
	names, err := st.Streams(ctx, "jobs/")
	if err != nil || !slices.Equal(names, []string{"jobs/x/runs", "jobs/y/runs"}) {
		t.Fatalf("Streams = %v, %v", names, err)
	}
}

func credentials(t *testing.T, st quota.Store, api string) map[string]quota.CredentialInfo {
	t.Helper()
	apis, err := st.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	out := map[string]quota.CredentialInfo{}
	for _, a := range apis {
		if a.Name == api {
			for _, c := range a.Credentials {
				out[c.ID] = c
			}
		}
	}
	return out
}

// ownersShare: the credentials of one owner share its budgets, named on the
// credential or through WithOwner; the store lists them under the owner.
func (s suite) ownersShare(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	l := s.limiter(t, st, clock, b)
	k1 := quota.Credential{Secret: "AIzaSy-project-key-1", Label: "yt-key-1", Owner: "my-project"}
	k2 := quota.Credential{Secret: "AIzaSy-project-key-2", Label: "yt-key-2", Owner: "my-project"}
	r := mustTake(t, l, k1, quota.Units("units", 4))
	if r.Owner != "my-project" || !strings.HasPrefix(r.ID(), "api/my-project/") {
		t.Fatalf("reservation owner %q, ID %q; want my-project", r.Owner, r.ID())
	}
	if r := mustTake(t, l, k2, quota.Units("units", 4)); r.Usage[0].Used != 8 {
		t.Fatalf("second key of the project: used %d, want 8 (shared)", r.Usage[0].Used)
	}
	mustRefuse(t, l, k1, quota.Units("units", 3))
	// A third key through a limiter whose default owner is the project.
	l3, err := quota.New(st, "api", []quota.Budget{b}, quota.WithClock(clock.Now), quota.WithOwner("my-project"))
	if err != nil {
		t.Fatal(err)
	}
	if r := mustTake(t, l3, quota.Credential{Secret: "AIzaSy-project-key-3"}, quota.Units("units", 2)); r.Usage[0].Used != 10 {
		t.Fatalf("WithOwner key: used %d, want 10", r.Usage[0].Used)
	}
	// A refund by ID from another process gives back to the owner.
	p, err := quota.ParseReservationID(r.ID())
	if err != nil || p.Owner != "my-project" {
		t.Fatalf("ParseReservationID(%q) = %+v, %v", r.ID(), p, err)
	}
	if err := l3.Refund(ctx, p); err != nil {
		t.Fatalf("refund by ID: %v", err)
	}
	if got := used(t, l, k2, "units"); got != 6 {
		t.Fatalf("after refund: used %d, want 6", got)
	}
	// Another credential, its own owner, is untouched.
	if got := used(t, l, quota.Credential{Secret: "AIzaSy-other"}, "units"); got != 0 {
		t.Fatalf("another owner: used %d, want 0", got)
	}
	cs := credentials(t, st, "api")
	n := 0
	for _, c := range cs {
		if c.Owner == "my-project" {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("credentials listed under my-project: %d of %+v, want 3", n, cs)
	}
	if _, err := quota.New(st, "api", []quota.Budget{b}, quota.WithOwner("my project")); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("bad owner name: %v, want ErrInvalid", err)
	}
}

// rotation: a new secret rotated in under a label continues the old one's
// usage, and a process still on the old secret meters the same account.
func (s suite) rotation(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	l := s.limiter(t, st, clock, b)
	oldKey := quota.Credential{Secret: "AIzaSy-before-rotation", Label: "yt-key-1"}
	r := mustTake(t, l, oldKey, quota.Units("units", 6))
	account := r.Owner
	newKey := quota.Credential{Secret: "AIzaSy-after-rotation", Label: "yt-key-1"}
	info, err := l.Rotate(ctx, "yt-key-1", quota.Credential{Secret: newKey.Secret})
	if err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	if info.Label != "yt-key-1" || info.Owner != account || info.ID == r.Credential {
		t.Fatalf("rotated record %+v; want label yt-key-1 under %s", info, account)
	}
	// A fresh process with the new secret and the label: same account.
	l2 := s.limiter(t, st, clock, b)
	if r := mustTake(t, l2, newKey, quota.Units("units", 3)); r.Usage[0].Used != 9 || r.Owner != account {
		t.Fatalf("new key after rotation: used %d on %q, want 9 on %s", r.Usage[0].Used, r.Owner, account)
	}
	// The old key, still in use somewhere during the rollout (no label now).
	l3 := s.limiter(t, st, clock, b)
	if r := mustTake(t, l3, quota.Credential{Secret: oldKey.Secret}, quota.Units("units", 1)); r.Usage[0].Used != 10 {
		t.Fatalf("old key after rotation: used %d, want 10", r.Usage[0].Used)
	}
	mustRefuse(t, l2, newKey, quota.Units("units", 1))
	// The new secret given without a label is named by the label the store
	// holds for it, so the refusal an operator reads says "yt-key-1".
	l4 := s.limiter(t, st, clock, b)
	var ex *quota.ExhaustedError
	if _, err := l4.Take(ctx, quota.Credential{Secret: newKey.Secret}, quota.Units("units", 1)); !errors.As(err, &ex) || ex.Credential != "yt-key-1" {
		t.Fatalf("unlabelled take of the rotated key: %v, want a refusal naming yt-key-1", err)
	}
	cs := credentials(t, st, "api")
	if c := cs[r.Credential]; c.Label != "" || c.Owner != account {
		t.Fatalf("old record after rotation: %+v", c)
	}
	if _, err := l.Rotate(ctx, "nobody", quota.Credential{Secret: "x"}); !errors.Is(err, quota.ErrUnknownCredential) {
		t.Fatalf("rotate an unknown label: %v, want ErrUnknownCredential", err)
	}
}

// rotateOntoRecorded: a rotation onto a secret the catalog already records
// under an account of its own is refused (ErrInvalid, naming it), and
// nothing changes: that credential keeps its label and its usage counts.
// Rotating back onto the old key (the unlabelled predecessor, same account)
// stays allowed.
func (s suite) rotateOntoRecorded(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	l := s.limiter(t, st, clock, b)
	a := quota.Credential{Secret: "AIzaSy-rotate-onto-a", Label: "ka"}
	kb := quota.Credential{Secret: "AIzaSy-rotate-onto-b", Label: "kb"}
	ra := mustTake(t, l, a, quota.Units("units", 10))
	rb := mustTake(t, l, kb, quota.Units("units", 20))
	before := credentials(t, st, "api")
	for _, from := range []string{"ka", ra.Credential} {
		_, err := l.Rotate(ctx, from, quota.Credential{Secret: kb.Secret})
		if !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), `"kb"`) || strings.Contains(err.Error(), kb.Secret) {
			t.Fatalf("rotate %s onto kb's secret: %v; want ErrInvalid naming kb", from, err)
		}
	}
	if after := credentials(t, st, "api"); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused rotation changed the catalog:\nbefore %+v\nafter  %+v", before, after)
	}
	// kb's usage still counts against it, in this process and a fresh one.
	for _, lim := range []*quota.Limiter{l, s.limiter(t, st, clock, b)} {
		if got := used(t, lim, quota.Credential{Secret: kb.Secret}, "units"); got != 20 {
			t.Fatalf("kb used %d after the refused rotation, want 20", got)
		}
		mustRefuse(t, lim, quota.Credential{Secret: kb.Secret}, quota.Units("units", 81))
	}
	if r := mustTake(t, s.limiter(t, st, clock, b), quota.Credential{Secret: kb.Secret}, quota.Units("units", 80)); r.Owner != rb.Owner || r.Usage[0].Used != 100 {
		t.Fatalf("kb after the refused rotation: used %d on %q, want 100 on %s", r.Usage[0].Used, r.Owner, rb.Owner)
	}
	// Rotating ka to a new key and back to its old one keeps its account.
	if _, err := l.Rotate(ctx, "ka", quota.Credential{Secret: "AIzaSy-rotate-onto-c"}); err != nil {
		t.Fatalf("rotate ka to a new secret: %v", err)
	}
	info, err := l.Rotate(ctx, "ka", quota.Credential{Secret: a.Secret})
	if err != nil || info.ID != ra.Credential || info.Owner != ra.Owner || info.Label != "ka" {
		t.Fatalf("rotate ka back to its old key = %+v, %v; want %s labelled ka under %s", info, err, ra.Credential, ra.Owner)
	}
	if got := used(t, s.limiter(t, st, clock, b), a, "units"); got != 10 {
		t.Fatalf("ka used %d after rotating back, want 10", got)
	}
}

// labelCollision: a label held by one secret, reused for another, is
// refused before anything is charged, with a message naming the fix.
func (s suite) labelCollision(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	l := s.limiter(t, st, clock, b)
	mustTake(t, l, quota.Credential{Secret: "AIzaSy-first", Label: "yt-key-1"}, quota.Units("units", 2))
	other := quota.Credential{Secret: "AIzaSy-DIFFERENT", Label: "yt-key-1"}
	for _, lim := range []*quota.Limiter{l, s.limiter(t, st, clock, b)} {
		_, err := lim.Take(ctx, other, quota.Units("units", 1))
		if !errors.Is(err, quota.ErrLabelTaken) || !strings.Contains(err.Error(), "credential rotate") || strings.Contains(err.Error(), other.Secret) {
			t.Fatalf("reused label: %v; want ErrLabelTaken naming the rotate fix", err)
		}
	}
	if got := used(t, l, quota.Credential{Secret: "AIzaSy-DIFFERENT"}, "units"); got != 0 {
		t.Fatalf("the refused credential was charged %d", got)
	}
	if got := used(t, l, quota.Credential{Label: "yt-key-1"}, "units"); got != 2 {
		t.Fatalf("the label's credential: used %d, want 2", got)
	}
	n := 0
	for _, c := range credentials(t, st, "api") {
		if c.Label == "yt-key-1" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d credentials labelled yt-key-1, want 1", n)
	}
}

// forget removes a credential from the catalog and keeps its owner's usage.
func (s suite) forget(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	l := s.limiter(t, st, clock, b)
	k1 := quota.Credential{Secret: "AIzaSy-forget-1", Label: "old", Owner: "proj"}
	k2 := quota.Credential{Secret: "AIzaSy-forget-2", Label: "new", Owner: "proj"}
	mustTake(t, l, k1, quota.Units("units", 5))
	mustTake(t, l, k2, quota.Units("units", 1))
	info, err := l.Forget(ctx, "old")
	if err != nil || info.Owner != "proj" {
		t.Fatalf("Forget = %+v, %v", info, err)
	}
	if _, ok := credentials(t, st, "api")[info.ID]; ok {
		t.Fatal("forgotten credential still listed")
	}
	if got := used(t, l, k2, "units"); got != 6 {
		t.Fatalf("owner's usage after forget: %d, want 6", got)
	}
	if _, err := l.Take(ctx, quota.Credential{Label: "old"}, quota.Units("units", 1)); !errors.Is(err, quota.ErrUnknownCredential) {
		t.Fatalf("take by a forgotten label: %v, want ErrUnknownCredential", err)
	}
	if _, err := l.Forget(ctx, "old"); !errors.Is(err, quota.ErrUnknownCredential) {
		t.Fatalf("forget twice: %v, want ErrUnknownCredential", err)
	}
}

// relabel renames a credential; the new label must be free.
func (s suite) relabel(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	l := s.limiter(t, st, clock, b)
	mustTake(t, l, quota.Credential{Secret: "AIzaSy-relabel-1", Label: "a"}, quota.Units("units", 3))
	mustTake(t, l, quota.Credential{Secret: "AIzaSy-relabel-2", Label: "b"}, quota.Units("units", 1))
	if _, err := l.Relabel(ctx, "a", "b"); !errors.Is(err, quota.ErrLabelTaken) {
		t.Fatalf("relabel onto a taken label: %v, want ErrLabelTaken", err)
	}
	info, err := l.Relabel(ctx, "a", "yt-key-9")
	if err != nil || info.Label != "yt-key-9" {
		t.Fatalf("Relabel = %+v, %v", info, err)
	}
	if got := used(t, l, quota.Credential{Label: "yt-key-9"}, "units"); got != 3 {
		t.Fatalf("relabelled credential: used %d, want 3", got)
	}
	if _, err := l.Take(ctx, quota.Credential{Label: "a"}, quota.Units("units", 1)); !errors.Is(err, quota.ErrUnknownCredential) {
		t.Fatalf("old label: %v, want ErrUnknownCredential", err)
	}
}

// catalogRace: processes registering different secrets under one label at
// once: exactly one gets it, the others are refused, nothing is charged for
// them.
func (s suite) catalogRace(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		l := s.limiter(t, st, clock, b)
		wg.Go(func() {
			_, errs[i] = l.Take(ctx, quota.Credential{Secret: fmt.Sprintf("AIzaSy-race-%d", i), Label: "shared"}, quota.Units("units", 1))
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, quota.ErrLabelTaken):
			t.Fatalf("racing registration: %v", err)
		}
	}
	labelled := 0
	for _, c := range credentials(t, st, "api") {
		if c.Label == "shared" {
			labelled++
		}
	}
	if ok != 1 || labelled != 1 {
		t.Fatalf("%d takes succeeded, %d credentials labelled; want 1 and 1", ok, labelled)
	}
}

// registerOwnerIfNew: OpRegister's OwnerIfNew names the owner of a
// credential the catalog does not record yet, and never replaces a
// recorded account (an owner, the credential's own, a legacy record's);
// an Owner given wins over it. Racing registrations, one naming an owner
// and the others only OwnerIfNew, end with that owner whatever the order:
// the check and the write are one atomic step.
func (s suite) registerOwnerIfNew(t *testing.T) {
	ctx := context.Background()
	st := s.store(t)
	fp := func(secret string) string { return quota.Fingerprint([]byte("storetest"), secret) }
	register := func(u quota.CredentialUpdate) quota.CredentialInfo {
		t.Helper()
		u.Op = quota.OpRegister
		info, err := st.UpdateCredential(ctx, "api", u)
		if err != nil {
			t.Fatalf("UpdateCredential(%+v): %v", u, err)
		}
		return info
	}
	const dflt = "unnamed-project"
	fresh, named, own, legacy, migrated := fp("fresh"), fp("named"), fp("own"), fp("legacy"), fp("migrated")
	if info := register(quota.CredentialUpdate{ID: fresh, Label: "k-fresh", OwnerIfNew: dflt}); info.Owner != dflt || info.Label != "k-fresh" {
		t.Fatalf("a new credential registered with OwnerIfNew: %+v, want owner %s", info, dflt)
	}
	register(quota.CredentialUpdate{ID: named, Owner: "proj-x"})
	if info := register(quota.CredentialUpdate{ID: named, Label: "k-named", OwnerIfNew: dflt}); info.Owner != "proj-x" || info.Label != "k-named" {
		t.Fatalf("OwnerIfNew over a recorded owner: %+v, want proj-x kept (the label set)", info)
	}
	register(quota.CredentialUpdate{ID: own})
	if info := register(quota.CredentialUpdate{ID: own, OwnerIfNew: dflt}); info.Owner != own {
		t.Fatalf("OwnerIfNew over a credential that is its own owner: %+v, want it kept", info)
	}
	register(quota.CredentialUpdate{ID: legacy, Label: "k-legacy", Owner: "proj-l"})
	if info := register(quota.CredentialUpdate{ID: migrated, Legacy: legacy, OwnerIfNew: dflt}); info.Owner != "proj-l" || info.Label != "k-legacy" {
		t.Fatalf("OwnerIfNew for a credential recorded under its legacy fingerprint: %+v, want the legacy record's proj-l and label", info)
	}
	if info := register(quota.CredentialUpdate{ID: fresh, Owner: "proj-y", OwnerIfNew: dflt}); info.Owner != "proj-y" {
		t.Fatalf("Owner and OwnerIfNew both given: %+v, want the Owner proj-y", info)
	}
	if _, err := st.UpdateCredential(ctx, "api", quota.CredentialUpdate{Op: quota.OpRegister, ID: fp("bad"), OwnerIfNew: "my project"}); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("OwnerIfNew %q: %v, want ErrInvalid", "my project", err)
	}
	want := map[string]string{fresh: "proj-y", named: "proj-x", own: own, legacy: "proj-l", migrated: "proj-l"}
	cs := credentials(t, st, "api")
	for id, owner := range want {
		if cs[id].Owner != owner {
			t.Errorf("credential %s listed under %q, want %q", id, cs[id].Owner, owner)
		}
	}
	if len(cs) != len(want) {
		t.Errorf("catalog %+v, want %d credentials", cs, len(want))
	}

	const n = 8
	for round := range 4 {
		id := fp(fmt.Sprintf("race-%d", round))
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			u := quota.CredentialUpdate{Op: quota.OpRegister, ID: id, OwnerIfNew: dflt}
			if i == round%n {
				u = quota.CredentialUpdate{Op: quota.OpRegister, ID: id, Owner: "proj-x"}
			}
			wg.Go(func() { _, errs[i] = st.UpdateCredential(ctx, "api", u) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("racing registration: %v", err)
			}
		}
		if c := credentials(t, st, "api")[id]; c.Owner != "proj-x" {
			t.Fatalf("round %d: racing registrations left %+v, want owner proj-x", round, c)
		}
	}
}

// leases: one holder at a time, expiry on the request's clock, renewal,
// compare-and-delete release, fencing tokens that refuse a zombie's write,
// and one winner among concurrent acquirers.
func (s suite) leases(t *testing.T) {
	st := s.store(t).(quota.StateStore)
	ctx := context.Background()
	const key = "jobs/checkpoint/trending"
	at := func(d time.Duration) time.Time { return T0.Add(d) }
	req := func(holder string, token int64, now time.Duration) *quota.StateLeaseRequest {
		return &quota.StateLeaseRequest{Key: key, Holder: holder, Token: token, TTL: 30 * time.Second, Now: at(now)}
	}

	a, err := st.AcquireLease(ctx, req("host-a:1", 0, 0))
	if err != nil || a.Holder != "host-a:1" || a.Token <= 0 || !a.Expires.Equal(at(30*time.Second)) || a.Key != key {
		t.Fatalf("AcquireLease = %+v, %v; want host-a:1's, expiring at T0+30s", a, err)
	}
	_, err = st.AcquireLease(ctx, req("host-b:2", 0, 10*time.Second))
	var held *quota.StateLeaseHeldError
	if !errors.As(err, &held) || !errors.Is(err, quota.ErrLeaseHeld) || errors.Is(err, quota.ErrStoreUnavailable) ||
		held.Held.Holder != "host-a:1" || !held.Held.Expires.Equal(at(30*time.Second)) || held.Held.Token != a.Token {
		t.Fatalf("a second AcquireLease = %v (%+v); want a LeaseHeldError naming host-a:1 until T0+30s", err, held)
	}
	if l, err := st.LoadLease(ctx, req("", 0, 10*time.Second)); err != nil || l != a {
		t.Fatalf("LoadLease = %+v, %v; want %+v", l, err, a)
	}
	if _, err := st.RenewLease(ctx, req("", a.Token+1, 20*time.Second)); !errors.Is(err, quota.ErrLeaseLost) {
		t.Fatalf("RenewLease with a wrong token = %v, want ErrLeaseLost", err)
	}
	r, err := st.RenewLease(ctx, req("", a.Token, 20*time.Second))
	if err != nil || r.Token != a.Token || r.Holder != "host-a:1" || !r.Expires.Equal(at(50*time.Second)) {
		t.Fatalf("RenewLease = %+v, %v; want expiry T0+50s", r, err)
	}
	if _, err := st.AcquireLease(ctx, req("host-b:2", 0, 40*time.Second)); !errors.Is(err, quota.ErrLeaseHeld) {
		t.Fatalf("AcquireLease inside the renewed lease = %v, want ErrLeaseHeld", err)
	}
	if err := st.SaveStateFenced(ctx, key, []byte("a1"), a.Token); err != nil {
		t.Fatalf("SaveStateFenced by the holder: %v", err)
	}

	// A's lease ends at T0+50s: B takes over with a newer token, and A,
	// a zombie now, can neither renew, release nor write.
	if _, err := st.LoadLease(ctx, req("", 0, 50*time.Second)); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("LoadLease after expiry = %v, want ErrNotFound", err)
	}
	if _, err := st.RenewLease(ctx, req("", a.Token, 51*time.Second)); !errors.Is(err, quota.ErrLeaseLost) {
		t.Fatalf("RenewLease after expiry = %v, want ErrLeaseLost", err)
	}
	b, err := st.AcquireLease(ctx, req("host-b:2", 0, 51*time.Second))
	if err != nil || b.Token <= a.Token || b.Holder != "host-b:2" {
		t.Fatalf("AcquireLease after expiry = %+v, %v; want host-b:2 with a token above %d", b, err, a.Token)
	}
	if err := st.SaveStateFenced(ctx, key, []byte("b1"), b.Token); err != nil {
		t.Fatal(err)
	}
	err = st.SaveStateFenced(ctx, key, []byte("zombie"), a.Token)
	if !errors.Is(err, quota.ErrLeaseLost) || errors.Is(err, quota.ErrStoreUnavailable) {
		t.Fatalf("SaveStateFenced with the old token = %v, want ErrLeaseLost", err)
	}
	if v, err := st.LoadState(ctx, key); err != nil || string(v) != "b1" {
		t.Fatalf("state after the zombie's write = %q, %v; want b1", v, err)
	}
	if err := st.ReleaseLease(ctx, req("", a.Token, 52*time.Second)); !errors.Is(err, quota.ErrLeaseLost) {
		t.Fatalf("ReleaseLease with the old token = %v, want ErrLeaseLost", err)
	}
	if l, err := st.LoadLease(ctx, req("", 0, 52*time.Second)); err != nil || l != b {
		t.Fatalf("the zombie's release touched the new lease: %+v, %v", l, err)
	}
	if err := st.ReleaseLease(ctx, req("", b.Token, 53*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.LoadLease(ctx, req("", 0, 53*time.Second)); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("LoadLease after release = %v, want ErrNotFound", err)
	}
	c, err := st.AcquireLease(ctx, req("host-c:3", 0, 54*time.Second))
	if err != nil || c.Token <= b.Token {
		t.Fatalf("AcquireLease after release = %+v, %v; want a token above %d", c, err, b.Token)
	}
	if err := st.SaveStateFenced(ctx, key, []byte("b2"), b.Token); !errors.Is(err, quota.ErrLeaseLost) {
		t.Fatalf("SaveStateFenced by a released holder = %v, want ErrLeaseLost", err)
	}
	// Leases on other keys are apart; a key never leased takes any write.
	if _, err := st.AcquireLease(ctx, &quota.StateLeaseRequest{Key: "jobs/checkpoint/other", Holder: "x", TTL: time.Minute, Now: at(54 * time.Second)}); err != nil {
		t.Fatalf("AcquireLease of another key: %v", err)
	}
	if err := st.SaveStateFenced(ctx, "jobs/checkpoint/never", []byte("v"), 1); err != nil {
		t.Fatalf("SaveStateFenced of a key never leased: %v", err)
	}

	// The store's own clock (no Now): a minute-long lease is live.
	own := &quota.StateLeaseRequest{Key: "jobs/checkpoint/own-clock", Holder: "h", TTL: time.Minute}
	l, err := st.AcquireLease(ctx, own)
	if err != nil || time.Until(l.Expires) > time.Minute+time.Hour || time.Until(l.Expires) < -time.Hour {
		t.Fatalf("AcquireLease on the store's clock = %+v, %v", l, err)
	}
	if _, err := st.AcquireLease(ctx, own); !errors.Is(err, quota.ErrLeaseHeld) {
		t.Fatalf("second AcquireLease on the store's clock = %v, want ErrLeaseHeld", err)
	}
	if err := st.ReleaseLease(ctx, &quota.StateLeaseRequest{Key: own.Key, Token: l.Token}); err != nil {
		t.Fatalf("ReleaseLease on the store's clock: %v", err)
	}

	// Bad requests name what is wrong and change nothing.
	for _, bad := range []*quota.StateLeaseRequest{
		{Key: "", Holder: "h", TTL: time.Minute},
		{Key: "a{b}", Holder: "h", TTL: time.Minute},
		{Key: "k", Holder: "", TTL: time.Minute},
		{Key: "k", Holder: "h", TTL: 0},
	} {
		if _, err := st.AcquireLease(ctx, bad); !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("AcquireLease(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := st.RenewLease(ctx, &quota.StateLeaseRequest{Key: "k", TTL: time.Minute}); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("RenewLease with no token = %v, want ErrInvalid", err)
	}
	if err := st.SaveStateFenced(ctx, "", []byte("v"), 1); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("SaveStateFenced of an empty key = %v, want ErrInvalid", err)
	}

	// Concurrent acquirers at one instant: exactly one wins.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := st.AcquireLease(ctx, &quota.StateLeaseRequest{Key: "jobs/checkpoint/race", Holder: fmt.Sprint("p", i), TTL: time.Minute, Now: at(time.Minute)})
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, quota.ErrLeaseHeld):
				t.Errorf("AcquireLease: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Errorf("%d of 8 concurrent acquirers got the lease, want 1", n)
	}
}
