package quota

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// Refund gives a reservation's units back to every budget it charged. A
// reservation that is already refunded or out of its window gives an error
// wrapping ErrNotFound; an unmetered reservation is a no-op. res may come
// from ParseReservationID: known by its ID alone, it is refunded in every
// budget the limiter defines, and when it also charged a budget the
// limiter does not (one `quotactl budget delete` removed), Refund gives
// back the rest and returns a *PartialRefundError (ErrPartialRefund)
// naming that budget, whose units stay recorded: refund again once the
// budget is defined again.
func (l *Limiter) Refund(ctx context.Context, res *Reservation) error {
	if err := checkContext(ctx, "refund"); err != nil {
		return err
	}
	if res == nil {
		return invalidf("nil reservation")
	}
	if res.Unmetered {
		return nil
	}
	nonce := res.nonce()
	if nonce == "" && res.leases() == nil {
		return invalidf("reservation of api %q has no ID: give the Reservation Take returned, or one from ParseReservationID", res.API)
	}
	if res.API != l.api {
		return invalidf("reservation %q is for api %q, not %q", res.ID(), res.API, l.api)
	}
	l.refreshOverrides(ctx)
	owner := res.Owner
	if owner == "" {
		owner = res.Credential
	}
	budgets := l.budgetsOf(owner)
	if res.leases() != nil {
		debits := make([]backend.Debit, 0, len(res.Usage))
		for _, u := range res.Usage {
			b, err := l.budget(u.Budget)
			if err != nil {
				return err
			}
			debits = append(debits, backend.Debit{Budget: l.ownerBudgetOf(b, owner)})
		}
		freed, err := l.settleLeased(ctx, res, debits)
		if err != nil {
			return err
		}
		if freed == 0 {
			return fmt.Errorf("%w: leased reservation (already refunded)", ErrNotFound)
		}
		observe(ctx, res, true)
		return nil
	}
	var undefined []string
	if len(res.Usage) > 0 {
		budgets = make([]Budget, 0, len(res.Usage))
		for _, u := range res.Usage {
			b, err := l.budget(u.Budget)
			if err != nil {
				return err
			}
			budgets = append(budgets, l.ownerBudgetOf(b, owner))
		}
	} else {
		// Known by its ID alone, the reservation names no budget: it is
		// looked for in every budget the API defines. One it charged that
		// is no longer defined (quotactl budget delete) cannot be refunded
		// (its window is unknown); find out before giving anything back,
		// so that the answer says so rather than succeed.
		var err error
		if undefined, err = l.undefinedCharged(ctx, owner, res.At, nonce); err != nil {
			return err
		}
	}
	got, err := l.store.Refund(ctx, &backend.RefundRequest{API: l.api, Owner: owner, At: res.At, Nonce: nonce, Budgets: budgets, Method: res.Method, Job: res.Job, Now: l.now()})
	l.refunded(ctx, res, budgets, got, err)
	if err != nil {
		return err
	}
	if len(got) > 0 {
		l.forgetRefusals(owner)
		observe(ctx, res, true)
	}
	if len(undefined) > 0 {
		return &PartialRefundError{API: l.api, Reservation: res.ID(), Refunded: got, NotRefunded: undefined}
	}
	if len(got) == 0 {
		return fmt.Errorf("%w: reservation %s (already refunded, or out of its window)", ErrNotFound, res.ID())
	}
	return nil
}

// everKept is the window a refund reads the log of a budget no longer
// defined through: longer than any a log keeps its entries for, so that
// the read counts every kept entry and prunes nothing a budget defined
// again could count.
const everKept = 100 * 365 * 24 * time.Hour

// undefinedCharged returns, sorted, the budgets the reservation of owner
// recorded at at with nonce charged that the limiter does not define (a
// budget deleted from the store keeps its logs): the budgets whose
// breakdown rows since at name them and whose log holds the entry. It
// reads and writes nothing else.
func (l *Limiter) undefinedCharged(ctx context.Context, owner string, at time.Time, nonce string) ([]string, error) {
	now := l.now()
	rows, err := l.store.Breakdown(ctx, &backend.BreakdownRequest{API: l.api, Owner: owner, Since: at, Now: now})
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, r := range rows {
		if _, ok := l.index[r.Budget]; ok || seen[r.Budget] || backend.CheckName("budget", r.Budget) != nil {
			continue
		}
		seen[r.Budget] = true
		es, err := l.store.Entries(ctx, &backend.EntriesRequest{API: l.api, Owner: owner, Budget: Budget{Name: r.Budget, Limit: MaxLimit, Window: Sliding(everKept)}, Now: now})
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if e.Nonce == nonce && e.At.Equal(at) && e.Cost > 0 {
				out = append(out, r.Budget)
				break
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Exhaust marks budget spent for cred until until, in the store, so every
// process sharing it refuses charges to that budget until then (the upstream
// said the quota is spent). A zero until clears the mark; an until later
// than a store can keep (see MaxTimeMicro, in 2255) marks it until then.
func (l *Limiter) Exhaust(ctx context.Context, cred Credential, budget string, until time.Time) error {
	if err := checkContext(ctx, "exhaust"); err != nil {
		return err
	}
	until = backend.ClampTime(until)
	l.refreshOverrides(ctx)
	b, err := l.budget(budget)
	if err != nil {
		return err
	}
	id, err := l.identify(ctx, cred)
	if err != nil {
		return err
	}
	l.endLeases(ctx, id.account, budget)
	b = l.ownerBudgetOf(b, id.account)
	err = l.store.Exhaust(ctx, &backend.ExhaustRequest{API: l.api, Owner: id.account, Budget: b, Until: until, Now: l.now()})
	l.marked(ctx, cred, id.fp, id.account, budget, until, err)
	if err == nil {
		l.forgetRefusals(id.account)
	}
	return err
}

// Adjust sets budget's usage for cred to used units recorded now, dropping
// its log and any exhaustion mark: to match the upstream's console. Adjust
// with used 0 resets the budget. The blocks other processes' leases took
// within their lease time (WithLeases) stay counted on top of used until
// those leases end, since they may admit from them until then: Status may
// show more than used. The adjust bumps the owner's change version, which
// ends those leases within their CheckEvery (see WithLeases).
func (l *Limiter) Adjust(ctx context.Context, cred Credential, budget string, used int64) error {
	if err := checkContext(ctx, "adjust"); err != nil {
		return err
	}
	l.refreshOverrides(ctx)
	b, err := l.budget(budget)
	if err != nil {
		return err
	}
	if used < 0 {
		return invalidf("used %d for budget %q: must be between 0 and the limit %d", used, budget, b.Limit)
	}
	id, err := l.identify(ctx, cred)
	if err != nil {
		return err
	}
	if b = l.ownerBudgetOf(b, id.account); used > b.Limit {
		return invalidf("used %d for budget %q: must be between 0 and the limit %d", used, budget, b.Limit)
	}
	req := &backend.AdjustRequest{API: l.api, Owner: id.account, Budget: b, Used: used, Nonce: l.nonce(), Now: l.now()}
	if ls := l.endLeases(ctx, id.account, budget); ls != nil {
		// its block is held past now, but the lease admits no more: what
		// it admitted is in used
		req.DropAt, req.DropNonce = ls.stamp, ls.nonce
	}
	if err := l.store.Adjust(ctx, req); err != nil {
		return err
	}
	l.forgetRefusals(id.account)
	return nil
}

// Status returns the usage of every budget of cred's owner, in definition
// order: used, limit (the owner's: see LimitOf), remaining, next reset or
// next free unit, exhausted-until. It reads the store's catalog and writes nothing.
func (l *Limiter) Status(ctx context.Context, cred Credential) ([]Usage, error) {
	if err := checkContext(ctx, "status"); err != nil {
		return nil, err
	}
	id, err := l.lookup(ctx, cred)
	if err != nil {
		return nil, err
	}
	return l.StatusOf(ctx, id.account)
}

// StatusOf is Status for an account: an owner name, or the fingerprint of a
// credential that is its own owner (CredentialInfo.Owner from List).
func (l *Limiter) StatusOf(ctx context.Context, account string) ([]Usage, error) {
	if err := checkContext(ctx, "status"); err != nil {
		return nil, err
	}
	l.refreshOverrides(ctx)
	now := l.now()
	us, err := l.store.Usage(ctx, &backend.UsageRequest{API: l.api, Owner: account, Budgets: l.budgetsOf(account), Now: now})
	if err != nil {
		return nil, err
	}
	if now.IsZero() {
		now = time.Now()
	}
	for i := range us {
		finishUsage(&us[i], now)
	}
	return us, nil
}

// Entries returns the entries counted now in cred's budget, oldest first:
// the usage history over the window.
func (l *Limiter) Entries(ctx context.Context, cred Credential, budget string) ([]Entry, error) {
	if err := checkContext(ctx, "entries"); err != nil {
		return nil, err
	}
	l.refreshOverrides(ctx)
	b, err := l.budget(budget)
	if err != nil {
		return nil, err
	}
	id, err := l.lookup(ctx, cred)
	if err != nil {
		return nil, err
	}
	return l.store.Entries(ctx, &backend.EntriesRequest{API: l.api, Owner: id.account, Budget: l.ownerBudgetOf(b, id.account), Now: l.now()})
}

// List returns every API, budget and credential the store knows.
func (l *Limiter) List(ctx context.Context) ([]APIInfo, error) {
	if err := checkContext(ctx, "list"); err != nil {
		return nil, err
	}
	return l.store.List(ctx)
}
