package quota

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/quotactl/quotactl/quota/backend"
)

// ChargeExcess counts what res's call cost beyond its charge, in units per
// budget (an LLM answer that used more tokens than its estimate): a settle
// never grows a charge, so each budget's excess is recorded as one more
// entry, stamped now and counted for a window from there, under res's
// method and job. It is never refused, whatever the budget counts: the
// upstream already billed the units, and the meter must not count less
// (the budget then refuses until enough leaves its window). It returns each
// charged budget's usage after. Budgets with no excess (<= 0) are skipped;
// an unmetered reservation records nothing. The store must be a TrueUpper
// (every store of this module is), else the error wraps
// errors.ErrUnsupported.
func (l *Limiter) ChargeExcess(ctx context.Context, res *Reservation, excess map[string]int64) ([]Usage, error) {
	if err := checkContext(ctx, "charge excess"); err != nil {
		return nil, err
	}
	if res == nil {
		return nil, invalidf("nil reservation")
	}
	if res.Unmetered {
		return nil, nil
	}
	if res.API != l.api {
		return nil, invalidf("reservation %q is for api %q, not %q", res.ID(), res.API, l.api)
	}
	tu, ok := l.store.(backend.TrueUpper)
	if !ok {
		return nil, fmt.Errorf("quota: charge excess: store %T: %w", l.store, errors.ErrUnsupported)
	}
	l.refreshOverrides(ctx)
	owner := res.account()
	var budgets []Budget // the definitions in force, for the owner, in one order
	for _, name := range slices.Sorted(maps.Keys(excess)) {
		b, err := l.budget(name)
		if err != nil {
			return nil, err
		}
		if n := excess[name]; n > MaxLimit {
			return nil, invalidf("excess %d for budget %q: must be at most %d", n, name, int64(MaxLimit))
		} else if n > 0 {
			budgets = append(budgets, l.ownerBudgetOf(b, owner))
		}
	}
	var out []Usage
	for _, b := range budgets {
		got, err := tu.TrueUp(ctx, &backend.TrueUpRequest{API: l.api, Owner: owner, Budget: b, Used: excess[b.Name],
			Add: true, Method: res.Method, Job: res.Job, Nonce: l.nonce(), Now: l.now()})
		if err != nil {
			return out, fmt.Errorf("quota: charge excess of budget %q: %w", b.Name, err)
		}
		finishUsage(&got.Usage, got.At)
		out = append(out, got.Usage)
		if u := res.usage(b.Name); u != nil {
			u.Cost += got.Added
			u.Used = max(u.Used, got.Usage.Used)
		}
	}
	return out, nil
}
