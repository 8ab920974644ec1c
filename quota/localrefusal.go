package quota

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// DefaultRefusalBound is how stale a local refusal may get before it is
// checked against the store again (WithLocalRefusals with bound 0).
const DefaultRefusalBound = time.Second

// WithLocalRefusals makes the limiter answer a charge it has just seen
// refused with no store call until the refusal's RetryAt (its RetryAfter
// stays exact): once a daily budget is spent, further calls cost nothing.
// While a refusal stands, at most one call per bound asks the store again, so
// a change made by another process reaches this one within bound; the
// limiter's own Refund, Adjust, Exhaust and Settle forget refusals at once.
// bound <= 0 means DefaultRefusalBound. Off by default.
func WithLocalRefusals(bound time.Duration) Option {
	if bound <= 0 {
		bound = DefaultRefusalBound
	}
	return func(l *Limiter) { l.refusals = &refusals{bound: bound} }
}

// refusals is the limiter's cache of recent refusals.
type refusals struct {
	bound time.Duration
	m     sync.Map // refusalKey -> *refusal
	added atomic.Uint64
}

// sweepRefusalsEvery is how many refusals are remembered between sweeps
// that drop the ones whose capacity is back (owners no longer charged).
const sweepRefusalsEvery = 1024

// refusalKey names one owner's charge of up to two budgets.
type refusalKey struct {
	owner  string
	b1, b2 string
	c1, c2 int64
}

func makeRefusalKey(owner string, debits []backend.Debit) (refusalKey, bool) {
	k := refusalKey{owner: owner}
	switch len(debits) {
	case 2:
		k.b2, k.c2 = debits[1].Name, debits[1].Cost
		fallthrough
	case 1:
		k.b1, k.c1 = debits[0].Name, debits[0].Cost
		return k, true
	}
	return k, false
}

// refusal is a store's refusal as seen at local time local, when the
// store's clock read storeAt.
type refusal struct {
	err     ExhaustedError
	storeAt time.Time
	local   time.Time
	checked atomic.Int64 // local µs of the last store decision
	busy    atomic.Bool  // a store decision is under way
}

// localNow is the limiter's clock, or the host's.
func (l *Limiter) localNow() time.Time {
	if l.clock != nil {
		return l.clock()
	}
	return time.Now()
}

// refusedLocally returns the standing refusal of (owner, debits), or nil
// when the charge must go to the store: there is none, capacity is back,
// or this call is the one per bound that checks. check is set when the call
// holds the check (it must end with doneChecking).
func (l *Limiter) refusedLocally(owner string, debits []backend.Debit) (err *ExhaustedError, check *refusal) {
	k, ok := makeRefusalKey(owner, debits)
	if !ok {
		return nil, nil
	}
	v, ok := l.refusals.m.Load(k)
	if !ok {
		return nil, nil
	}
	r := v.(*refusal)
	now := l.localNow()
	storeNow := r.storeAt.Add(now.Sub(r.local))
	if !storeNow.Before(r.err.RetryAt) {
		l.refusals.m.CompareAndDelete(k, r)
		return nil, nil
	}
	if now.UnixMicro()-r.checked.Load() >= l.refusals.bound.Microseconds() && r.busy.CompareAndSwap(false, true) {
		return nil, r
	}
	e := r.err
	e.RetryAfter = r.err.RetryAt.Sub(storeNow)
	return &e, nil
}

// remember records the store's decision on (owner, debits): a refusal
// stands, an admission clears any refusal. check is what refusedLocally
// gave, or nil.
func (l *Limiter) remember(owner string, debits []backend.Debit, refused *ExhaustedError, storeAt, local time.Time, check *refusal) {
	if check != nil {
		defer check.busy.Store(false)
	}
	k, ok := makeRefusalKey(owner, debits)
	if !ok {
		return
	}
	if refused == nil {
		l.refusals.m.Delete(k)
		return
	}
	r := &refusal{err: *refused, storeAt: storeAt, local: local}
	r.checked.Store(local.UnixMicro())
	l.refusals.m.Store(k, r)
	if l.refusals.added.Add(1)%sweepRefusalsEvery == 0 {
		l.refusals.m.Range(func(k, v any) bool {
			r := v.(*refusal)
			if !r.storeAt.Add(local.Sub(r.local)).Before(r.err.RetryAt) {
				l.refusals.m.CompareAndDelete(k, r)
			}
			return true
		})
	}
}

// forgetRefusals drops the owner's standing refusals: this limiter gave
// units back or changed the owner's budgets.
func (l *Limiter) forgetRefusals(owner string) {
	if l.refusals == nil {
		return
	}
	l.refusals.m.Range(func(k, _ any) bool {
		if k.(refusalKey).owner == owner {
			l.refusals.m.Delete(k)
		}
		return true
	})
}
