package quota

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// Limits per owner.
//
// Upstreams grant different limits per account (a YouTube project after a
// quota audit, GitHub Enterprise Cloud, an Actions token), so a budget's
// limit may differ per owner: the owner's name, or the fingerprint of a
// credential that is its own owner. A budget's window never differs. The
// limit in force for an owner's budget comes from the first of:
//
//  1. operator: `quotactl budget set API/BUDGET --owner NAME --limit N`
//     (SetOwnerLimit), until `quotactl budget delete API/BUDGET --owner
//     NAME` (RemoveOwnerLimit);
//  2. upstream: the limit the upstream last reported for the owner
//     (Limiter.LearnLimit), when it is smaller than the limit that would be
//     in force without it (3 or 4), or larger where the limiter opts in
//     (WithLearnedRaises); otherwise it is recorded and shown, not applied;
//  3. program: WithOwnerLimits; a limiter that gives none for the owner's
//     budget applies the one a program sharing the store recorded (the
//     first use of a limiter records its own, so that quotactl and limiters
//     made from the store's definitions apply them too);
//  4. the budget's limit: the program's definition or an operator's
//     override of it (see Overrides).
//
// The operator's and the upstream's limits, and the programs', live in the
// store's StateStore under "quota/owner-limits/API", one value per API
// beside the overrides, shared by every process: a Limiter reloads them
// with the overrides (at most every DefaultOverrideRefresh), and applies a
// limit it learns itself at once. Take, Allow, budget leases, Status,
// refusals (ExhaustedError.Limit), events and threshold crossings all use
// the owner's limit. `quotactl budget list` and `quotactl status` say where
// each limit comes from (Source: program, operator or upstream).

// SourceUpstream is the source of a limit learned from the upstream's
// reports (Limiter.LearnLimit).
const SourceUpstream Source = "upstream"

// OwnerLimit is one recorded limit of one owner's budget: an operator's,
// one learned from the upstream, or one a program recorded.
type OwnerLimit struct {
	Owner  string `json:"owner"`
	Budget string `json:"budget"`
	Limit  int64  `json:"limit"`
	Source Source `json:"source"`
	// At is when it was set, learned or recorded.
	At time.Time `json:"at"`
}

// ownerLimitRecord is one limit as stored.
type ownerLimitRecord struct {
	Limit int64     `json:"limit"`
	At    time.Time `json:"at"`
}

// ownerLimitMap is owner -> budget -> record.
type ownerLimitMap map[string]map[string]ownerLimitRecord

// ownerLimitState is the stored value of "quota/owner-limits/API".
type ownerLimitState struct {
	Operator ownerLimitMap `json:"operator,omitempty"`
	Upstream ownerLimitMap `json:"upstream,omitempty"`
	Program  ownerLimitMap `json:"program,omitempty"`
}

func (m ownerLimitMap) get(owner, budget string) (ownerLimitRecord, bool) {
	r, ok := m[owner][budget]
	return r, ok
}

// set records r under owner and budget, creating the maps it needs, and
// returns m (new when m was nil).
func (m ownerLimitMap) set(owner, budget string, r ownerLimitRecord) ownerLimitMap {
	if m == nil {
		m = ownerLimitMap{}
	}
	if m[owner] == nil {
		m[owner] = map[string]ownerLimitRecord{}
	}
	m[owner][budget] = r
	return m
}

func (m ownerLimitMap) remove(owner, budget string) bool {
	if _, ok := m[owner][budget]; !ok {
		return false
	}
	delete(m[owner], budget)
	if len(m[owner]) == 0 {
		delete(m, owner)
	}
	return true
}

func (s *ownerLimitState) sections() []struct {
	src Source
	m   *ownerLimitMap
} {
	return []struct {
		src Source
		m   *ownerLimitMap
	}{{SourceOperator, &s.Operator}, {SourceUpstream, &s.Upstream}, {SourceProgram, &s.Program}}
}

func (s *ownerLimitState) validate() error {
	for _, sec := range s.sections() {
		for owner, bs := range *sec.m {
			if err := backend.CheckName("owner", owner); err != nil {
				return err
			}
			for budget, r := range bs {
				if err := checkOwnerLimit(owner, budget, r.Limit); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkOwnerLimit checks one owner's limit of a budget as given.
func checkOwnerLimit(owner, budget string, limit int64) error {
	if err := backend.CheckName("owner", owner); err != nil {
		return err
	}
	if err := backend.CheckName("budget", budget); err != nil {
		return err
	}
	if limit <= 0 || limit > MaxLimit {
		return invalidf("limit %d of budget %q for owner %q: must be between 1 and %d", limit, budget, owner, int64(MaxLimit))
	}
	return nil
}

func ownerLimitKey(api string) string { return "quota/owner-limits/" + api }

// loadOwnerLimits reads api's recorded owner limits (empty when there are
// none, or when st keeps no state).
func loadOwnerLimits(ctx context.Context, st Store, api string) (*ownerLimitState, error) {
	ss, ok := st.(StateStore)
	if !ok {
		return &ownerLimitState{}, nil
	}
	b, err := ss.LoadState(ctx, ownerLimitKey(api))
	if errors.Is(err, ErrNotFound) {
		return &ownerLimitState{}, nil
	}
	if err != nil {
		return nil, err
	}
	s := &ownerLimitState{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("quota: owner limits of %s: %w: %v", api, ErrInvalid, err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("quota: owner limits of %s: %w", api, err)
	}
	return s, nil
}

// OwnerLimits returns every limit recorded per owner for api's budgets
// (the operator's, the upstream's and the programs'), sorted by owner,
// budget and source (operator, upstream, program). Which applies is the
// Limiter's to say (Limiter.LimitOf): see the comment on precedence above
// SourceUpstream.
func OwnerLimits(ctx context.Context, st Store, api string) ([]OwnerLimit, error) {
	if err := checkContext(ctx, "owner limits"); err != nil {
		return nil, err
	}
	s, err := loadOwnerLimits(ctx, st, api)
	if err != nil {
		return nil, err
	}
	out := []OwnerLimit{}
	for _, sec := range s.sections() {
		for owner, bs := range *sec.m {
			for budget, r := range bs {
				out = append(out, OwnerLimit{Owner: owner, Budget: budget, Limit: r.Limit, Source: sec.src, At: r.At})
			}
		}
	}
	order := map[Source]int{SourceOperator: 0, SourceUpstream: 1, SourceProgram: 2}
	slices.SortFunc(out, func(a, b OwnerLimit) int {
		return cmp.Or(cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.Budget, b.Budget), cmp.Compare(order[a.Source], order[b.Source]))
	})
	return out, nil
}

// SetOwnerLimit records an operator's limit of budget of api for owner in
// st: it takes precedence over every other limit of that owner's budget
// (see the comment on precedence above SourceUpstream), in every process
// sharing st, within DefaultOverrideRefresh. The budget must be defined in
// st (by a program, or `quotactl budget set`); limit is between 1 and
// MaxLimit. st must be a StateStore (every store of this module is).
func SetOwnerLimit(ctx context.Context, st Store, api, owner, budget string, limit int64, at time.Time) error {
	if err := checkContext(ctx, "set owner limit"); err != nil {
		return err
	}
	if err := backend.CheckName("api", api); err != nil {
		return err
	}
	if err := checkOwnerLimit(owner, budget, limit); err != nil {
		return err
	}
	if err := definedBudget(ctx, st, api, budget); err != nil {
		return err
	}
	_, err := updateOwnerLimits(ctx, st, api, func(s *ownerLimitState) bool {
		s.Operator = s.Operator.set(owner, budget, ownerLimitRecord{Limit: limit, At: at.UTC()})
		return true
	})
	return err
}

// RemoveOwnerLimit removes every limit recorded for owner's budget of api
// (the operator's, the one learned from the upstream, and the one programs
// recorded) and reports whether there was one: the budget's limit applies
// to the owner again, until a program that sets one for it records it
// again (on its next start) or the upstream reports one.
func RemoveOwnerLimit(ctx context.Context, st Store, api, owner, budget string) (bool, error) {
	if err := checkContext(ctx, "remove owner limit"); err != nil {
		return false, err
	}
	if err := backend.CheckName("api", api); err != nil {
		return false, err
	}
	if err := backend.CheckName("owner", owner); err != nil {
		return false, err
	}
	if err := backend.CheckName("budget", budget); err != nil {
		return false, err
	}
	var removed bool
	_, err := updateOwnerLimits(ctx, st, api, func(s *ownerLimitState) bool {
		for _, sec := range s.sections() {
			if sec.m.remove(owner, budget) {
				removed = true
			}
		}
		return removed
	})
	return removed, err
}

// definedBudget returns an error naming budget when the store neither
// records it for api nor has an operator's definition of it.
func definedBudget(ctx context.Context, st Store, api, budget string) error {
	apis, err := st.List(ctx)
	if err != nil {
		return err
	}
	for _, a := range apis {
		if a.Name == api && slices.ContainsFunc(a.Budgets, func(b Budget) bool { return b.Name == budget }) {
			return nil
		}
	}
	over, err := Overrides(ctx, st, api)
	if err != nil {
		return err
	}
	if _, ok := over[budget]; ok {
		return nil
	}
	return fmt.Errorf("%w: no budget %s/%s in the store: define it first (a program's quota.New, or quotactl budget set)", ErrNotFound, api, budget)
}

// updateOwnerLimits applies change to api's recorded owner limits and
// writes them back when change reports a change, taking turns with every
// other update as updateOverrides does. It returns the state written (or
// read, when nothing changed).
func updateOwnerLimits(ctx context.Context, st Store, api string, change func(*ownerLimitState) bool) (*ownerLimitState, error) {
	ss, ok := st.(StateStore)
	if !ok {
		return nil, invalidf("store %T keeps no state: it cannot hold an owner's limit", st)
	}
	key := ownerLimitKey(api)
	lease, err := acquireOverrides(ctx, ss, key)
	if err != nil {
		return nil, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = ss.ReleaseLease(rctx, &backend.StateLeaseRequest{Key: key, Token: lease.Token})
	}()
	s, err := loadOwnerLimits(ctx, st, api)
	if err != nil {
		return nil, err
	}
	if !change(s) {
		return s, nil
	}
	js, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	if err := ss.SaveStateFenced(ctx, key, js, lease.Token); err != nil {
		return nil, fmt.Errorf("quota: owner limits of %s: %w", api, err)
	}
	return s, nil
}

// cloneOwnerLimits returns a deep copy of m.
func cloneOwnerLimits(m ownerLimitMap) ownerLimitMap {
	if m == nil {
		return nil
	}
	out := make(ownerLimitMap, len(m))
	for owner, bs := range m {
		out[owner] = maps.Clone(bs)
	}
	return out
}
