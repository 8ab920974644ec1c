package quota

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// WithOwnerLimits sets limits per owner: limits[owner][budget] is the
// limit of budget for owner (an owner's name, or the fingerprint of a
// credential that is its own owner), in place of the budget's, e.g.
//
//	quota.WithOwnerLimits(map[string]map[string]int64{
//		"youtube-audited-project": {"units": 1_000_000},
//	})
//
// Their source is "program"; an operator's limit and a smaller one learned
// from the upstream take precedence (see the comment above
// SourceUpstream). Each limit is between 1 and MaxLimit, each budget one
// the limiter defines; New rejects anything else. Given more than once,
// the maps merge. The limiter records them in the store on first use, so
// that quotactl shows them and limiters made from the store's definitions
// apply them. Default: none.
func WithOwnerLimits(limits map[string]map[string]int64) Option {
	return func(l *Limiter) {
		for owner, bs := range limits {
			for budget, n := range bs {
				l.progIn = append(l.progIn, OwnerLimit{Owner: owner, Budget: budget, Limit: n, Source: SourceProgram})
			}
		}
	}
}

// WithLearnedRaises makes the limiter apply a limit learned from the
// upstream (LearnLimit) that is larger than the one that would be in force
// without it: the upstream raised the owner's quota. Default: a learned
// limit applies only when it is smaller; a larger one is recorded and shown,
// not applied.
func WithLearnedRaises() Option { return func(l *Limiter) { l.raises = true } }

// LimitInForce is the limit of one owner's budget and where it comes from.
type LimitInForce struct {
	Owner  string `json:"owner"`
	Budget string `json:"budget"`
	Limit  int64  `json:"limit"`
	// Source is "operator" (an owner's limit set with quotactl, or the
	// operator's definition of the budget), "upstream" (learned), or
	// "program" (WithOwnerLimits, or the program's definition of the
	// budget).
	Source Source `json:"source"`
	// PerOwner is set when the limit is the owner's own, not the budget's.
	PerOwner bool `json:"per_owner"`
	// Learned is the limit the upstream last reported for the owner's
	// budget, applied or not (0: none), and LearnedAt when.
	Learned   int64     `json:"learned,omitempty"`
	LearnedAt time.Time `json:"learned_at,omitzero"`
}

// errOwnerLimitsBusy says a reload of the limits per owner was skipped.
var errOwnerLimitsBusy = errors.New("quota: limits per owner are being recorded")

// ownerBudget keys a limit per owner.
type ownerBudget struct{ owner, budget string }

// ownerView is a limiter's view of the limits per owner: the records as
// last loaded, and the limits in force that differ from the budget's.
type ownerView struct {
	rec    *ownerLimitState
	limits map[ownerBudget]int64 // nil when none applies: the hot path skips it
}

// setupOwnerLimits validates WithOwnerLimits (New), and builds the first
// view, so that the program's limits apply before the store is read.
func (l *Limiter) setupOwnerLimits() error {
	for _, o := range l.progIn {
		if err := checkOwnerLimit(o.Owner, o.Budget, o.Limit); err != nil {
			return fmt.Errorf("WithOwnerLimits: %w", err)
		}
		if _, ok := l.index[o.Budget]; !ok {
			return invalidf("WithOwnerLimits: unknown budget %q for api %q", o.Budget, l.api)
		}
		if l.prog == nil {
			l.prog = map[ownerBudget]int64{}
		}
		l.prog[ownerBudget{o.Owner, o.Budget}] = o.Limit
	}
	l.progIn = nil
	l.setOwnerView(&ownerLimitState{})
	return nil
}

// setOwnerView makes rec the records in force, resolved against the
// budget definitions in force now.
func (l *Limiter) setOwnerView(rec *ownerLimitState) {
	v := &ownerView{rec: rec}
	keys := map[ownerBudget]bool{}
	for k := range l.prog {
		keys[k] = true
	}
	for _, m := range []ownerLimitMap{rec.Operator, rec.Upstream, rec.Program} {
		for owner, bs := range m {
			for budget := range bs {
				if _, ok := l.index[budget]; ok {
					keys[ownerBudget{owner, budget}] = true
				}
			}
		}
	}
	for k := range keys {
		if lf := l.resolveLimit(rec, k.owner, k.budget); lf.PerOwner {
			if v.limits == nil {
				v.limits = make(map[ownerBudget]int64, len(keys))
			}
			v.limits[k] = lf.Limit
		}
	}
	l.owners.Store(v)
}

// resolveLimit applies the precedence (see the comment above
// SourceUpstream) to the records rec for owner's budget, a budget the
// limiter defines.
func (l *Limiter) resolveLimit(rec *ownerLimitState, owner, budget string) LimitInForce {
	b := l.def(l.budgets[l.index[budget]])
	out := LimitInForce{Owner: owner, Budget: budget, Limit: b.Limit, Source: SourceProgram}
	if l.overridden(budget) {
		out.Source = SourceOperator
	}
	k := ownerBudget{owner, budget}
	if n, ok := l.prog[k]; ok {
		out.Limit, out.Source, out.PerOwner = n, SourceProgram, true
	} else if r, ok := rec.Program.get(owner, budget); ok {
		out.Limit, out.Source, out.PerOwner = r.Limit, SourceProgram, true
	}
	if r, ok := rec.Upstream.get(owner, budget); ok {
		out.Learned, out.LearnedAt = r.Limit, r.At
		if r.Limit < out.Limit || l.raises {
			out.Limit, out.Source, out.PerOwner = r.Limit, SourceUpstream, true
		}
	}
	if r, ok := rec.Operator.get(owner, budget); ok {
		out.Limit, out.Source, out.PerOwner = r.Limit, SourceOperator, true
	}
	return out
}

// ownerDebits sets each debit's limit to the owner's, where the owner has
// one in ov (the limits per owner debitsOf priced the debits with), and
// checks each cost against the limit in force (debitsOf leaves that to it
// while some owner has a limit of its own): one map lookup per debit, none
// when no owner has a limit of its own. A cost over the limit is
// ErrCostExceedsLimit.
func (l *Limiter) ownerDebits(debits []backend.Debit, owner string, ov *ownerView) error {
	if ov == nil || ov.limits == nil {
		return nil // debitsOf checked the costs
	}
	for i := range debits {
		d := &debits[i]
		if n, ok := ov.limits[ownerBudget{owner, d.Name}]; ok {
			d.Limit = n
			if d.Cost > n {
				return fmt.Errorf("%w: %s/%s: cost %d > limit %d of owner %q, can never succeed", ErrCostExceedsLimit, l.api, d.Name, d.Cost, n, owner)
			}
		} else if d.Cost > d.Limit {
			return fmt.Errorf("%w: %s/%s: cost %d > limit %d, can never succeed", ErrCostExceedsLimit, l.api, d.Name, d.Cost, d.Limit)
		}
	}
	return nil
}

// ownerBudgetOf returns b with owner's limit in force.
func (l *Limiter) ownerBudgetOf(b Budget, owner string) Budget {
	if v := l.owners.Load(); v != nil && v.limits != nil {
		if n, ok := v.limits[ownerBudget{owner, b.Name}]; ok {
			b.Limit = n
		}
	}
	return b
}

// LimitOf returns the limit in force of owner's budget (owner: an owner's
// name, or the fingerprint of a credential that is its own owner) and where
// it comes from, with the limits recorded in the store as last loaded
// (reloaded first when due).
func (l *Limiter) LimitOf(ctx context.Context, owner, budget string) (LimitInForce, error) {
	if err := checkContext(ctx, "limit"); err != nil {
		return LimitInForce{}, err
	}
	if err := backend.CheckName("owner", owner); err != nil {
		return LimitInForce{}, err
	}
	if _, err := l.budget(budget); err != nil {
		return LimitInForce{}, err
	}
	l.refreshOverrides(ctx)
	return l.resolveLimit(l.owners.Load().rec, owner, budget), nil
}

// LearnLimit records limit as the upstream's limit of owner's budget (a
// report said so), in the store, so that every process sharing it knows
// it, and reports whether it applies (see the comment above
// SourceUpstream): a limit smaller than the one that would be in force
// without it applies at once in this limiter, and in other processes
// within DefaultOverrideRefresh; a larger one applies only where the
// limiter opts in (WithLearnedRaises), and is otherwise recorded and shown
// (LimitOf, quotactl) but not applied. An operator's limit of the owner's
// budget takes precedence either way. Learning the limit already recorded
// writes nothing. owner is an owner's name or the fingerprint of a
// credential that is its own owner (Reservation.Owner); limit is between 1
// and MaxLimit; budget one the limiter defines.
func (l *Limiter) LearnLimit(ctx context.Context, owner, budget string, limit int64) (applied bool, err error) {
	if err := checkContext(ctx, "learn limit"); err != nil {
		return false, err
	}
	if err := checkOwnerLimit(owner, budget, limit); err != nil {
		return false, err
	}
	if _, err := l.budget(budget); err != nil {
		return false, err
	}
	l.refreshOverrides(ctx)
	if r, ok := l.owners.Load().rec.Upstream.get(owner, budget); ok && r.Limit == limit {
		return l.resolveLimit(l.owners.Load().rec, owner, budget).Source == SourceUpstream, nil
	}
	rec := ownerLimitRecord{Limit: limit, At: l.localNow().UTC().Truncate(time.Microsecond)}
	l.ownerMu.Lock()
	defer l.ownerMu.Unlock()
	var s *ownerLimitState
	if _, ok := l.store.(StateStore); !ok {
		// nowhere to share it: this limiter alone applies it
		s = l.owners.Load().rec.clone()
		s.Upstream = s.Upstream.set(owner, budget, rec)
	} else if s, err = updateOwnerLimits(ctx, l.store, l.api, func(s *ownerLimitState) bool {
		s.Upstream = s.Upstream.set(owner, budget, rec)
		return true
	}); err != nil {
		return false, err
	}
	l.setOwnerView(s)
	return l.resolveLimit(s, owner, budget).Source == SourceUpstream, nil
}

// clone returns a deep copy of s.
func (s *ownerLimitState) clone() *ownerLimitState {
	return &ownerLimitState{Operator: cloneOwnerLimits(s.Operator), Upstream: cloneOwnerLimits(s.Upstream), Program: cloneOwnerLimits(s.Program)}
}

// loadOwnerLimitsInto reads the limits per owner from the store into the
// limiter's view (with the overrides, see loadOverrides); a failed read
// keeps the records known, resolved again against the definitions now in
// force. While a LearnLimit of this limiter is recording a limit (it may
// wait on the store's lease), it reads nothing and reports an error, so
// that the decision refreshing never waits on it: the next refresh, soon,
// reads them.
func (l *Limiter) loadOwnerLimitsInto(ctx context.Context) error {
	if !l.ownerMu.TryLock() {
		return errOwnerLimitsBusy
	}
	defer l.ownerMu.Unlock()
	s, err := loadOwnerLimits(ctx, l.store, l.api)
	if err != nil {
		l.setOwnerView(l.owners.Load().rec)
		return err
	}
	l.setOwnerView(s)
	return nil
}

// recordProgramLimits records the limiter's own limits per owner
// (WithOwnerLimits) in the store, once, so that quotactl shows them and
// limiters made from the store's definitions apply them. Like define, it
// never fails a decision: a failure is retried with the next credential
// registered.
func (l *Limiter) recordProgramLimits(ctx context.Context) {
	if len(l.prog) == 0 || l.progRecorded.Load() {
		return
	}
	if _, ok := l.store.(StateStore); !ok {
		l.progRecorded.Store(true)
		return
	}
	same := func(s *ownerLimitState) bool {
		for k, n := range l.prog {
			if r, ok := s.Program.get(k.owner, k.budget); !ok || r.Limit != n {
				return false
			}
		}
		return true
	}
	if same(l.owners.Load().rec) {
		l.progRecorded.Store(true)
		return
	}
	at := l.localNow().UTC().Truncate(time.Microsecond)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := updateOwnerLimits(ctx, l.store, l.api, func(s *ownerLimitState) bool {
		if same(s) {
			return false
		}
		for k, n := range l.prog {
			s.Program = s.Program.set(k.owner, k.budget, ownerLimitRecord{Limit: n, At: at})
		}
		return true
	})
	if err == nil {
		l.progRecorded.Store(true)
	}
}

// budgetsOf returns the budget definitions in force (Budgets) with
// owner's limits.
func (l *Limiter) budgetsOf(owner string) []Budget {
	out := l.Budgets()
	for i := range out {
		out[i] = l.ownerBudgetOf(out[i], owner)
	}
	return out
}
