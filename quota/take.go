package quota

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/internal/memstore"
)

// nonce returns a fresh nonce: unique per call within the process, and
// across processes by its random prefix.
func (l *Limiter) nonce() string {
	var buf [memstore.NonceMax]byte
	return string(l.appendNonce(buf[:0], l.nonceSeq.Add(1)))
}

// appendNonce appends the nonce of seq, a number from l.nonceSeq. A
// Reservation keeps seq alone and builds its nonce from it when asked
// (Reservation.nonce).
func (l *Limiter) appendNonce(b []byte, seq uint64) []byte {
	return memstore.AppendNonce(b, l.noncePfx, seq)
}

// Take charges every budget ch names for cred, atomically (all pay or none
// does), and returns the Reservation. A budget that cannot pay now gives an
// *ExhaustedError (errors.Is ErrExhausted) with the exact RetryAfter; a cost
// larger than a limit, ErrCostExceedsLimit; an invalid argument, ErrInvalid;
// an unreachable store, ErrStoreUnavailable unless FailOpen lets the charge
// through unmetered. A ctx cancelled before or while the store is asked gives
// an error wrapping ctx.Err(): nothing is admitted, and FailOpen does not
// apply.
func (l *Limiter) Take(ctx context.Context, cred Credential, ch Charge) (*Reservation, error) {
	if err := checkContext(ctx, "take"); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, stopped(ctx, "take") // the caller stopped: the store is not asked
	}
	return l.takeWith(ctx, cred, ch, nil, false)
}

// Allow charges every budget ch names for cred exactly as Take does, for
// a caller that will neither refund nor settle the charge: it returns nil
// when the charge was admitted (or let through unmetered by FailOpen), and
// Take's error otherwise (an *ExhaustedError when a budget cannot pay).
// The store records the same entries; what Allow saves is the Reservation,
// which on the MemoryStore is the one allocation of a decision: there an
// admission by Allow allocates nothing (unless an observer or a
// ChargeFunc is attached to the limiter or ctx: they are given the
// Reservation). It is the counterpart of golang.org/x/time/rate's AllowN.
func (l *Limiter) Allow(ctx context.Context, cred Credential, ch Charge) error {
	if err := checkContext(ctx, "take"); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return stopped(ctx, "take")
	}
	_, err := l.takeWith(ctx, cred, ch, nil, true)
	return err
}

// takeWith is Take past its context checks. idErr, when not nil, is the
// error a registration of cred just met (Wait registers a credential
// before it queues): the charge is decided as Take decides one whose own
// registration failed so, failure policy included, without asking the
// store again. With bare (Allow), an admission may return a nil
// Reservation.
func (l *Limiter) takeWith(ctx context.Context, cred Credential, ch Charge, idErr error, bare bool) (*Reservation, error) {
	// The host clock, read once (again only after a slow registration):
	// for the override refresh and, on the MemoryStore, the decision's
	// instant.
	host := l.host.NowUS()
	l.refreshOverridesAt(ctx, host)
	cv := valuesOf(ctx) // one lookup for the job, allocations, observers and ChargeFunc
	obs := l.observersWith(cv)
	c := takeCall{l: l, ctx: ctx, cv: cv, cred: cred, ch: cv.allocate(ch), host: host}
	if len(obs) == 0 {
		c.bare = bare && cv.chargeFunc() == nil
		return c.run(idErr)
	}
	c.d = &decision{start: time.Now()}
	r, err := c.run(idErr)
	l.decided(ctx, obs, cred, ch, c.d, r, err)
	return r, err
}

// takeCall is one Take on its way through the limiter: what the caller
// asked, then what each step found. It lives on the caller's stack, and
// take keeps the debits and the usage apart, in buffers on its stack for a
// charge of up to two budgets, so that a decision on the MemoryStore
// allocates nothing but its Reservation: escape analysis does not tell a
// takeCall's fields apart, so one slice of them in it would move them to
// the heap.
type takeCall struct {
	l    *Limiter
	ctx  context.Context
	cv   *callValues // what ctx carries
	cred Credential
	ch   Charge    // with the allocations ctx asks for
	d    *decision // collects what an event reports; nil without observers
	host int64     // the host clock's time Take read (µs)
	bare bool      // Allow on the MemoryStore: no Reservation, usage on the stack

	maxCost int64
	ov      *ownerView // the limits per owner the debits were priced with
	id      *ident
	check   *refusal // the standing local refusal this call asks the store about
	job     string

	// the decision
	r         *Reservation
	ok        bool
	at        time.Time
	storeLoss bool
	seq       uint64 // the nonce's number (Reservation.seq)
}

// run takes the charge: it prices it, identifies the credential (idErr:
// an error met before, reported the same way), answers from a standing
// local refusal or a budget lease when it can, and otherwise asks the
// store. With bare, an admission on the MemoryStore returns no Reservation
// (nil, nil): its usage is kept on the stack.
func (c *takeCall) run(idErr error) (*Reservation, error) {
	l, ctx := c.l, c.ctx
	var (
		dbuf [2]backend.Debit
		ubuf [2]Usage // Allow's usage
	)
	debits, maxCost, err := c.price(dbuf[:0])
	if err != nil {
		return nil, err
	}
	c.maxCost = maxCost
	err = c.identify(idErr)
	if err == nil {
		// the owner's limits, now that the owner is known
		if err := l.ownerDebits(debits, c.id.account, c.ov); err != nil {
			return nil, err
		}
	}
	if err == nil && l.refusals != nil {
		var refused error
		if debits, refused = c.refusedLocally(debits); refused != nil {
			return nil, refused
		}
	}
	if err == nil && l.leases != nil {
		var r *Reservation
		// a store that failed the lease's take fails the charge too: the
		// failure policy applies, the store is not asked twice
		if r, err = l.takeLeased(ctx, *c.id, c.ch.Method, debits, c.check); err == nil || !errors.Is(err, ErrStoreUnavailable) {
			return r, err
		}
	}
	c.job = c.cv.jobName()
	var usage []Usage
	if err == nil {
		usage, err = c.decide(debits, ubuf[:])
	}
	if err != nil {
		return c.failed(err, debits)
	}
	return c.decided(debits, usage)
}

// price turns the charge into debits, one per budget with the definition
// in force, appended to buf, and returns them with the largest cost.
func (c *takeCall) price(buf []backend.Debit) ([]backend.Debit, int64, error) {
	if len(c.ch.Units) == 0 {
		return nil, 0, invalidf("charge %q names no budget", c.ch.Method)
	}
	c.ov = c.l.owners.Load()
	return c.l.debitsOf(buf, c.ch, c.ov)
}

// identify resolves the credential (idErr: an error met before, reported
// the same way). On an error, what follows reports it naming no
// credential.
func (c *takeCall) identify(idErr error) error {
	err, slow := idErr, false
	if err == nil {
		c.id, slow, err = c.l.resolve(c.ctx, c.cred)
	}
	if err != nil {
		c.id = &noIdent
	}
	if slow {
		// Registering the credential took time (a store call, deriving its
		// fingerprint): the decision reads the clock again, so that it is
		// not recorded at an instant well before it was made.
		c.host = c.l.host.NowUS()
	}
	return err
}

// refusedLocally returns the standing local refusal of the charge as an
// error, if any (WithLocalRefusals); when this call is the one that asks
// the store again, it prices the charge again with the operator's
// definitions reloaded, and returns the debits to decide on.
func (c *takeCall) refusedLocally(debits []backend.Debit) ([]backend.Debit, error) {
	refused, check := c.l.refusedLocally(c.id.account, debits)
	if refused != nil {
		refused.Credential = cmp.Or(c.id.label, c.id.fp)
		return debits, refused
	}
	if c.check = check; check == nil {
		return debits, nil
	}
	// The one call per bound that asks the store again reads the
	// operator's definitions too: a budget redefined in another process
	// reaches a standing refusal within the bound, not at the next
	// override refresh.
	c.l.reloadOverrides(c.ctx, c.host)
	c.ov = c.l.owners.Load()
	debits, maxCost, err := c.l.debitsOf(debits[:0], c.ch, c.ov)
	if err == nil {
		err = c.l.ownerDebits(debits, c.id.account, c.ov)
	}
	if err != nil {
		check.busy.Store(false)
	}
	c.maxCost = maxCost
	return debits, err
}

// decide asks the store, and returns each debit's usage. On the
// MemoryStore the usage is written straight into the Reservation returned
// (with it, the one allocation of the Take), or into ubuf for Allow.
func (c *takeCall) decide(debits []backend.Debit, ubuf []Usage) ([]Usage, error) {
	l := c.l
	if ms := l.mem; ms != nil {
		var usage []Usage
		if c.bare && len(debits) <= len(ubuf) {
			usage = ubuf[:len(debits)]
		} else {
			c.r, usage = newReservation(len(debits))
		}
		var err error
		c.ok, c.at, c.seq, err = l.decideMemory(c.ctx, ms, c.host, c.id.account, c.ch.Method, c.job, debits, usage)
		c.seq |= storeSeq
		return usage, err
	}
	c.seq = l.nonceSeq.Add(1)
	res, err := l.decide(c.ctx, c.seq, c.id.account, c.ch.Method, c.job, debits)
	if err != nil {
		return nil, err
	}
	c.ok, c.at, c.storeLoss = res.OK, res.At, res.StoreLoss
	c.r = &Reservation{Usage: res.Usage}
	return res.Usage, nil
}

// failed reports a take that met err, and applies the failure policy: an
// unmetered Reservation when FailOpen lets the charge through.
func (c *takeCall) failed(err error, debits []backend.Debit) (*Reservation, error) {
	if cancelled(c.ctx) {
		// The caller cancelled while the store was asked: its error, not a
		// store outage (no failure policy, no store error event).
		err = stopped(c.ctx, "take")
	}
	if c.d != nil { // observers: a copy of the debits, so that they stay on the stack otherwise
		c.d.note(c.id.fp, &backend.TakeRequest{Owner: c.id.account, Job: c.job}, slices.Clone(debits), nil, err)
	}
	if c.check != nil {
		c.check.busy.Store(false)
	}
	if err = c.l.unavailable(err, c.maxCost, c.ch.Method, c.cred); err != nil {
		return nil, err
	}
	r := &Reservation{API: c.l.api, Credential: c.id.fp, Owner: c.id.account, Label: c.cred.Label, Method: c.ch.Method, At: time.Now(), Unmetered: true}
	if fn := c.cv.chargeFunc(); fn != nil {
		fn(r, false)
	}
	return r, nil
}

// decided reports the store's decision: a refusal as an *ExhaustedError,
// an admission as the Reservation (nil for a bare one).
func (c *takeCall) decided(debits []backend.Debit, usage []Usage) (*Reservation, error) {
	l, id := c.l, c.id
	if c.d != nil {
		c.d.note(id.fp, &backend.TakeRequest{Owner: id.account, Job: c.job}, slices.Clone(debits), nil, nil)
	}
	if c.storeLoss || anyLost(usage) {
		// the request and the result as the store saw them (rare: rebuilt
		// here so that the decision's own can stay on the stack)
		l.lostState(c.ctx, &backend.TakeRequest{API: l.api, Owner: id.account, Method: c.ch.Method, Now: l.now(), Debits: slices.Clone(debits), TrustStore: l.loss.trust},
			&backend.TakeResult{OK: c.ok, At: c.at, Usage: slices.Clone(usage), StoreLoss: c.storeLoss}, *id)
	}
	for i := range usage {
		finishUsage(&usage[i], c.at)
	}
	if c.d != nil && c.d.debits != nil { // observers: a copy that outlives this frame
		c.d.res = &backend.TakeResult{OK: c.ok, At: c.at, Usage: slices.Clone(usage), StoreLoss: c.storeLoss}
	}
	if !c.ok {
		err := l.exhausted(c.at, usage, debits, id.fp, id.label)
		if e, ok := err.(*ExhaustedError); ok && l.refusals != nil {
			l.remember(id.account, debits, e, c.at, l.localNow(), c.check)
		}
		return nil, err
	}
	if c.check != nil {
		l.remember(id.account, debits, nil, c.at, time.Time{}, c.check)
	}
	r := c.r
	if r == nil { // Allow on the MemoryStore: admitted, no Reservation
		return nil, nil
	}
	r.API, r.Credential, r.Owner, r.Label = l.api, id.fp, id.account, id.label
	r.Method, r.Job, r.At = c.ch.Method, c.job, c.at
	r.ext, r.seq = l.self, c.seq
	if fn := c.cv.chargeFunc(); fn != nil {
		fn(r, false)
	}
	return r, nil
}

// debitsOf appends to debits one Debit per budget ch names, each with the
// definition in force (an operator's override, or the program's), and
// returns them with the largest cost; an unknown budget, a cost <= 0 or one
// over its limit is an error. While some owner has a limit of its own (in
// ov, the limits per owner in force), a cost is checked against the
// owner's limit instead, once the owner is known (ownerDebits with the
// same ov).
func (l *Limiter) debitsOf(debits []backend.Debit, ch Charge, ov *ownerView) ([]backend.Debit, int64, error) {
	var maxCost int64
	over := l.over.Load() // the definitions in force (def), for every debit
	perOwner := ov != nil && ov.limits != nil
	for i := range l.budgets {
		b := &l.budgets[i] // by pointer: a Budget copied costs more than its use here
		cost, ok := ch.Units[b.Name]
		if !ok {
			continue
		}
		if over != nil && over.byName != nil {
			if ob, ok := over.byName[b.Name]; ok {
				b = &ob
			}
		}
		if cost <= 0 {
			return nil, 0, invalidf("cost %d for budget %q: must be > 0", cost, b.Name)
		}
		if cost > b.Limit && !perOwner {
			return nil, 0, fmt.Errorf("%w: %s/%s: cost %d > limit %d, can never succeed", ErrCostExceedsLimit, l.api, b.Name, cost, b.Limit)
		}
		maxCost = max(maxCost, cost)
		// Set in place: a Debit literal is built apart and copied in, which
		// stalls on store forwarding.
		debits = append(debits, backend.Debit{})
		db := &debits[len(debits)-1]
		db.Budget, db.Cost = *b, cost
	}
	if len(debits) != len(ch.Units) {
		for name := range ch.Units {
			if _, err := l.budget(name); err != nil {
				return nil, 0, err
			}
		}
	}
	return debits, maxCost, nil
}

// unavailable applies the failure policy to a store error: nil means go
// ahead unmetered.
func (l *Limiter) unavailable(err error, cost int64, method string, cred Credential) error {
	if !errors.Is(err, ErrStoreUnavailable) || l.failOpen < 0 || cost > l.failOpen {
		return err
	}
	n := l.unmetered.Add(1)
	l.log.Warn("quota: store unavailable, charge admitted unmetered",
		"api", l.api, "credential", cred, "method", method, "cost", cost, "unmetered_total", n, "error", err)
	return nil
}

// exhausted is the error for a refusal at at with usage (one per debit).
func (l *Limiter) exhausted(at time.Time, usage []Usage, debits []backend.Debit, fp, label string) error {
	worst := -1
	for i, u := range usage {
		if !u.RetryAt.IsZero() && (worst < 0 || u.RetryAt.After(usage[worst].RetryAt)) {
			worst = i
		}
	}
	if worst < 0 {
		return fmt.Errorf("%w: store refused a charge without saying which budget", ErrStoreUnavailable)
	}
	u := usage[worst]
	who := label
	if who == "" {
		who = fp
	}
	return &ExhaustedError{
		API: l.api, Budget: u.Budget, Credential: who, Used: u.Used, Limit: u.Limit, Cost: debits[worst].Cost,
		RetryAfter: u.RetryAt.Sub(at), RetryAt: u.RetryAt, ExhaustedUntil: u.ExhaustedUntil,
	}
}

// finishUsage fills Remaining from Used, Limit and the exhaustion mark at now.
func finishUsage(u *Usage, now time.Time) {
	u.Remaining = max(u.Limit-u.Used, 0)
	if !u.ExhaustedUntil.IsZero() {
		if u.ExhaustedUntil.After(now) {
			u.Remaining = 0
		} else {
			u.ExhaustedUntil = time.Time{}
		}
	}
}

// decide asks the store for one decision on debits, under the nonce of seq
// (see appendNonce).
func (l *Limiter) decide(ctx context.Context, seq uint64, owner, method, job string, debits []backend.Debit) (*backend.TakeResult, error) {
	var nb [memstore.NonceMax]byte // the nonce is built on the stack: one allocation, the string
	req := &backend.TakeRequest{API: l.api, Owner: owner, Nonce: string(l.appendNonce(nb[:0], seq)), Method: method, Job: job, Now: l.now(), Debits: slices.Clone(debits), TrustStore: l.loss.trust}
	return l.store.Take(ctx, req)
}

// decideMemory is decide on the MemoryStore, which writes each debit's
// usage into us: the request and the debits stay on the caller's stack,
// and a decision allocates nothing. host is the host clock's time (µs)
// Take read, for the store's too unless the limiter has a clock of its own
// (WithClock). The store makes the nonce, and returns its number (see
// MemoryStore.take).
func (l *Limiter) decideMemory(ctx context.Context, ms *memstore.Store, host int64, owner, method, job string, debits []backend.Debit, us []Usage) (bool, time.Time, uint64, error) {
	// Set field by field: a literal is built apart and copied in, which
	// stalls on store forwarding.
	var req backend.TakeRequest
	req.API, req.Owner, req.Method, req.Job = l.api, owner, method, job
	if l.clock != nil {
		req.Now = l.now()
	}
	req.TrustStore = l.loss.trust
	return ms.Decide(ctx, &req, host, debits, us)
}

// newReservation allocates a Reservation with room for n budgets' usage,
// for up to two budgets in one piece: the one allocation of an admitted
// Take on the MemoryStore, which writes the usage in place. It returns
// the Reservation and its Usage.
func newReservation(n int) (*Reservation, []Usage) {
	switch n {
	case 1:
		s := new(struct {
			r Reservation
			u [1]Usage
		})
		s.r.Usage = s.u[:]
		return &s.r, s.u[:]
	case 2:
		s := new(struct {
			r Reservation
			u [2]Usage
		})
		s.r.Usage = s.u[:]
		return &s.r, s.u[:]
	}
	u := make([]Usage, n)
	return &Reservation{Usage: u}, u
}
