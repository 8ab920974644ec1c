package quota

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// LeaseOptions configures WithLeases.
type LeaseOptions struct {
	// Block is how many units a lease takes from the store in one call.
	// 0 adapts it to the local rate: it doubles each time a lease runs out
	// before its time, and falls to what the last lease used when one
	// expires.
	Block int64
	// MaxFraction bounds a lease to this fraction of the budget's limit
	// (default 0.05): processes sharing a budget each hold at most that
	// much that the others cannot use.
	MaxFraction float64
	// MaxTime bounds how long a lease admits (default 1s; for a sliding
	// window at most a tenth of the window). A lease never crosses a daily
	// or monthly reset.
	MaxTime time.Duration
	// CheckEvery bounds how long a lease admits without confirming that no
	// process changed the owner's budgets in the store (an Adjust or Exhaust;
	// see backend.ChangeVersioner); a change ends the lease at once. Default
	// 100ms; at most MaxTime.
	CheckEvery time.Duration
}

// defaultCheckEvery is LeaseOptions.CheckEvery's default.
const defaultCheckEvery = 100 * time.Millisecond

// How budget leases keep the store's count true (WithLeases).
//
// The store always counts at least every unit a lease admits, each until
// its own admission plus the window: a block is recorded at the lease's
// end (TakeRequest.Hold), so a sliding window's counts from the take until
// a window after the last instant the lease may admit; a daily (monthly)
// block counts until the reset, which the lease never crosses. Settling shrinks
// the block and never moves it. A process that dies holding a lease wastes
// at most that lease's unused units, until they expire.
//
// This limiter's Exhaust and Adjust end its lease of the budget first (and
// Adjust drops that lease's block: what it admitted is in the usage set).
// An adjust or exhaust made by another process (or another Limiter)
// reaches an open lease within CheckEvery (default 100ms) of the lease's
// clock: a lease that admitted for longer than that since it last
// confirmed reads the owner's change version (ChangeVersioner) before
// admitting more, and a change ends it at once, settled as at its MaxTime,
// so the next charge is decided by the store as the change left it. Until
// then (at most CheckEvery after the change) the lease may still admit
// its unused units, which the store counts. An adjust keeps every block
// still held (recorded after its now, so taken within the last MaxTime)
// on top of the usage it sets, until its lease ends and settles it: what
// those blocks admitted before the adjust then counts twice until it
// expires, which is conservative (another adjust after MaxTime sets usage
// exactly). With a store that does not implement ChangeVersioner, such a
// change reaches a lease only when it ends: up to MaxTime.
//
// A block take that fails (a store stalled past the caller's deadline may
// still record it) is not retried whole: until a take succeeds, the lease
// takes only the charge, so a stall wastes what it would without leases.
//
// A lease ends when its units are spent, at its MaxTime, or at Close; an
// ended lease with unused units is settled on the next charge of its budget
// here, or by Close. Reservations admitted from a lease have no ID (a refund
// by ID from another process would give back the whole block): refund or
// settle them through this Limiter. Their Usage is the budget's state when
// the block was taken, the block counted whole.

// WithLeases makes the limiter take budget units from the store in blocks
// (leases) and admit charges locally from them: one store call per block
// instead of one per charge. Units a lease did not spend go back to the
// store when it ends (it is settled), so processes sharing a budget never
// admit more than its limit in total, and the store always counts at least
// every unit a lease admits. An Adjust or Exhaust made elsewhere reaches an
// open lease within CheckEvery. Reservations admitted from a lease have no
// ID: refund or settle them through this Limiter.
func WithLeases(o LeaseOptions) Option {
	if o.MaxFraction <= 0 || o.MaxFraction > 1 {
		o.MaxFraction = 0.05
	}
	if o.MaxTime <= 0 {
		o.MaxTime = time.Second
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = defaultCheckEvery
	}
	o.CheckEvery = min(o.CheckEvery, o.MaxTime)
	return func(l *Limiter) { l.leases = &leasing{opts: o} }
}

type leasing struct {
	opts LeaseOptions
	m    sync.Map // leaseKey -> *leaseSlot
}

type leaseKey struct{ owner, budget string }

// leaseSlot holds the current lease of one owner's budget; mu guards it
// and every lease it ever held.
type leaseSlot struct {
	mu    sync.Mutex
	cur   *lease
	block int64 // the adaptive block size
	// failed is set while the last block take failed: its outcome is
	// unknown (a store that timed out may still record the block, counted
	// and never used), so takes are of the charge alone until one succeeds
	failed bool
	// ver is the owner's change version as read at verAt (local clock;
	// zero: not read, or forgotten): the version a new lease checks
	// against, when read recently enough (see baseVersion)
	ver   int64
	verAt time.Time
}

// lease is one block of units taken from the store.
type lease struct {
	slot    *leaseSlot
	owner   string
	budget  Budget
	stamp   time.Time // when the store recorded the block (its entry's instant)
	nonce   string
	method  string // what the store spent the block under (leaseMethod for a lease)
	job     string
	size    int64 // units the store counts for the block (after settling: used)
	used    int64 // units admitted from it, net of refunds
	ends    time.Time
	settled bool
	usage   Usage     // the budget after the block was taken
	storeAt time.Time // the store's now at the take...
	local   time.Time // ...and the local clock's when its reply came
	// base is the owner's change version read before the take (based:
	// read at all), which the lease checks the store's against;
	// confirmed is the local instant since which it admits unconfirmed
	base      int64
	based     bool
	confirmed time.Time
}

// lifetime returns how long a lease of b may admit, or 0 when b's window is
// too short for leases.
func (o *LeaseOptions) lifetime(b Budget) time.Duration {
	if b.Window.IsCalendar() {
		return o.MaxTime
	}
	return min(o.MaxTime, b.Window.Duration()/10).Truncate(time.Microsecond)
}

// cap returns the largest block for b.
func (o *LeaseOptions) cap(b Budget) int64 {
	return max(1, int64(math.Floor(o.MaxFraction*float64(b.Limit))))
}

// leaseTake admits debits from leases. On admission it returns the
// reservation; on a refusal, the refusing block take's result and its
// debit; else a store error.
func (l *Limiter) leaseTake(ctx context.Context, id ident, method string, debits []backend.Debit) (*Reservation, *backend.TakeResult, backend.Debit, error) {
	held := make([]*lease, 0, len(debits))
	undo := func() {
		for i, ls := range held {
			ls.slot.mu.Lock()
			ls.giveBack(debits[i].Cost)
			ls.slot.mu.Unlock()
		}
	}
	job := jobFromContext(ctx)
	for _, d := range debits {
		ls, refused, err := l.leaseAdmit(ctx, id, method, job, d)
		if err != nil || refused != nil {
			undo()
			return nil, refused, d, err
		}
		held = append(held, ls)
	}
	now := l.localNow()
	r := &Reservation{API: l.api, Credential: id.fp, Owner: id.account, Label: id.label, Method: method, Usage: make([]Usage, len(debits)), ext: &resExt{lim: l, leases: held}}
	for i, ls := range held {
		r.Usage[i] = ls.usage
		r.Usage[i].Cost = debits[i].Cost
		if i == 0 {
			r.At = ls.storeAt.Add(now.Sub(ls.local)).Truncate(time.Microsecond)
		}
	}
	return r, nil, backend.Debit{}, nil
}

// leaseAdmit admits d from the owner's lease of its budget, taking a new
// lease when the current one cannot pay. method and job are the charge's:
// a plain decision is spent under them, a lease's block under leaseMethod.
func (l *Limiter) leaseAdmit(ctx context.Context, id ident, method, job string, d backend.Debit) (*lease, *backend.TakeResult, error) {
	life := l.leases.opts.lifetime(d.Budget)
	k := leaseKey{id.account, d.Name}
	v, ok := l.leases.m.Load(k)
	if !ok {
		v, _ = l.leases.m.LoadOrStore(k, &leaseSlot{})
	}
	slot := v.(*leaseSlot)
	lim := l.leases.opts.cap(d.Budget)
	if life <= 0 || d.Cost >= lim || (l.leases.opts.Block > 0 && d.Cost >= l.leases.opts.Block) {
		// No lease could admit this charge and another (the window is too
		// short for leases, or the cost reaches the block or the cap on
		// blocks).
		return l.takePlain(ctx, slot, id, method, job, d)
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	now := l.localNow()
	if ls := slot.cur; ls != nil && now.Before(ls.ends) && ls.size-ls.used >= d.Cost && l.confirmed(ctx, slot, ls, now) {
		ls.used += d.Cost
		return ls, nil, nil
	}
	// The current lease cannot pay: adapt the block to how it went, give
	// back what it did not spend, and take a new one.
	l.endForNext(ctx, slot, lim, now)
	base, based := l.baseVersion(ctx, slot, id.account, life, now)
	size := d.Cost
	switch b := l.leases.opts.Block; {
	case slot.failed:
		// after a failed take, a stalled store may record each block
		// a worker retries with: keep what that wastes to one charge
	case b > 0:
		size = max(size, min(b, lim))
	default:
		size = max(size, slot.block)
	}
	ls, res, err := l.takeBlock(ctx, slot, id, leaseMethod, "", d, size, life)
	slot.failed = err != nil
	if res != nil && size > d.Cost {
		// Not enough left for a whole block: take what is left, then
		// (another process took it first) just this charge, whose refusal
		// carries its own exact RetryAt.
		next := d.Cost
		if res.Usage[0].ExhaustedUntil.IsZero() {
			next = max(d.Cost, min(res.Usage[0].Limit-res.Usage[0].Used, size-1))
		}
		ls, res, err = l.takeBlock(ctx, slot, id, leaseMethod, "", d, next, life)
		if res != nil && next > d.Cost {
			ls, res, err = l.takeBlock(ctx, slot, id, leaseMethod, "", d, d.Cost, life)
		}
	}
	if ls != nil {
		ls.used = d.Cost
		ls.base, ls.based = base, based
	}
	return ls, res, err
}

// takePlain decides a charge no lease could admit with another as one plain
// decision, taken without the slot's lock, so that charges like it go to
// the store side by side instead of queueing on the lease, and the
// current lease goes on.
func (l *Limiter) takePlain(ctx context.Context, slot *leaseSlot, id ident, method, job string, d backend.Debit) (*lease, *backend.TakeResult, error) {
	ls, res, err := l.takeBlock(ctx, slot, id, method, job, d, d.Cost, 0)
	if res != nil && l.endLease(ctx, slot) {
		// the units the current lease set aside may be what the charge
		// lacked: they went back, decide again
		ls, res, err = l.takeBlock(ctx, slot, id, method, job, d, d.Cost, 0)
	}
	if ls != nil {
		ls.used = d.Cost
	}
	return ls, res, err
}

// endForNext ends the slot's current lease before a new one is taken
// (called with slot.mu held): the next block doubles when the lease ran out
// early, and is what the lease used when it lived its time; the lease's
// unused units go back to the store.
func (l *Limiter) endForNext(ctx context.Context, slot *leaseSlot, lim int64, now time.Time) {
	if slot.block == 0 {
		slot.block = min(lim, 16)
	}
	old := slot.cur
	if old == nil {
		return
	}
	if now.Before(old.ends) {
		slot.block = min(lim, 2*slot.block) // ran out early: the rate is higher
	} else {
		slot.block = min(lim, max(1, old.used)) // what a lease time takes
	}
	slot.cur = nil
	if err := old.settle(ctx, l); err != nil {
		l.log.Warn("quota: settling a lease failed; its unused units stay counted until they expire",
			"api", l.api, "budget", old.budget.Name, "unused", old.size-old.used, "error", err)
	}
}

// confirmed reports whether the lease ls may admit at now: it has admitted
// unconfirmed for no longer than CheckEvery, or the owner's change version
// is still the one read before its block was taken. Otherwise (another
// process adjusted or exhausted one of the owner's budgets, or the
// version cannot be read) the lease ends at now, and its caller takes the
// charge to the store. Its caller holds the slot's lock.
func (l *Limiter) confirmed(ctx context.Context, slot *leaseSlot, ls *lease, now time.Time) bool {
	if now.Sub(ls.confirmed) <= l.leases.opts.CheckEvery {
		return true // the common case: no interface check on the hot path
	}
	cv, ok := l.store.(backend.ChangeVersioner)
	if !ok {
		return true
	}
	v, err := cv.ChangeVersion(ctx, l.api, ls.owner)
	if err != nil {
		slot.verAt = time.Time{}
		ls.ends = now // unconfirmed: the store decides
		return false
	}
	slot.ver, slot.verAt = v, now
	if !ls.based || v != ls.base {
		ls.ends = now // changed: settled as at its time
		return false
	}
	ls.confirmed = now
	return true
}

// baseVersion returns the owner's change version for a lease of life about
// to be taken at now, and whether it is known: the one the slot read last
// if no older than life, else read now. A change between that read and the
// take ends the lease at its first check, needlessly but safely; one after
// the take is what the check is for. Its caller holds the slot's lock.
func (l *Limiter) baseVersion(ctx context.Context, slot *leaseSlot, owner string, life time.Duration, now time.Time) (int64, bool) {
	cv, ok := l.store.(backend.ChangeVersioner)
	if !ok || life <= 0 {
		return 0, false
	}
	if !slot.verAt.IsZero() && !now.Before(slot.verAt) && now.Sub(slot.verAt) <= life {
		return slot.ver, true
	}
	v, err := cv.ChangeVersion(ctx, l.api, owner)
	if err != nil {
		return 0, false // the lease ends at its first check
	}
	slot.ver, slot.verAt = v, now
	return v, true
}

// endLease ends slot's current lease when it holds units it has not
// admitted, giving them back to the store, and reports whether it did.
func (l *Limiter) endLease(ctx context.Context, slot *leaseSlot) bool {
	slot.mu.Lock()
	defer slot.mu.Unlock()
	cur := slot.cur
	if cur == nil || cur.used >= cur.size {
		return false
	}
	slot.cur = nil
	if err := cur.settle(ctx, l); err != nil {
		l.log.Warn("quota: settling a lease failed; its unused units stay counted until they expire",
			"api", l.api, "budget", cur.budget.Name, "unused", cur.size-cur.used, "error", err)
		return false
	}
	return true
}

// leaseMethod is the method a lease's block is spent under in the store's
// breakdown (Store.Breakdown), and given back under when it is settled:
// the store sees one charge per block, not the charges admitted from it.
const leaseMethod = "lease"

// takeBlock takes a block of size units of d's budget for a lease of life
// (0: a plain decision, held by no lease) and makes it the slot's lease;
// the store spends it under method and job. Like a plain decision, it
// takes the store-loss policy (WithStoreLoss) to the store and acts on a
// loss the store found.
func (l *Limiter) takeBlock(ctx context.Context, slot *leaseSlot, id ident, method, job string, d backend.Debit, size int64, life time.Duration) (*lease, *backend.TakeResult, error) {
	before := l.localNow()
	nonce := l.nonce()
	hold := life
	owner := id.account
	req := &backend.TakeRequest{
		API: l.api, Owner: owner, Nonce: nonce, Method: method, Job: job, Now: l.now(),
		Debits: []backend.Debit{{Budget: d.Budget, Cost: size}}, Hold: hold, TrustStore: l.loss.trust,
	}
	res, err := l.store.Take(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	if len(res.Usage) != 1 {
		return nil, nil, fmt.Errorf("%w: store answered %d usages for one budget", ErrStoreUnavailable, len(res.Usage))
	}
	l.lostState(ctx, req, res, id)
	finishUsage(&res.Usage[0], res.At)
	if !res.OK {
		return nil, res, nil
	}
	ls := &lease{
		slot: slot, owner: owner, budget: d.Budget, stamp: backend.HeldAt(d.Window, res.At, hold), nonce: nonce, method: method, job: job,
		size: size, usage: res.Usage[0], storeAt: res.At, local: l.localNow(), confirmed: before,
	}
	// The lease admits until its life has passed since before the take (the
	// store decided after that), and never past a calendar window's reset.
	span := life
	if d.Window.IsCalendar() {
		span = min(span, res.Usage[0].Reset.Sub(res.At))
	}
	ls.ends = before.Add(span)
	if life > 0 {
		slot.cur = ls
	} else {
		ls.settled = true // a plain decision: nothing to give back
	}
	return ls, nil, nil
}

// settle gives back the units the lease did not admit; its caller holds
// the slot's lock.
func (ls *lease) settle(ctx context.Context, l *Limiter) error {
	if ls.settled || ls.used >= ls.size {
		ls.settled = true
		return nil
	}
	ls.settled = true
	_, err := ls.shrink(ctx, l, ls.used)
	return err
}

// shrink settles the block in the store to units, and reports whether the
// store still held it (in its window, not dropped).
func (ls *lease) shrink(ctx context.Context, l *Limiter, units int64) (bool, error) {
	got, err := l.store.Settle(ctx, &backend.SettleRequest{
		API: l.api, Owner: ls.owner, At: ls.stamp, Nonce: ls.nonce, Method: ls.method, Job: ls.job,
		Debits: []backend.Debit{{Budget: ls.budget, Cost: units}}, Now: l.now(), Decided: ls.storeAt,
	})
	if err != nil {
		return false, err
	}
	if _, found := got[ls.budget.Name]; !found {
		return false, nil
	}
	ls.size = min(ls.size, units)
	return true, nil
}

// giveBack returns n admitted units to the lease: to its pool while it is
// open (they may be admitted again within its time), to the store once it
// is settled. Its caller holds the slot's lock.
func (ls *lease) giveBack(n int64) {
	ls.used -= n
}

// settleLeased shrinks a leased reservation's debits to the units given:
// the difference goes back to each lease (or, for a lease already settled,
// to the store). It returns the units freed; a debit already refunded, or
// whose settled block the store no longer holds (out of its window), gives
// an error wrapping ErrNotFound, as a plain reservation's does.
func (l *Limiter) settleLeased(ctx context.Context, res *Reservation, debits []backend.Debit) (int64, error) {
	var errs []error
	var total int64
	gone := false
	for _, d := range debits {
		for i, u := range res.Usage {
			if u.Budget != d.Name || i >= len(res.leases()) {
				continue
			}
			if u.Cost == 0 {
				gone = true // refunded already
				continue
			}
			freed := u.Cost - backend.SettledCost(u.Cost, d.Cost)
			ls := res.leases()[i]
			ls.slot.mu.Lock()
			ls.giveBack(freed)
			if ls.settled {
				// the block is the store's again: shrink it there (asking
				// even when nothing is freed, to learn it is still held)
				found, err := ls.shrink(ctx, l, ls.used)
				if err != nil || !found {
					ls.used += freed // nothing changed: keep the books straight
					ls.slot.mu.Unlock()
					if err != nil {
						errs = append(errs, err)
					} else {
						gone = true
					}
					continue
				}
			}
			ls.slot.mu.Unlock()
			if freed <= 0 {
				continue
			}
			total += freed
			res.Usage[i].Cost -= freed
			res.Usage[i].Used -= freed
			res.Usage[i].Remaining = min(res.Usage[i].Remaining+freed, res.Usage[i].Limit)
		}
	}
	if gone {
		errs = append(errs, fmt.Errorf("%w: leased reservation (refunded, or its block out of its window)", ErrNotFound))
	}
	if total > 0 {
		l.forgetRefusals(res.account())
	}
	return total, errors.Join(errs...)
}

// Close settles every lease the limiter holds, giving their unused units
// back to the store; later charges take new leases. Without leases it does
// nothing.
func (l *Limiter) Close(ctx context.Context) error {
	if l.leases == nil {
		return nil
	}
	var errs []error
	l.leases.m.Range(func(_, v any) bool {
		slot := v.(*leaseSlot)
		slot.mu.Lock()
		if ls := slot.cur; ls != nil {
			slot.cur = nil
			if err := ls.settle(ctx, l); err != nil {
				errs = append(errs, err)
			}
		}
		slot.mu.Unlock()
		return true
	})
	return errors.Join(errs...)
}

// takeLeased is Take's path under WithLeases, after the local refusal check
// (check as refusedLocally gave it).
func (l *Limiter) takeLeased(ctx context.Context, id ident, method string, debits []backend.Debit, check *refusal) (*Reservation, error) {
	r, refused, d, err := l.leaseTake(ctx, id, method, debits)
	if err != nil {
		if check != nil {
			check.busy.Store(false)
		}
		return nil, err
	}
	if r != nil {
		if check != nil {
			l.remember(id.account, debits, nil, time.Time{}, time.Time{}, check)
		}
		observe(ctx, r, false)
		return r, nil
	}
	err = l.exhausted(refused.At, refused.Usage, []backend.Debit{d}, id.fp, id.label)
	var e *ExhaustedError
	if errors.As(err, &e) && l.refusals != nil {
		l.remember(id.account, debits, e, refused.At, l.localNow(), check)
	} else if check != nil {
		check.busy.Store(false)
	}
	return nil, err
}

// endLeases ends the owner's lease of budget, settling it: Exhaust and
// Adjust call it first, so that no unit is admitted locally past a mark, or
// outside a log that Adjust replaces. It returns the lease it ended, if
// any: Adjust drops its block (the usage it sets includes what the lease
// admitted).
func (l *Limiter) endLeases(ctx context.Context, owner, budget string) *lease {
	if l.leases == nil {
		return nil
	}
	v, ok := l.leases.m.Load(leaseKey{owner, budget})
	if !ok {
		return nil
	}
	slot := v.(*leaseSlot)
	slot.mu.Lock()
	defer slot.mu.Unlock()
	slot.verAt = time.Time{} // the caller changes the version: the next lease reads it
	ls := slot.cur
	if ls != nil {
		slot.cur = nil
		if err := ls.settle(ctx, l); err != nil {
			l.log.Warn("quota: settling a lease failed; its unused units stay counted until they expire",
				"api", l.api, "budget", budget, "unused", ls.size-ls.used, "error", err)
		}
	}
	return ls
}
