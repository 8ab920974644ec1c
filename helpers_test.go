package quotactl_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// t0 is the fixed instant the reliability tests pin their limiters' clocks
// to: under a fixed clock nothing leaves the window, so used only grows.
var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return t0 }

// waitFor polls cond until it holds or within passes, then fails the test
// naming what it waited for. It waits for processes, servers and goroutines
// to get somewhere; it never stands in for moving a clock.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(within, cond) {
		t.Fatalf("gave up after %v waiting for %s", within, what)
	}
}

// poll reports whether cond held before within passed.
func poll(within time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
	return true
}

// spend is what the callers of one credential saw: the costs of accepted
// and refused charges. Each charge costs Units of "units" and 1 of "calls".
type spend struct {
	Accepted []int64   `json:"accepted"`
	Refused  []refusal `json:"refused"`
	Errors   []string  `json:"errors,omitempty"`
}

type refusal struct {
	Cost   int64  `json:"cost"`
	Budget string `json:"budget"` // the budget the *ExhaustedError named
}

func (s *spend) add(o spend) {
	s.Accepted = append(s.Accepted, o.Accepted...)
	s.Refused = append(s.Refused, o.Refused...)
	s.Errors = append(s.Errors, o.Errors...)
}

// spendBudgets are the budgets the no-overspend tests charge: every call
// costs 1 to 100 "units" and one of "calls", in one atomic take.
func spendBudgets(units, calls int64) []quota.Budget {
	return []quota.Budget{
		{Name: "units", Limit: units, Window: quota.Sliding(24 * time.Hour)},
		{Name: "calls", Limit: calls, Window: quota.Sliding(24 * time.Hour)},
	}
}

func spendCharge(cost int64) quota.Charge {
	return quota.Charge{Method: "videos.list", Units: map[string]int64{"units": cost, "calls": 1}}
}

// checkSpend returns what is wrong with one credential's spending against
// budgets, given what the store reports used now (a fixed clock: used only
// grows, so usage at the end bounds usage at every refusal):
//
//   - accepted units and calls never exceed the limits;
//   - they equal what the store reports used (every accepted charge was
//     recorded once, in both budgets, and no refused one was);
//   - no charge was refused while the budgets could pay for it: a refused
//     cost must exceed what was still free at the end in "units", or
//     "calls" must be full.
func checkSpend(budgets []quota.Budget, used map[string]int64, s spend) []string {
	var limit = map[string]int64{}
	for _, b := range budgets {
		limit[b.Name] = b.Limit
	}
	var units int64
	for _, c := range s.Accepted {
		units += c
	}
	calls := int64(len(s.Accepted))
	var bad []string
	if units > limit["units"] {
		bad = append(bad, fmt.Sprintf("overspend: callers were granted %d units against a limit of %d", units, limit["units"]))
	}
	if calls > limit["calls"] {
		bad = append(bad, fmt.Sprintf("overspend: callers were granted %d calls against a limit of %d", calls, limit["calls"]))
	}
	if used["units"] != units || used["calls"] != calls {
		bad = append(bad, fmt.Sprintf("the store reports %d units and %d calls used; callers were granted %d units in %d calls",
			used["units"], used["calls"], units, calls))
	}
	freeUnits, freeCalls := limit["units"]-used["units"], limit["calls"]-used["calls"]
	wrong := 0
	for _, r := range s.Refused {
		if r.Cost <= freeUnits && freeCalls >= 1 {
			if wrong++; wrong <= 3 {
				bad = append(bad, fmt.Sprintf("a charge of %d units was refused (by %q) while %d units and %d calls were still free at the end",
					r.Cost, r.Budget, freeUnits, freeCalls))
			}
		}
	}
	if wrong > 3 {
		bad = append(bad, fmt.Sprintf("... %d wrongful refusals in all", wrong))
	}
	return bad
}

// usedOf returns what l's store reports used now, per budget, for cred.
func usedOf(t *testing.T, l *quota.Limiter, cred quota.Credential) map[string]int64 {
	t.Helper()
	us, err := l.Status(context.Background(), cred)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	m := make(map[string]int64, len(us))
	for _, u := range us {
		m[u.Budget] = u.Used
	}
	return m
}

// settleGoroutines waits until no more goroutines run than before, and
// fails with every goroutine's stack if some are left over: a leak.
func settleGoroutines(t *testing.T, before int) {
	t.Helper()
	if poll(10*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		return
	}
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	t.Fatalf("goroutine leak: %d running, %d before the test\n%s", runtime.NumGoroutine(), before, buf.String())
}
