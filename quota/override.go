package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// Budget definitions have two sources, and one rule:
//
//   - a program defines its budgets in New (recorded in the store's catalog
//     on first use, so quotactl can inspect them);
//   - an operator overrides one with `quotactl budget set` (SetOverride).
//
// An operator's definition takes precedence over the program's, in every
// process sharing the store, until the operator removes it (`quotactl
// budget delete`, RemoveOverride): a Limiter applies the overrides of its
// API to its own budgets of the same name (loaded on first use, then
// reloaded at most every DefaultOverrideRefresh; WithOverrideRefresh), and
// does not write its own definition of an overridden budget to the catalog.
// `quotactl status` and `budget list` say which definition applies.
//
// Overrides live in the store's StateStore under "quota/overrides/API".

// DefaultOverrideRefresh is how often, at most, a Limiter reloads the
// operator overrides of its API from the store: an operator's `quotactl
// budget set` (a limit lowered because the upstream lowered it) reaches
// every running limiter's decisions, and the blocks its leases take,
// within it, and so do the limits per owner recorded beside them (see
// SetOwnerLimit). Two small store reads per second per Limiter.
const DefaultOverrideRefresh = time.Second

// Override is an operator's definition of a budget and when it was set.
type Override struct {
	Budget
	SetAt time.Time `json:"set_at"`
}

// Source names where the definition of a budget in force comes from.
type Source string

// The sources of a budget definition.
const (
	SourceProgram  Source = "program"  // New's budgets, recorded in the catalog
	SourceOperator Source = "operator" // SetOverride (quotactl budget set)
)

func overrideKey(api string) string { return "quota/overrides/" + api }

// Overrides returns the operator overrides recorded for api, by budget name
// (empty when there are none, or when st keeps no state).
func Overrides(ctx context.Context, st Store, api string) (map[string]Override, error) {
	if err := checkContext(ctx, "overrides"); err != nil {
		return nil, err
	}
	ss, ok := st.(StateStore)
	if !ok {
		return map[string]Override{}, nil
	}
	b, err := ss.LoadState(ctx, overrideKey(api))
	if errors.Is(err, ErrNotFound) {
		return map[string]Override{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]Override{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("quota: overrides of %s: %w: %v", api, ErrInvalid, err)
	}
	for name, o := range out {
		if o.Name != name || o.Validate() != nil {
			return nil, fmt.Errorf("quota: overrides of %s: %w: bad definition of %q", api, ErrInvalid, name)
		}
	}
	return out, nil
}

// SetOverride records an operator's definition of budget b of api in st,
// taking precedence over any program's (see Overrides), and records it in
// the catalog too. A b that declares no unit takes the unit the catalog
// records for the budget, if any. st must be a StateStore (every store of this module is).
// Concurrent SetOverride and RemoveOverride calls on one API, in any
// processes sharing st, each take effect: they take turns (see
// updateOverrides).
func SetOverride(ctx context.Context, st Store, api string, b Budget, at time.Time) error {
	if err := backend.CheckName("api", api); err != nil {
		return err
	}
	if err := backend.ValidateBudgets([]Budget{b}); err != nil {
		return err
	}
	if b.Unit == "" {
		// An operator who changes a limit keeps the unit the catalog
		// records (the program's): the tools go on showing tokens as
		// tokens.
		unit, err := recordedUnit(ctx, st, api, b.Name)
		if err != nil {
			return err
		}
		b.Unit = unit
	}
	if _, err := updateOverrides(ctx, st, api, func(over map[string]Override) bool {
		over[b.Name] = Override{Budget: b, SetAt: at.UTC()}
		return true
	}); err != nil {
		return err
	}
	return st.DefineBudgets(ctx, api, []Budget{b})
}

// recordedUnit returns the unit the catalog of st records for budget of
// api: "" when it records none, or no such budget.
func recordedUnit(ctx context.Context, st Store, api, budget string) (string, error) {
	apis, err := st.List(ctx)
	if err != nil {
		return "", err
	}
	for _, a := range apis {
		if a.Name != api {
			continue
		}
		for _, rec := range a.Budgets {
			if rec.Name == budget {
				return rec.Unit, nil
			}
		}
	}
	return "", nil
}

// RemoveOverride removes the operator's definition of budget of api, if
// any, and reports whether there was one: the program's definition applies
// again.
func RemoveOverride(ctx context.Context, st Store, api, budget string) (bool, error) {
	return updateOverrides(ctx, st, api, func(over map[string]Override) bool {
		_, ok := over[budget]
		delete(over, budget)
		return ok
	})
}

// overrideLeaseTTL bounds how long an update of one API's overrides may
// hold the others off, and how long a process that died during one delays
// the next.
const overrideLeaseTTL = 5 * time.Second

// updateOverrides applies change to api's overrides and writes them back
// when change reports a change. The overrides are one value, so a read,
// change and write by two operators (or scripts) at once would lose one of
// the changes: each update holds the store's lease on the value's key
// (StateStore.AcquireLease, across processes and hosts) and writes with
// SaveStateFenced, so a writer whose lease expired mid-update writes
// nothing. An update that finds the lease held waits for it, up to ctx's
// deadline, for as long as other updates make progress (see
// acquireOverrides).
func updateOverrides(ctx context.Context, st Store, api string, change func(map[string]Override) bool) (bool, error) {
	ss, ok := st.(StateStore)
	if !ok {
		return false, invalidf("store %T keeps no state: it cannot hold an override", st)
	}
	key := overrideKey(api)
	lease, err := acquireOverrides(ctx, ss, key)
	if err != nil {
		return false, err
	}
	defer func() {
		// a lease already lost or expired needs no release; a failed
		// release expires on its own
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = ss.ReleaseLease(rctx, &backend.StateLeaseRequest{Key: key, Token: lease.Token})
	}()
	over, err := Overrides(ctx, st, api)
	if err != nil {
		return false, err
	}
	if !change(over) {
		return false, nil
	}
	js, err := json.Marshal(over)
	if err != nil {
		return false, err
	}
	if err := ss.SaveStateFenced(ctx, key, js, lease.Token); err != nil {
		return false, fmt.Errorf("quota: overrides of %s: %w", api, err)
	}
	return true, nil
}

// acquireOverrides takes the lease on the overrides' key, waiting while
// another update holds it. Many updates at once take turns: the wait goes on
// while the lease changes hands (each turn a new token), and gives up only
// when one holder keeps it for twice the lease's lifetime, which a live
// update never does (it holds the lease for one read and one write).
func acquireOverrides(ctx context.Context, ss StateStore, key string) (backend.StateLease, error) {
	holder := "override update"
	if h, err := os.Hostname(); err == nil {
		holder = fmt.Sprintf("%s:%d override update", h, os.Getpid())
	}
	var last int64 // the token of the holder seen last
	var give time.Time
	wait := 5 * time.Millisecond
	for {
		lease, err := ss.AcquireLease(ctx, &backend.StateLeaseRequest{Key: key, Holder: holder, TTL: overrideLeaseTTL})
		var held *backend.StateLeaseHeldError
		if !errors.As(err, &held) {
			return lease, err
		}
		if give.IsZero() || held.Held.Token != last {
			// a new turn: progress, the wait starts over
			last, give = held.Held.Token, time.Now().Add(2*overrideLeaseTTL)
		} else if time.Now().After(give) {
			return backend.StateLease{}, fmt.Errorf("quota: overrides are being updated by another process: %w", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return backend.StateLease{}, fmt.Errorf("quota: waiting for another update of the overrides: %w", context.Cause(ctx))
		case <-t.C:
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// ApplyOverrides returns budgets with the definitions of over in place of
// those of the same name, and which of them come from an override. An
// override that declares no unit (Budget.Unit) keeps the unit of the
// budget it replaces.
func ApplyOverrides(budgets []Budget, over map[string]Override) ([]Budget, map[string]Source) {
	out := slices.Clone(budgets)
	src := make(map[string]Source, len(out))
	for i, b := range out {
		src[b.Name] = SourceProgram
		if o, ok := over[b.Name]; ok {
			out[i], src[b.Name] = o.Budget, SourceOperator
			if o.Unit == "" {
				out[i].Unit = b.Unit // an override set before units keeps the program's
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(over)) {
		if _, ok := src[name]; !ok {
			out = append(out, over[name].Budget)
			src[name] = SourceOperator
		}
	}
	return out, src
}

// WithOverrideRefresh sets how often, at most, the limiter reloads its
// API's operator overrides from the store (see Overrides). Default:
// DefaultOverrideRefresh. The limits per owner the store records (see
// SetOwnerLimit) are reloaded with them. 0 reloads them on every call (two
// more store reads per decision); d < 0 never loads them: the program's
// definitions and limits per owner alone apply (and those this limiter
// learns: LearnLimit).
func WithOverrideRefresh(d time.Duration) Option { return func(l *Limiter) { l.overEvery = d } }

// overrides is a limiter's view of its API's operator overrides.
type overrides struct {
	byName map[string]Budget // nil: none
}

// refreshOverrides reloads the overrides when due. A failed load keeps the
// ones known and is retried within a second.
func (l *Limiter) refreshOverrides(ctx context.Context) {
	if l.overEvery >= 0 {
		l.refreshOverridesAt(ctx, l.host.NowUS())
	}
}

// refreshOverridesAt is refreshOverrides at now, the host clock's time in
// µs (Take reads the clock once, for this and for the decision).
func (l *Limiter) refreshOverridesAt(ctx context.Context, now int64) {
	if l.overEvery < 0 {
		return
	}
	next := l.overNext.Load()
	if now < next || !l.overNext.CompareAndSwap(next, now+l.overEvery.Microseconds()) {
		return
	}
	l.loadOverrides(ctx, now)
}

// reloadOverrides loads the overrides now, due or not (the one decision
// per bound that checks a standing local refusal: see
// WithLocalRefusals), unless the limiter reads none. now is the host
// clock's time in µs.
func (l *Limiter) reloadOverrides(ctx context.Context, now int64) {
	if l.overEvery < 0 {
		return
	}
	l.overNext.Store(now + l.overEvery.Microseconds())
	l.loadOverrides(ctx, now)
}

// loadOverrides reads the overrides from the store into l.over.
func (l *Limiter) loadOverrides(ctx context.Context, now int64) {
	over, err := Overrides(ctx, l.store, l.api)
	if err != nil {
		// Try again soon, not on every call: while the store is down each
		// decision already waits on it once, and must not wait twice.
		l.overNext.Store(now + min(l.overEvery, time.Second).Microseconds())
		return
	}
	o := &overrides{}
	for _, b := range l.budgets {
		if ov, ok := over[b.Name]; ok {
			if o.byName == nil {
				o.byName = map[string]Budget{}
			}
			o.byName[b.Name] = ov.Budget
		}
	}
	l.over.Store(o)
	if err := l.loadOwnerLimitsInto(ctx); err != nil {
		l.overNext.Store(now + min(l.overEvery, time.Second).Microseconds())
	}
}

// def returns the definition of b in force: an operator's override, or b.
func (l *Limiter) def(b Budget) Budget {
	if o := l.over.Load(); o != nil && o.byName != nil {
		if ob, ok := o.byName[b.Name]; ok {
			if ob.Unit == "" {
				ob.Unit = b.Unit // an override set before units keeps the program's
			}
			return ob
		}
	}
	return b
}

// overridden reports whether an operator's override of budget applies.
func (l *Limiter) overridden(budget string) bool {
	o := l.over.Load()
	if o == nil || o.byName == nil {
		return false
	}
	_, ok := o.byName[budget]
	return ok
}
