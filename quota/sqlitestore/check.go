package sqlitestore

import (
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

func checkTake(req *backend.TakeRequest) error {
	if req == nil {
		return fmt.Errorf("sqlitestore: take: %w: nil request", backend.ErrInvalid)
	}
	if req.Owner == "" {
		return fmt.Errorf("sqlitestore: take: %w: empty credential", backend.ErrInvalid)
	}
	if len(req.Debits) == 0 {
		return fmt.Errorf("sqlitestore: take: %w: charge names no budget", backend.ErrInvalid)
	}
	if err := backend.CheckHold(req.Hold, req.Debits); err != nil {
		return fmt.Errorf("sqlitestore: take: %w", err)
	}
	for i, d := range req.Debits {
		if err := checkBudget("take", d.Budget); err != nil {
			return err
		}
		if d.Cost <= 0 {
			return fmt.Errorf("sqlitestore: take: %w: cost %d for budget %q: must be > 0", backend.ErrInvalid, d.Cost, d.Name)
		}
		if d.Cost > d.Limit {
			return fmt.Errorf("sqlitestore: take: %w: budget %q: cost %d > limit %d", backend.ErrCostExceedsLimit, d.Name, d.Cost, d.Limit)
		}
		for _, e := range req.Debits[:i] {
			if e.Name == d.Name {
				return fmt.Errorf("sqlitestore: take: %w: budget %q debited twice", backend.ErrInvalid, d.Name)
			}
		}
	}
	return nil
}

// checkBudget checks what the store relies on: a name, a limit and a
// usable window.
func checkBudget(op string, b backend.Budget) error {
	switch {
	case b.Name == "":
		return fmt.Errorf("sqlitestore: %s: %w: empty budget name", op, backend.ErrInvalid)
	case b.Limit <= 0:
		return fmt.Errorf("sqlitestore: %s: %w: budget %q: limit %d, must be > 0", op, backend.ErrInvalid, b.Name, b.Limit)
	case b.Window.IsZero(),
		b.Window.IsCalendar() && b.Window.Location() == nil,
		!b.Window.IsCalendar() && b.Window.Duration() < time.Microsecond:
		return fmt.Errorf("sqlitestore: %s: %w: budget %q: window %s", op, backend.ErrInvalid, b.Name, b.Window)
	}
	return nil
}
