package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
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
// operator overrides of its API from the store.
const DefaultOverrideRefresh = 30 * time.Second

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
		if o.Name != name || o.validate() != nil {
			return nil, fmt.Errorf("quota: overrides of %s: %w: bad definition of %q", api, ErrInvalid, name)
		}
	}
	return out, nil
}

// SetOverride records an operator's definition of budget b of api in st,
// taking precedence over any program's (see Overrides), and records it in
// the catalog too. st must be a StateStore (every store of this module is).
func SetOverride(ctx context.Context, st Store, api string, b Budget, at time.Time) error {
	if err := checkName("api", api); err != nil {
		return err
	}
	if err := ValidateBudgets([]Budget{b}); err != nil {
		return err
	}
	ss, ok := st.(StateStore)
	if !ok {
		return invalidf("store %T keeps no state: it cannot hold an override", st)
	}
	over, err := Overrides(ctx, st, api)
	if err != nil {
		return err
	}
	over[b.Name] = Override{Budget: b, SetAt: at.UTC()}
	js, err := json.Marshal(over)
	if err != nil {
		return err
	}
	if err := ss.SaveState(ctx, overrideKey(api), js); err != nil {
		return err
	}
	return st.DefineBudgets(ctx, api, []Budget{b})
}

// RemoveOverride removes the operator's definition of budget of api, if
// any, and reports whether there was one: the program's definition applies
// again.
func RemoveOverride(ctx context.Context, st Store, api, budget string) (bool, error) {
	over, err := Overrides(ctx, st, api)
	if err != nil {
		return false, err
	}
	if _, ok := over[budget]; !ok {
		return false, nil
	}
	delete(over, budget)
	js, err := json.Marshal(over)
	if err != nil {
		return false, err
	}
	return true, st.(StateStore).SaveState(ctx, overrideKey(api), js)
}

// ApplyOverrides returns budgets with the definitions of over in place of
// those of the same name, and which of them come from an override.
func ApplyOverrides(budgets []Budget, over map[string]Override) ([]Budget, map[string]Source) {
	out := slices.Clone(budgets)
	src := make(map[string]Source, len(out))
	for i, b := range out {
		src[b.Name] = SourceProgram
		if o, ok := over[b.Name]; ok {
			out[i], src[b.Name] = o.Budget, SourceOperator
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
// DefaultOverrideRefresh. 0 reloads them on every call (one more store read
// per decision); d < 0 never loads them: the program's definitions alone
// apply.
func WithOverrideRefresh(d time.Duration) Option { return func(l *Limiter) { l.overEvery = d } }

// overrides is a limiter's view of its API's operator overrides.
type overrides struct {
	byName map[string]Budget // nil: none
}

// refreshOverrides reloads the overrides when due. A failed load keeps the
// ones known and is retried within a second.
func (l *Limiter) refreshOverrides(ctx context.Context) {
	if l.overEvery >= 0 {
		l.refreshOverridesAt(ctx, l.host.nowUS())
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
}

// def returns the definition of b in force: an operator's override, or b.
func (l *Limiter) def(b Budget) Budget {
	if o := l.over.Load(); o != nil && o.byName != nil {
		if ob, ok := o.byName[b.Name]; ok {
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
