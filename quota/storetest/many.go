package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// manyBudgets checks charges that name more budgets than a store keeps
// room for on its stack (a 5-budget charge once panicked in the memory
// store): Take, Allow, Settle, Refund and a refusal by the last budget
// named, for 1 to 12 budgets of mixed windows.
func (s suite) manyBudgets(t *testing.T) {
	ctx := context.Background()
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 12; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			clock := NewClock(T0)
			var budgets []quota.Budget
			units := map[string]int64{}
			for i := range n {
				w := quota.Sliding(time.Duration(i+1) * time.Hour)
				if i%3 == 2 {
					w = quota.Daily(la)
				}
				name := fmt.Sprintf("b%02d", i)
				budgets = append(budgets, quota.Budget{Name: name, Limit: int64(10 + i), Window: w})
				units[name] = 2
			}
			l := s.limiter(t, s.store(t), clock, budgets...)
			ch := quota.Charge{Method: "m", Units: units}
			r := mustTake(t, l, key, ch)
			if len(r.Usage) != n {
				t.Fatalf("reservation names %d budgets, want %d", len(r.Usage), n)
			}
			for _, u := range r.Usage {
				if u.Used != 2 || u.Cost != 2 {
					t.Fatalf("usage %+v after one charge of 2", u)
				}
			}
			if err := l.Allow(ctx, key, ch); err != nil {
				t.Fatalf("Allow: %v", err)
			}
			actual := map[string]int64{}
			for name := range units {
				actual[name] = 1
			}
			if err := l.Settle(ctx, r, actual); err != nil {
				t.Fatalf("Settle: %v", err)
			}
			if got := used(t, l, key, budgets[0].Name); got != 3 {
				t.Fatalf("%s used %d after settling 2 to 1, want 3", budgets[0].Name, got)
			}
			if err := l.Refund(ctx, r); err != nil {
				t.Fatalf("Refund: %v", err)
			}
			if got := used(t, l, key, budgets[0].Name); got != 2 {
				t.Fatalf("%s used %d after the refund, want 2", budgets[0].Name, got)
			}
			// The last budget named can pay for nothing more: the whole
			// charge is refused, and nothing is recorded.
			last := budgets[n-1].Name
			if err := l.Adjust(ctx, key, last, budgets[n-1].Limit-1); err != nil {
				t.Fatal(err)
			}
			if ee := mustRefuse(t, l, key, ch); ee.Budget != last {
				t.Fatalf("refused by %q, want %q", ee.Budget, last)
			}
			for _, b := range budgets[:n-1] {
				if got := used(t, l, key, b.Name); got != 2 {
					t.Fatalf("%s used %d after a refused charge, want 2", b.Name, got)
				}
			}
		})
	}
}
