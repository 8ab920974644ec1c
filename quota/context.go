package quota

import "context"

// ChargeFunc is told of every charge a Limiter grants (refund false) or
// gives back (refund true) under a context made by ContextWithChargeFunc.
// The jobs package uses it to count the units each run spends. It is called
// on the decision path: it must be quick and safe for concurrent use. (An
// Observer, given to the Limiter with WithObserver, receives every event
// off the decision path instead.)
type ChargeFunc func(res *Reservation, refund bool)

type chargeFuncKey struct{}

type jobKey struct{}

// ContextWithJob returns a copy of ctx under which every charge is recorded
// as made by the job name: Store.Breakdown reports units per job, and
// events carry it. The jobs package sets it for every run.
func ContextWithJob(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, jobKey{}, name)
}

// JobFromContext returns the job name ContextWithJob set on ctx, or "".
func JobFromContext(ctx context.Context) string {
	name, _ := ctx.Value(jobKey{}).(string)
	return name
}

type allocation struct {
	budget, within string
	next           *allocation
}

type allocationKey struct{}

// ContextWithChargeFunc returns a copy of ctx under which every Take and
// Refund of any Limiter also calls fn. They nest: an inner one does not
// hide an outer one.
func ContextWithChargeFunc(ctx context.Context, fn ChargeFunc) context.Context {
	if outer, ok := ctx.Value(chargeFuncKey{}).(ChargeFunc); ok {
		inner := fn
		fn = func(res *Reservation, refund bool) { inner(res, refund); outer(res, refund) }
	}
	return context.WithValue(ctx, chargeFuncKey{}, fn)
}

// ContextWithAllocation returns a copy of ctx under which every charge to
// the budget within is also charged, with the same units and in the same
// atomic take, to the budget alloc: a job's own allocation inside a shared
// budget (backfill may spend at most 2,000 of the 9,500 "units"). Both are
// budgets of the Limiter; a Take whose Limiter lacks alloc fails with
// ErrInvalid naming it.
func ContextWithAllocation(ctx context.Context, alloc, within string) context.Context {
	next, _ := ctx.Value(allocationKey{}).(*allocation)
	return context.WithValue(ctx, allocationKey{}, &allocation{budget: alloc, within: within, next: next})
}

func observe(ctx context.Context, res *Reservation, refund bool) {
	if fn, ok := ctx.Value(chargeFuncKey{}).(ChargeFunc); ok {
		fn(res, refund)
	}
}

// allocate adds to ch.Units the allocation budgets ctx asks for, on a copy.
func allocate(ctx context.Context, ch Charge) Charge {
	a, _ := ctx.Value(allocationKey{}).(*allocation)
	if a == nil {
		return ch
	}
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
