package quota

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// TrueUpper is implemented by a Store that can bring a budget's count in
// line with an upstream's report (see backend.TrueUpper). Every store in
// this module implements it.
type TrueUpper = backend.TrueUpper

// UnmeteredMethod is the Breakdown method under which a true-up records
// what the upstream counted that no metered call had charged.
const UnmeteredMethod = backend.UnmeteredMethod

// TrueUpOutcome says what Limiter.TrueUp did with one report.
type TrueUpOutcome struct {
	Budget   string // the local budget
	Upstream int64  // what the upstream counts used, as derived from the report
	Counted  int64  // what the store counted before the true-up
	// Added is the units the store now counts on top (> 0), or 0 when the
	// upstream counts no more than the store (or its reset has passed).
	Added int64
	Usage Usage // the budget's standing after
}

// TrueUp brings cred's owner's count of budget r.Budget up to what the
// upstream reports it has spent: when the upstream counts more than the
// store (another, unmetered client spends the same quota), the store
// counts the difference until r.Reset, in every process sharing it. It
// never lowers a count and never loosens a limit. A report with no Reset,
// or one already past, changes nothing. With WithLeases, this limiter's
// lease of the budget ends first (settled), as with Exhaust.
//
// The upstream's used is r.Used when the report says it; else r.Limit
// less r.Remaining when it says both; else the budget's limit here less
// r.Remaining. An unknown budget, or a report that says neither used nor
// remaining, is an error wrapping ErrInvalid; a store that cannot true up
// (not a TrueUpper) one wrapping errors.ErrUnsupported.
func (l *Limiter) TrueUp(ctx context.Context, cred Credential, r Report) (TrueUpOutcome, error) {
	return l.trueUp(ctx, cred, r, time.Time{})
}

// TrueDown is TrueUp that may also lower the count (opt-in): when the
// upstream counts less than the store, the entries recorded before since
// (none held by a lease) are replaced by one entry of the upstream's used,
// counted until r.Reset, and the entries recorded at or after since are
// kept whole. since must be early enough that every call admitted before
// it, in any process sharing the store, had reached the upstream by the
// time it made the report: then the upstream's used includes all of them,
// and the count after is never below what the upstream will have counted
// (WithTrueDown derives it from the calls this Transport has in flight and
// a grace for other processes'). A zero since lowers nothing.
func (l *Limiter) TrueDown(ctx context.Context, cred Credential, r Report, since time.Time) (TrueUpOutcome, error) {
	return l.trueUp(ctx, cred, r, since)
}

func (l *Limiter) trueUp(ctx context.Context, cred Credential, r Report, since time.Time) (TrueUpOutcome, error) {
	if err := checkContext(ctx, "true-up"); err != nil {
		return TrueUpOutcome{}, err
	}
	l.refreshOverrides(ctx)
	b, err := l.budget(r.Budget)
	if err != nil {
		return TrueUpOutcome{}, err
	}
	if r.Used < 0 && r.Remaining < 0 {
		return TrueUpOutcome{}, invalidf("report for budget %q says neither used nor remaining", r.Budget)
	}
	tu, ok := l.store.(backend.TrueUpper)
	if !ok {
		return TrueUpOutcome{}, fmt.Errorf("quota: true-up of budget %q: store %T: %w", r.Budget, l.store, errors.ErrUnsupported)
	}
	id, err := l.identify(ctx, cred)
	if err != nil {
		return TrueUpOutcome{}, err
	}
	b = l.ownerBudgetOf(b, id.account) // the owner's limit, where it has its own
	// This limiter's lease of the budget ends first, settled to what it
	// admitted: the store counts its block whole, and the units it has not
	// admitted yet, which the upstream has not seen, would otherwise pass
	// for units the report counts (the true-up would add that much less).
	l.endLeases(ctx, id.account, b.Name)
	used, err := upstreamUsed(r, b.Limit)
	if err != nil {
		return TrueUpOutcome{}, err
	}
	res, err := tu.TrueUp(ctx, &backend.TrueUpRequest{API: l.api, Owner: id.account, Budget: b, Used: used,
		Until: r.Reset, Nonce: l.nonce(), Now: l.now(), Lower: !since.IsZero(), Since: since})
	if err != nil {
		return TrueUpOutcome{}, err
	}
	at := res.At
	if at.IsZero() {
		at = time.Now()
	}
	finishUsage(&res.Usage, at)
	return TrueUpOutcome{Budget: b.Name, Upstream: used, Counted: res.Counted, Added: res.Added, Usage: res.Usage}, nil
}

// upstreamUsed returns what report r says the upstream counts used, for a
// budget of limit here (see Limiter.TrueUp).
func upstreamUsed(r Report, limit int64) (int64, error) {
	var used int64
	switch {
	case r.Used >= 0:
		used = r.Used
	case r.Remaining >= 0 && r.Limit > 0:
		used = r.Limit - r.Remaining
	case r.Remaining >= 0:
		used = limit - r.Remaining
	default:
		return 0, invalidf("report for budget %q says neither used nor remaining", r.Budget)
	}
	return min(max(used, 0), MaxLimit), nil
}
