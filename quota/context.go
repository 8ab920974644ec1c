package quota

import (
	"context"
	"errors"
	"fmt"
)

// ChargeFunc is told of every charge a Limiter grants (refund false) or
// gives back (refund true) under a context made by ContextWithChargeFunc.
// The jobs package uses it to count the units each run spends. It is called
// on the decision path: it must be quick and safe for concurrent use. (An
// Observer, given to the Limiter with WithObserver, receives every event
// off the decision path instead.)
type ChargeFunc func(res *Reservation, refund bool)

// callValues is what a context carries for the Limiter calls made under it
// (ContextWithJob, ContextWithChargeFunc, ContextWithAllocation, a
// Transport's observers), under one key, so that a Take finds all of them
// in one lookup: a lookup walks the context's chain. Each ContextWith...
// copies its parent's and changes one; never written once in a context.
// Its methods take a nil one for none.
type callValues struct {
	job       string
	charge    ChargeFunc
	alloc     *allocation
	observers []Observer
	unnamed   *unnamedOwner // a Transport's owner for credentials none names
}

// unnamedOwner is the owner a Transport meters the credentials nothing
// names under (Transport.unnamed), for the registrations its Limiter makes
// under the request's context: recorded only for a credential the catalog
// does not record yet (CredentialUpdate.OwnerIfNew). It names the Limiter
// so that another one sharing the context (the Transport's holds) ignores it.
type unnamedOwner struct {
	lim   *Limiter
	owner string
}

// ownerIfNew returns the owner a registration of l under v gives a
// credential the catalog does not record yet, or "".
func (v *callValues) ownerIfNew(l *Limiter) string {
	if v == nil || v.unnamed == nil || v.unnamed.lim != l {
		return ""
	}
	return v.unnamed.owner
}

type callValuesKey struct{}

// valuesOf returns the values ctx carries, or nil.
func valuesOf(ctx context.Context) *callValues {
	v, _ := ctx.Value(callValuesKey{}).(*callValues)
	return v
}

// withValues returns a copy of ctx carrying its values changed by set.
func withValues(ctx context.Context, set func(*callValues)) context.Context {
	var v callValues
	if p := valuesOf(ctx); p != nil {
		v = *p
	}
	set(&v)
	return context.WithValue(ctx, callValuesKey{}, &v)
}

func (v *callValues) jobName() string {
	if v == nil {
		return ""
	}
	return v.job
}

func (v *callValues) chargeFunc() ChargeFunc {
	if v == nil {
		return nil
	}
	return v.charge
}

// ContextWithJob returns a copy of ctx under which every charge is recorded
// as made by the job name: Store.Breakdown reports units per job, and
// events carry it. The jobs package sets it for every run.
func ContextWithJob(ctx context.Context, name string) context.Context {
	return withValues(ctx, func(v *callValues) { v.job = name })
}

// jobFromContext returns the job name ContextWithJob set on ctx, or "".
func jobFromContext(ctx context.Context) string { return valuesOf(ctx).jobName() }

type allocation struct {
	budget, within string
	next           *allocation
}

// ContextWithChargeFunc returns a copy of ctx under which every Take and
// Refund of any Limiter also calls fn. They nest: an inner one does not
// hide an outer one.
func ContextWithChargeFunc(ctx context.Context, fn ChargeFunc) context.Context {
	if outer := valuesOf(ctx).chargeFunc(); outer != nil {
		inner := fn
		fn = func(res *Reservation, refund bool) { inner(res, refund); outer(res, refund) }
	}
	return withValues(ctx, func(v *callValues) { v.charge = fn })
}

// ContextWithAllocation returns a copy of ctx under which every charge to
// the budget within is also charged, with the same units and in the same
// atomic take, to the budget alloc: a job's own allocation inside a shared
// budget (backfill may spend at most 2,000 of the 9,500 "units"). Both are
// budgets of the Limiter; a Take whose Limiter lacks alloc fails with
// ErrInvalid naming it.
func ContextWithAllocation(ctx context.Context, alloc, within string) context.Context {
	return withValues(ctx, func(v *callValues) { v.alloc = &allocation{budget: alloc, within: within, next: v.alloc} })
}

func observe(ctx context.Context, res *Reservation, refund bool) {
	if fn := valuesOf(ctx).chargeFunc(); fn != nil {
		fn(res, refund)
	}
}

// allocate adds to ch.Units the allocation budgets ctx asks for, on a copy.
func allocate(ctx context.Context, ch Charge) Charge { return valuesOf(ctx).allocate(ch) }

// allocate adds to ch.Units the allocation budgets v asks for, on a copy.
func (v *callValues) allocate(ch Charge) Charge {
	if v == nil || v.alloc == nil {
		return ch
	}
	a := v.alloc
	units := make(map[string]int64, len(ch.Units)+1)
	for k, v := range ch.Units {
		units[k] = v
	}
	for ; a != nil; a = a.next {
		if n, ok := ch.Units[a.within]; ok {
			units[a.budget] += n
		}
	}
	return Charge{Method: ch.Method, Units: units}
}

// checkContext refuses a nil context with an ErrInvalid error naming the
// call, instead of the panic the first use of it would be.
func checkContext(ctx context.Context, call string) error {
	if ctx == nil {
		return invalidf("%s: nil context: pass context.Background() or a request's context", call)
	}
	return nil
}

// stopped is the error for a charge the caller's context ended: it wraps
// ctx.Err() (and the context's cause, when it has one of its own), never
// ErrStoreUnavailable, because the caller stopped, not the store. Nothing
// was admitted, and the failure policy (FailOpen) does not apply: a job
// stopping on SIGTERM is never told to go ahead.
func stopped(ctx context.Context, call string) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("quota: %s: not admitted: %w: %w", call, err, cause)
	}
	return fmt.Errorf("quota: %s: not admitted: %w", call, err)
}

// cancelled reports whether the caller cancelled ctx: the cause of a store
// error met under it, not a store outage. A deadline that passed while the
// store was being waited on is not: the store did not answer in time
// (ErrStoreUnavailable, and the failure policy applies).
func cancelled(ctx context.Context) bool { return errors.Is(ctx.Err(), context.Canceled) }
