package view

import (
	"time"

	"github.com/quotactl/quotactl/quota"
)

// BudgetCost is what a planned run costs one budget, held against what is
// left of it: `quotactl costs estimate --json` prints them as budgets, a
// job's view (`quotactl jobs --json`, /api/jobs) as expected.
type BudgetCost struct {
	Budget string `json:"budget"`
	Cost   int64  `json:"cost"`
	Left   int64  `json:"left"`
	Limit  int64  `json:"limit"`
	After  int64  `json:"after"` // Left - Cost
	Fits   bool   `json:"fits"`
	// Unit is what Cost, Left, Limit and After count: the budget's unit
	// (quota.Budget.UnitOf); Amount shows them.
	Unit string `json:"unit"`
	// Reset is when capacity next frees: a daily budget's next reset, or
	// when a sliding window's oldest entry leaves it (absent when it holds
	// none).
	Reset *time.Time `json:"reset,omitempty"`
}

// Costs holds a run's cost per budget (cost, from a cost table's estimate)
// against what is left now: the usage of the account that pays, per
// budget, else the whole limit. It lists budgets in order, leaving out
// those the run does not charge.
func Costs(budgets []quota.Budget, cost map[string]int64, usage map[string]quota.Usage, now time.Time) []BudgetCost {
	out := []BudgetCost{}
	for _, b := range budgets {
		c := cost[b.Name]
		if c == 0 {
			continue
		}
		left, reset := b.Limit, b.Window.NextReset(now)
		if u, ok := usage[b.Name]; ok {
			left = u.Remaining
			if !b.Window.IsCalendar() {
				reset = u.Reset
			}
		}
		out = append(out, BudgetCost{Budget: b.Name, Cost: c, Left: left, Limit: b.Limit, After: left - c, Fits: c <= left, Unit: b.UnitOf(), Reset: jsonTime(reset)})
	}
	return out
}
