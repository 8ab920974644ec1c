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
// whose context is done (never a store outage, never admitted), true-ups
// to an upstream's report (backend.TrueUpper), and
// quota.StateStore, which every store must also implement (jobs keeps its
// checkpoints and run history there). MatchesMemory drives a store and the
// MemoryStore, the reference, through one long random run and requires the
// same answers at every step.
package storetest

import (
	"context"
	"errors"
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
		{"MonthlyReset", s.monthlyReset},
		{"MonthlyWithOthers", s.monthlyWithOthers},
		{"MonthlyExhaust", s.monthlyExhaust},
		{"Expiry", s.expiry},
		{"Isolation", s.isolation},
		{"Catalog", s.catalog},
		{"Units", s.units},
		{"OwnersShareUsage", s.ownersShare},
		{"OwnerLimits", s.ownerLimits},
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
		{"RedefineKeepsMonth", s.redefineKeepsMonth},
		{"StateStoreLeases", s.leases},
		{"BreakdownByMethod", s.breakdownByMethod},
		{"Crossings", s.crossings},
		{"CancelledTake", s.cancelledTake},
		{"TrueUp", s.trueUpAdds},
		{"TrueUpExpiry", s.trueUpExpiry},
		{"TrueUpRefuses", s.trueUpRefuses},
		{"TrueUpIndependent", s.trueUpIndependent},
		{"TrueUpLower", s.trueUpLower},
		{"TrueUpAddsExcess", s.trueUpAddsExcess},
		{"TrueUpBadInput", s.trueUpBadInput},
		{"TrueUpConcurrent", s.trueUpConcurrent},
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
