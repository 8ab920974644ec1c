// Package overspend checks what concurrent callers of one credential were
// granted and refused against what its store says was used: the test of
// the module's promise that callers sharing a budget, in goroutines or in
// processes, never spend more than its limit and are never refused what it
// could still pay.
//
// The callers charge Charge(cost) against Budgets(units, calls), record
// each outcome in a Spend (Record), and the test hands the Spends, merged
// with Add, to Check. Like testkit, it is for tests only.
package overspend

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// Spend is what the callers of one credential saw: the costs of accepted
// and refused charges, and any other error. It travels as JSON from child
// processes.
type Spend struct {
	Accepted []int64   `json:"accepted"`
	Refused  []Refusal `json:"refused"`
	Errors   []string  `json:"errors,omitempty"`
}

// Refusal is one refused charge.
type Refusal struct {
	Cost   int64  `json:"cost"`
	Budget string `json:"budget"` // the budget the *quota.ExhaustedError named
}

// Add appends o's outcomes to s.
func (s *Spend) Add(o Spend) {
	s.Accepted = append(s.Accepted, o.Accepted...)
	s.Refused = append(s.Refused, o.Refused...)
	s.Errors = append(s.Errors, o.Errors...)
}

// Record adds the outcome of one charge of cost to s: accepted when err is
// nil, refused when it is a *quota.ExhaustedError, else an error.
func (s *Spend) Record(cost int64, err error) {
	var ee *quota.ExhaustedError
	switch {
	case err == nil:
		s.Accepted = append(s.Accepted, cost)
	case errors.As(err, &ee):
		s.Refused = append(s.Refused, Refusal{Cost: cost, Budget: ee.Budget})
	default:
		s.Errors = append(s.Errors, err.Error())
	}
}

// Budgets returns the budgets the checks charge: "units" and "calls",
// limits units and calls, each a sliding day.
func Budgets(units, calls int64) []quota.Budget {
	return []quota.Budget{
		{Name: "units", Limit: units, Window: quota.Sliding(24 * time.Hour)},
		{Name: "calls", Limit: calls, Window: quota.Sliding(24 * time.Hour)},
	}
}

// Charge returns a charge of cost "units" and one of "calls", in one
// atomic take.
func Charge(cost int64) quota.Charge {
	return quota.Charge{Method: "videos.list", Units: map[string]int64{"units": cost, "calls": 1}}
}

// Check returns what is wrong with one credential's spending s against
// budgets (from Budgets), given what the store reports used now under a
// fixed clock (used only grows, so usage at the end bounds usage at every
// refusal); nothing when all is right:
//
//   - accepted units and calls never exceed the limits (a problem that
//     says so starts "overspend:");
//   - they equal what the store reports used (every accepted charge was
//     recorded once, in both budgets, and no refused one was);
//   - no charge was refused while the budgets could pay for it: a refused
//     cost must exceed what was still free at the end in "units", or
//     "calls" must be full.
func Check(budgets []quota.Budget, used map[string]int64, s Spend) []string {
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

// Used returns what l's store reports used now, per budget, for cred; an
// error fails the test.
func Used(t testing.TB, l *quota.Limiter, cred quota.Credential) map[string]int64 {
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
