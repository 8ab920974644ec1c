package quota

import (
	"maps"
	"slices"
)

// Charge is what one call costs: the API method's name (for logs and
// history; may be empty) and units per budget. One charge may name several
// budgets; Take pays all of them or none.
type Charge struct {
	Method string           `json:"method,omitempty"`
	Units  map[string]int64 `json:"units"`
}

// Units returns a Charge of n units of one budget.
func Units(budget string, n int64) Charge {
	return Charge{Units: map[string]int64{budget: n}}
}

// Budgets returns the names of the budgets c charges, sorted.
func (c Charge) Budgets() []string { return slices.Sorted(maps.Keys(c.Units)) }
