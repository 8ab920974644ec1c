package quota

import (
	"cmp"
	"context"
	"fmt"

	"github.com/quotactl/quotactl/quota/backend"
)

// Settle shrinks the reservation to actual units really spent and frees the
// rest (a calculated cost known only from the response, the tokens an LLM
// really used, a page that came back short). The reservation must charge one
// budget; for a charge of several budgets use Limiter.Settle. Settling never
// increases the charge (an actual above it keeps it whole) and never moves
// it in time; actual 0 gives it all back, like Refund. Settling an
// unmetered reservation does nothing. The Reservation's Usage is updated.
func (r *Reservation) Settle(ctx context.Context, actual int64) error {
	if r == nil {
		return invalidf("nil reservation")
	}
	if r.Unmetered {
		return nil
	}
	lim := r.limiter()
	if lim == nil {
		return invalidf("reservation %s was not returned by a Limiter: use Limiter.Settle", r.ID())
	}
	if len(r.Usage) != 1 {
		return invalidf("reservation charges %d budgets: use Limiter.Settle with units per budget", len(r.Usage))
	}
	return lim.Settle(ctx, r, map[string]int64{r.Usage[0].Budget: actual})
}

// Settle shrinks res's charge of each budget named in actual to the units
// given (>= 0); budgets actual does not name keep their charge. See
// Reservation.Settle. A reservation whose entries left the window (or were
// refunded) gives an error wrapping ErrNotFound. res may come from
// ParseReservationID, on any Limiter of its API.
func (l *Limiter) Settle(ctx context.Context, res *Reservation, actual map[string]int64) error {
	if res == nil {
		return invalidf("nil reservation")
	}
	if res.Unmetered {
		return nil
	}
	if res.API != l.api {
		return invalidf("reservation %q is for api %q, not %q", res.ID(), res.API, l.api)
	}
	if len(actual) == 0 {
		return invalidf("settle names no budget")
	}
	debits := make([]backend.Debit, 0, len(actual))
	owner := res.account()
	for _, b := range l.budgets {
		n, ok := actual[b.Name]
		if !ok {
			continue
		}
		b = l.ownerBudgetOf(l.def(b), owner) // the definition in force (an operator's override), the owner's limit
		if n < 0 {
			return invalidf("actual %d for budget %q: must be >= 0", n, b.Name)
		}
		if len(res.Usage) > 0 && res.usage(b.Name) == nil {
			return invalidf("reservation %s did not charge budget %q", res.ID(), b.Name)
		}
		debits = append(debits, backend.Debit{Budget: b, Cost: n})
	}
	if len(debits) != len(actual) {
		for name := range actual {
			if _, err := l.budget(name); err != nil {
				return err
			}
		}
	}
	if res.leases() != nil {
		_, err := l.settleLeased(ctx, res, debits)
		return err
	}
	nonce := res.nonce()
	if nonce == "" {
		return invalidf("reservation of api %q has no ID: give the Reservation Take returned, or one from ParseReservationID", res.API)
	}
	got, err := l.store.Settle(ctx, &backend.SettleRequest{API: l.api, Owner: owner, At: res.At, Nonce: nonce, Method: res.Method, Job: res.Job, Debits: debits, Now: l.now()})
	if err != nil {
		return err
	}
	if len(got) == 0 {
		return fmt.Errorf("%w: reservation %s (refunded, or out of its window)", ErrNotFound, res.ID())
	}
	l.forgetRefusals(owner)
	for _, d := range debits {
		if u := res.usage(d.Name); u != nil && got[d.Name] > 0 {
			u.Cost -= got[d.Name]
			u.Used -= got[d.Name]
			u.Remaining = min(u.Remaining+got[d.Name], u.Limit)
		}
	}
	return nil
}

// account returns the owner whose budgets r charged: its Owner, or, for a
// reservation ID from before owners, the credential's fingerprint.
func (r *Reservation) account() string { return cmp.Or(r.Owner, r.Credential) }

// usage returns the reservation's usage of budget, or nil.
func (r *Reservation) usage(budget string) *Usage {
	for i := range r.Usage {
		if r.Usage[i].Budget == budget {
			return &r.Usage[i]
		}
	}
	return nil
}
