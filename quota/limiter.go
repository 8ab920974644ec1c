package quota

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/internal/memstore"
)

// Limiter meters one API's budgets per owner over a Store: every credential
// of one owner (Credential.Owner, WithOwner, or the owner the store recorded)
// shares its budgets; a credential with none is its own owner. It is safe
// for concurrent use; make one per API and share it. Take is the method most
// callers want; the Transport calls it for every outbound request.
type Limiter struct {
	store   Store
	api     string
	budgets []Budget
	index   map[string]int

	clock    func() time.Time
	fpKey    []byte // nil: DefaultFingerprint
	owner    string // WithOwner
	failOpen int64
	log      *slog.Logger

	refusals  *refusals // WithLocalRefusals; nil when off
	leases    *leasing  // WithLeases; nil when off
	unmetered atomic.Uint64
	loss      lossState // store-loss policy, counter and hook (loss.go)
	nonceSeq  atomic.Uint64
	noncePfx  string
	self      *resExt // what the reservations Take returns share
	defined   atomic.Bool
	defWarned atomic.Bool               // otherDefinitions has run
	overEvery time.Duration             // WithOverrideRefresh
	host      memstore.HostClock        // the host clock, for decisions and overNext
	mem       *memstore.Store           // the store, when it is the memory store: decided in process
	overNext  atomic.Int64              // when to reload overrides, µs since the epoch
	over      atomic.Pointer[overrides] // operator overrides in force
	fps       sync.Map                  // secret -> fingerprint
	accounts  sync.Map                  // resolveKey -> *ident, once registered in the store
	lastID    atomic.Pointer[lastIdent] // the credential registered last
	labels    sync.Map                  // resolveKey (no fingerprint) -> *ident, for label-only credentials

	// events (observer.go)
	obs        []Observer
	thresholds []int
	queueCap   int
	ev         *events
	marks      sync.Map // crossingKey -> time.Time: threshold marks known until then
}

// resolveKey is what the limiter caches a credential's account under: the
// catalog records it once per process for each combination.
type resolveKey struct{ fp, label, owner string }

// New returns a Limiter for api's budgets over store. api and budget names
// are letters, digits, '.', '_' and '-'; limits must be > 0; windows valid;
// names unique. The budgets are recorded in the store (on first use) so that
// quotactl can inspect them with no configuration.
//
// Defaults: the store's clock, DefaultFingerprint, no owner (each
// credential is its own owner unless it or the store names one), fail
// closed, slog.Default(), no observers (WithObserver; DefaultThresholds
// and DefaultEventQueue once there is one).
func New(store Store, api string, budgets []Budget, opts ...Option) (*Limiter, error) {
	if store == nil {
		return nil, invalidf("nil store")
	}
	if err := backend.CheckName("api", api); err != nil {
		return nil, err
	}
	if err := backend.ValidateBudgets(budgets); err != nil {
		return nil, err
	}
	l := &Limiter{
		store:     store,
		api:       api,
		budgets:   append([]Budget(nil), budgets...),
		index:     make(map[string]int, len(budgets)),
		failOpen:  -1,
		overEvery: DefaultOverrideRefresh,
	}
	for i, b := range l.budgets {
		l.index[b.Name] = i
	}
	for _, o := range opts {
		o(l)
	}
	if l.owner != "" {
		if err := backend.CheckName("owner", l.owner); err != nil {
			return nil, err
		}
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if err := l.setupEvents(); err != nil {
		return nil, err
	}
	l.noncePfx = memstore.NewNoncePrefix()
	l.self = &resExt{lim: l}
	l.mem, _ = store.(*memstore.Store) // the decision path, chosen once
	return l, nil
}

// Load returns a Limiter for api with the budget definitions recorded in the
// store (by New in another process, or `quotactl budget set`). It is how the
// CLI works with no configuration. An API with no recorded budgets is an
// error wrapping ErrNotFound.
func Load(ctx context.Context, store Store, api string, opts ...Option) (*Limiter, error) {
	if err := checkContext(ctx, "load"); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, invalidf("nil store")
	}
	apis, err := store.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range apis {
		if a.Name == api && len(a.Budgets) > 0 {
			l, err := New(store, api, a.Budgets, opts...)
			if err != nil {
				return nil, err
			}
			l.defined.Store(true)
			return l, nil
		}
	}
	return nil, fmt.Errorf("%w: api %q has no budgets in the store", ErrNotFound, api)
}

// API returns the API name the limiter meters.
func (l *Limiter) API() string { return l.api }

// Budgets returns a copy of the limiter's budget definitions in force: the
// program's, or an operator's override of one (see Overrides) as last
// loaded.
func (l *Limiter) Budgets() []Budget {
	out := make([]Budget, len(l.budgets))
	for i, b := range l.budgets {
		out[i] = l.def(b)
	}
	return out
}

// Store returns the limiter's store.
func (l *Limiter) Store() Store { return l.store }

// Unmetered returns how many charges went ahead without metering because the
// store was unreachable and the charge was under the FailOpen threshold.
func (l *Limiter) Unmetered() uint64 { return l.unmetered.Load() }

func (l *Limiter) now() time.Time {
	if l.clock == nil {
		return time.Time{}
	}
	return l.clock().Truncate(time.Microsecond)
}

// budget returns the named budget or an error naming it.
func (l *Limiter) budget(name string) (Budget, error) {
	i, ok := l.index[name]
	if !ok {
		return Budget{}, invalidf("unknown budget %q for api %q", name, l.api)
	}
	return l.def(l.budgets[i]), nil
}

// Fingerprint returns the fingerprint the limiter stores for secret:
// DefaultFingerprint, or Fingerprint with the key of WithFingerprintKey.
func (l *Limiter) Fingerprint(secret string) string {
	if v, ok := l.fps.Load(secret); ok {
		return v.(string)
	}
	var fp string
	if l.fpKey != nil {
		fp = Fingerprint(l.fpKey, secret)
	} else {
		fp = DefaultFingerprint(secret)
	}
	l.fps.Store(secret, fp)
	return fp
}

// ident is a credential as the limiter meters it.
type ident struct {
	fp, label string
	account   string // what stores key budgets by: owner name or fingerprint
}

// identify resolves c: its fingerprint, label and account. The first time a
// process sees a credential it registers it in the store's catalog (one
// call), which enforces unique labels and tells the recorded owner; the
// answer is cached, so later calls cost nothing. An error (a label taken by
// another credential, an unknown label, an unreachable store) comes before
// anything is charged. The ident returned is shared: never written.
func (l *Limiter) identify(ctx context.Context, c Credential) (*ident, error) {
	id, _, err := l.resolve(ctx, c)
	return id, err
}

// resolve is identify, telling too whether it went past the caches (to
// the store, or to derive a fingerprint): whether it took time.
func (l *Limiter) resolve(ctx context.Context, c Credential) (*ident, bool, error) {
	owner := c.Owner
	if owner == "" {
		owner = l.owner
	}
	if c.Owner != "" {
		if err := backend.CheckName("owner", c.Owner); err != nil {
			return nil, false, err
		}
	}
	if c.Secret == "" {
		return l.identifyLabel(ctx, c.Label, owner)
	}
	if e := l.lastID.Load(); e != nil && e.secret == c.Secret && e.id.label == c.Label && e.owner == owner {
		return e.id, false, nil // the credential of the last registration: no map lookups
	}
	fp := l.Fingerprint(c.Secret)
	k := resolveKey{fp, c.Label, owner}
	if v, ok := l.accounts.Load(k); ok {
		return v.(*ident), false, nil
	}
	l.define(ctx)
	u := backend.CredentialUpdate{Op: backend.OpRegister, ID: fp, Label: c.Label, Owner: owner, Legacy: l.legacyFingerprint(c.Secret)}
	if owner == "" {
		// A Transport's unnamed owner: for a credential the store does not
		// record, decided in the store's atomic step, so that it never
		// replaces an owner another process just recorded. The account
		// cached below is the store's answer either way.
		u.OwnerIfNew = valuesOf(ctx).ownerIfNew(l)
	}
	info, err := l.store.UpdateCredential(ctx, l.api, u)
	if err != nil {
		return nil, true, err
	}
	// A credential given without a label is named by the label the store
	// holds for it (after a rotation, say), so refusals and events name
	// "yt-key-1", not a fingerprint.
	id := &ident{fp, cmp.Or(c.Label, info.Label), info.Account()}
	l.accounts.Store(k, id)
	l.lastID.Store(&lastIdent{secret: c.Secret, owner: owner, id: id})
	return id, true, nil
}

// noIdent is no credential's ident; never written.
var noIdent ident

// lastIdent is the credential identify registered last, kept so that a run
// of charges with one credential skips two map lookups.
type lastIdent struct {
	secret, owner string
	id            *ident
}

// lookup resolves c for a read (Status, Entries) without writing to the
// store: the cached account, else what the catalog records for the
// fingerprint (or its legacy one), else the owner named or the fingerprint.
func (l *Limiter) lookup(ctx context.Context, c Credential) (ident, error) {
	owner := c.Owner
	if owner == "" {
		owner = l.owner
	}
	if c.Owner != "" {
		if err := backend.CheckName("owner", c.Owner); err != nil {
			return ident{}, err
		}
	}
	if c.Secret == "" {
		if owner != "" && c.Label != "" {
			// the owner named, as for a secret below: the label's record
			// is read, and never moved to that owner (a charge would)
			rec, err := l.lookupLabel(ctx, c.Label)
			if err != nil {
				return ident{}, err
			}
			return ident{rec.ID, c.Label, owner}, nil
		}
		id, err := l.identify(ctx, c) // with no owner named, a label lookup reads only
		if err != nil {
			return ident{}, err
		}
		return *id, nil
	}
	fp := l.Fingerprint(c.Secret)
	if v, ok := l.accounts.Load(resolveKey{fp, c.Label, owner}); ok {
		return *v.(*ident), nil
	}
	if owner != "" {
		return ident{fp, c.Label, owner}, nil
	}
	r, found, err := l.recorded(ctx, c.Secret)
	if err != nil {
		return ident{}, err
	}
	account := fp
	if found {
		account = r.Account()
	}
	return ident{fp, c.Label, account}, nil
}

// legacyFingerprint returns secret's legacy fingerprint (see
// LegacyFingerprintKey), or "" when the limiter has a fingerprint key of
// its own (WithFingerprintKey), which never had one.
func (l *Limiter) legacyFingerprint(secret string) string {
	if l.fpKey != nil {
		return ""
	}
	return Fingerprint([]byte(LegacyFingerprintKey), secret)
}

// recorded returns what the store's catalog records for the credential with
// secret in this API: its record under its fingerprint, else under its
// legacy one; found is false when neither is recorded. It reads the
// catalog and writes nothing.
func (l *Limiter) recorded(ctx context.Context, secret string) (rec CredentialInfo, found bool, err error) {
	apis, err := l.store.List(ctx)
	if err != nil {
		return CredentialInfo{}, false, err
	}
	fp, legacy := l.Fingerprint(secret), l.legacyFingerprint(secret)
	for _, a := range apis {
		if a.Name != l.api {
			continue
		}
		for _, r := range a.Credentials {
			switch {
			case r.ID == fp:
				return r, true, nil
			case legacy != "" && r.ID == legacy:
				rec, found = r, true
			}
		}
	}
	return rec, found, nil
}

// define records the budget definitions in the store, once per limiter. It
// never blocks a decision: a failure is retried with the next credential.
func (l *Limiter) define(ctx context.Context) {
	if l.defined.Load() {
		return
	}
	// An operator's override stands in the catalog: define the rest.
	own := make([]Budget, 0, len(l.budgets))
	for _, b := range l.budgets {
		if !l.overridden(b.Name) {
			own = append(own, b)
		}
	}
	if len(own) == 0 {
		l.defined.Store(true)
		return
	}
	l.otherDefinitions(ctx, own)
	if l.store.DefineBudgets(ctx, l.api, own) == nil {
		l.defined.Store(true)
	}
}

// otherDefinitions warns, once, of each of own's budgets that the store's
// catalog records with another definition: another program sharing the
// store defines it otherwise, and each process admits up to its own
// definition, so the looser one may spend what the upstream does not allow.
func (l *Limiter) otherDefinitions(ctx context.Context, own []Budget) {
	if l.defWarned.Swap(true) {
		return
	}
	apis, err := l.store.List(ctx)
	if err != nil {
		l.defWarned.Store(false) // try again with the next definition
		return
	}
	for _, a := range apis {
		if a.Name != l.api {
			continue
		}
		for _, rec := range a.Budgets {
			for _, b := range own {
				if b.Name == rec.Name && (b.Limit != rec.Limit || b.Window.String() != rec.Window.String()) {
					l.log.Warn("quota: another program sharing the store defines this budget otherwise; each process decides with its own definition, "+
						"so the looser one may admit what the upstream refuses: give every program the same definition, or set one for all with 'quotactl budget set'",
						"api", l.api, "budget", b.Name, "limit", b.Limit, "window", b.Window.String(),
						"recorded_limit", rec.Limit, "recorded_window", rec.Window.String())
				}
			}
		}
	}
}

// identifyLabel is resolve for a credential given by its label alone.
func (l *Limiter) identifyLabel(ctx context.Context, label, owner string) (*ident, bool, error) {
	if label == "" {
		return nil, false, invalidf("empty credential: give a secret, or the label of a credential the store knows")
	}
	k := resolveKey{label: label, owner: owner}
	if v, ok := l.labels.Load(k); ok {
		return v.(*ident), false, nil
	}
	c, err := l.lookupLabel(ctx, label)
	if err != nil {
		return nil, true, err
	}
	if owner != "" && owner != c.Account() {
		if c, err = l.store.UpdateCredential(ctx, l.api, backend.CredentialUpdate{Op: backend.OpRegister, ID: c.ID, Owner: owner}); err != nil {
			return nil, true, err
		}
	}
	id := &ident{c.ID, label, c.Account()}
	l.labels.Store(k, id)
	return id, true, nil
}

func (l *Limiter) lookupLabel(ctx context.Context, label string) (CredentialInfo, error) {
	apis, err := l.store.List(ctx)
	if err != nil {
		return CredentialInfo{}, err
	}
	var found []CredentialInfo
	for _, a := range apis {
		if a.Name != l.api {
			continue
		}
		for _, c := range a.Credentials {
			if c.Label == label {
				found = append(found, c.Filled())
			}
		}
	}
	switch len(found) {
	case 0:
		return CredentialInfo{}, fmt.Errorf("%w: no credential labelled %q for api %q", ErrUnknownCredential, label, l.api)
	case 1:
		return found[0], nil
	}
	// Only a store written before labels were unique holds this.
	return CredentialInfo{}, invalidf("label %q names %d credentials of api %q: give the secret, or keep one label (quotactl credential relabel or forget, naming the other by fingerprint)", label, len(found), l.api)
}

// Rotate replaces the credential named from (its label or fingerprint) with
// next, a new secret of the same owner: next takes the label (next.Label if
// given, else the old one) and the old credential's account, so its usage
// continues; the old fingerprint stays recorded under the account without a
// label, so a process still using the old key during a rollout meters the
// same budgets. It returns the new record. A next the store already records
// is refused (ErrInvalid), unless it is an unlabelled credential of the same
// account (rotating back to the old key).
func (l *Limiter) Rotate(ctx context.Context, from string, next Credential) (CredentialInfo, error) {
	if next.Secret == "" {
		return CredentialInfo{}, invalidf("rotate %q: the new credential needs a secret", from)
	}
	return l.catalog(ctx, backend.CredentialUpdate{Op: backend.OpRotate, From: from, ID: l.Fingerprint(next.Secret), Label: next.Label, Owner: next.Owner})
}

// Relabel gives the credential named from (its label or fingerprint) the
// label label (empty: none). Labels are unique per API.
func (l *Limiter) Relabel(ctx context.Context, from, label string) (CredentialInfo, error) {
	return l.catalog(ctx, backend.CredentialUpdate{Op: backend.OpRelabel, From: from, Label: label})
}

// Forget removes the credential named from (its label or fingerprint) from
// the store's catalog. Its owner's usage stays; a later charge with the same
// secret records it again, as its own owner unless it names one.
func (l *Limiter) Forget(ctx context.Context, from string) (CredentialInfo, error) {
	return l.catalog(ctx, backend.CredentialUpdate{Op: backend.OpForget, From: from})
}

func (l *Limiter) catalog(ctx context.Context, u backend.CredentialUpdate) (CredentialInfo, error) {
	if err := checkContext(ctx, "credential update"); err != nil {
		return CredentialInfo{}, err
	}
	l.define(ctx)
	info, err := l.store.UpdateCredential(ctx, l.api, u)
	// This process's view of labels and owners is stale either way.
	l.accounts.Clear()
	l.lastID.Store(nil)
	l.labels.Clear()
	return info, err
}

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
	if len(obs) == 0 {
		return l.take(ctx, cv, cred, ch, nil, host, idErr, bare && cv.chargeFunc() == nil)
	}
	d := &decision{start: time.Now()}
	r, err := l.take(ctx, cv, cred, ch, d, host, idErr, false)
	l.decided(ctx, obs, cred, ch, d, r, err)
	return r, err
}

// take is Take; d, when not nil, collects what an event reports. host is
// the host clock's time Take read (µs); cv what ctx carries; idErr as in
// takeWith. With bare, an admission on the MemoryStore returns no
// Reservation (nil, nil): its usage is kept on the stack.
func (l *Limiter) take(ctx context.Context, cv *callValues, cred Credential, ch Charge, d *decision, host int64, idErr error, bare bool) (*Reservation, error) {
	ch = cv.allocate(ch)
	if len(ch.Units) == 0 {
		return nil, invalidf("charge %q names no budget", ch.Method)
	}
	var dbuf [2]backend.Debit // on the stack unless the charge names more budgets
	debits, maxCost, err := l.debitsOf(dbuf[:0], ch)
	if err != nil {
		return nil, err
	}
	var (
		id   *ident
		slow bool
	)
	if err = idErr; err == nil {
		id, slow, err = l.resolve(ctx, cred)
	}
	if err != nil {
		id = &noIdent // what follows reports the error, naming no credential
	}
	if slow {
		// Registering the credential took time (a store call, deriving its
		// fingerprint): the decision reads the clock again, so that it is
		// not recorded at an instant well before it was made.
		host = l.host.NowUS()
	}
	var check *refusal
	if err == nil && l.refusals != nil {
		var refused *ExhaustedError
		if refused, check = l.refusedLocally(id.account, debits); refused != nil {
			refused.Credential = cmp.Or(id.label, id.fp)
			return nil, refused
		}
		if check != nil {
			// The one call per bound that asks the store again reads the
			// operator's definitions too: a budget redefined in another
			// process reaches a standing refusal within the bound, not at
			// the next override refresh.
			l.reloadOverrides(ctx, host)
			var derr error
			if debits, maxCost, derr = l.debitsOf(debits[:0], ch); derr != nil {
				check.busy.Store(false)
				return nil, derr
			}
		}
	}
	if err == nil && l.leases != nil {
		var r *Reservation
		if r, err = l.takeLeased(ctx, *id, ch.Method, debits, check); err == nil || !errors.Is(err, ErrStoreUnavailable) {
			return r, err
		}
	}
	job := cv.jobName()
	var seq uint64 // the nonce's number (Reservation.seq)
	// On the MemoryStore the decision's usage is written straight into the
	// Reservation returned: with it, the one allocation of the Take.
	var (
		r         *Reservation
		usage     []Usage
		ok        bool
		at        time.Time
		storeLoss bool
	)
	if err == nil {
		if ms := l.mem; ms != nil {
			var ubuf [2]Usage // Allow's usage, on the stack
			if bare && len(debits) <= len(ubuf) {
				usage = ubuf[:len(debits)]
			} else {
				r, usage = newReservation(len(debits))
			}
			ok, at, seq, err = l.decideMemory(ctx, ms, host, id.account, ch.Method, job, debits, usage)
			seq |= storeSeq
		} else {
			var res *backend.TakeResult
			seq = l.nonceSeq.Add(1)
			if res, err = l.decide(ctx, seq, id.account, ch.Method, job, debits); err == nil {
				ok, at, usage, storeLoss = res.OK, res.At, res.Usage, res.StoreLoss
				r = &Reservation{Usage: res.Usage}
			}
		}
	}
	if err != nil && cancelled(ctx) {
		// The caller cancelled while the store was asked: its error, not a
		// store outage (no failure policy, no store error event).
		err = stopped(ctx, "take")
	}
	if d != nil { // observers: a copy of the debits, so that they stay on the stack otherwise
		d.note(id.fp, &backend.TakeRequest{Owner: id.account, Job: job}, slices.Clone(debits), nil, err)
	}
	if err != nil {
		if check != nil {
			check.busy.Store(false)
		}
		if err = l.unavailable(err, maxCost, ch.Method, cred); err == nil {
			r := &Reservation{API: l.api, Credential: id.fp, Owner: id.account, Label: cred.Label, Method: ch.Method, At: time.Now(), Unmetered: true}
			if fn := cv.chargeFunc(); fn != nil {
				fn(r, false)
			}
			return r, nil
		}
		return nil, err
	}
	if storeLoss || anyLost(usage) {
		// the request and the result as the store saw them (rare: rebuilt
		// here so that the decision's own can stay on the stack)
		l.lostState(ctx, &backend.TakeRequest{API: l.api, Owner: id.account, Method: ch.Method, Now: l.now(), Debits: slices.Clone(debits), TrustStore: l.loss.trust},
			&backend.TakeResult{OK: ok, At: at, Usage: slices.Clone(usage), StoreLoss: storeLoss}, *id)
	}
	for i := range usage {
		finishUsage(&usage[i], at)
	}
	if d != nil && d.debits != nil { // observers: a copy that outlives this frame
		d.res = &backend.TakeResult{OK: ok, At: at, Usage: slices.Clone(usage), StoreLoss: storeLoss}
	}
	if !ok {
		err := l.exhausted(at, usage, debits, id.fp, id.label)
		if e, ok := err.(*ExhaustedError); ok && l.refusals != nil {
			l.remember(id.account, debits, e, at, l.localNow(), check)
		}
		return nil, err
	}
	if check != nil {
		l.remember(id.account, debits, nil, at, time.Time{}, check)
	}
	if r == nil { // Allow on the MemoryStore: admitted, no Reservation
		return nil, nil
	}
	r.API, r.Credential, r.Owner, r.Label = l.api, id.fp, id.account, id.label
	r.Method, r.Job, r.At = ch.Method, job, at
	r.ext, r.seq = l.self, seq
	if fn := cv.chargeFunc(); fn != nil {
		fn(r, false)
	}
	return r, nil
}

// debitsOf appends to debits one Debit per budget ch names, each with the
// definition in force (an operator's override, or the program's), and
// returns them with the largest cost; an unknown budget, a cost <= 0 or one
// over its limit is an error.
func (l *Limiter) debitsOf(debits []backend.Debit, ch Charge) ([]backend.Debit, int64, error) {
	var maxCost int64
	over := l.over.Load() // the definitions in force (def), for every debit
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
		if cost > b.Limit {
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

// Refund gives a reservation's units back to every budget it charged. A
// reservation that is already refunded or out of its window gives an error
// wrapping ErrNotFound; an unmetered reservation is a no-op. res may come
// from ParseReservationID: known by its ID alone, it is refunded in every
// budget the limiter defines, and when it also charged a budget the
// limiter does not (one `quotactl budget delete` removed), Refund gives
// back the rest and returns a *PartialRefundError (ErrPartialRefund)
// naming that budget, whose units stay recorded: refund again once the
// budget is defined again.
func (l *Limiter) Refund(ctx context.Context, res *Reservation) error {
	if err := checkContext(ctx, "refund"); err != nil {
		return err
	}
	if res == nil {
		return invalidf("nil reservation")
	}
	if res.Unmetered {
		return nil
	}
	nonce := res.nonce()
	if nonce == "" && res.leases() == nil {
		return invalidf("reservation of api %q has no ID: give the Reservation Take returned, or one from ParseReservationID", res.API)
	}
	if res.API != l.api {
		return invalidf("reservation %q is for api %q, not %q", res.ID(), res.API, l.api)
	}
	l.refreshOverrides(ctx)
	budgets := l.Budgets()
	if res.leases() != nil {
		debits := make([]backend.Debit, 0, len(res.Usage))
		for _, u := range res.Usage {
			b, err := l.budget(u.Budget)
			if err != nil {
				return err
			}
			debits = append(debits, backend.Debit{Budget: b})
		}
		freed, err := l.settleLeased(ctx, res, debits)
		if err != nil {
			return err
		}
		if freed == 0 {
			return fmt.Errorf("%w: leased reservation (already refunded)", ErrNotFound)
		}
		observe(ctx, res, true)
		return nil
	}
	owner := res.Owner
	if owner == "" {
		owner = res.Credential
	}
	var undefined []string
	if len(res.Usage) > 0 {
		budgets = make([]Budget, 0, len(res.Usage))
		for _, u := range res.Usage {
			b, err := l.budget(u.Budget)
			if err != nil {
				return err
			}
			budgets = append(budgets, b)
		}
	} else {
		// Known by its ID alone, the reservation names no budget: it is
		// looked for in every budget the API defines. One it charged that
		// is no longer defined (quotactl budget delete) cannot be refunded
		// (its window is unknown); find out before giving anything back,
		// so that the answer says so rather than succeed.
		var err error
		if undefined, err = l.undefinedCharged(ctx, owner, res.At, nonce); err != nil {
			return err
		}
	}
	got, err := l.store.Refund(ctx, &backend.RefundRequest{API: l.api, Owner: owner, At: res.At, Nonce: nonce, Budgets: budgets, Method: res.Method, Job: res.Job, Now: l.now()})
	l.refunded(ctx, res, budgets, got, err)
	if err != nil {
		return err
	}
	if len(got) > 0 {
		l.forgetRefusals(owner)
		observe(ctx, res, true)
	}
	if len(undefined) > 0 {
		return &PartialRefundError{API: l.api, Reservation: res.ID(), Refunded: got, NotRefunded: undefined}
	}
	if len(got) == 0 {
		return fmt.Errorf("%w: reservation %s (already refunded, or out of its window)", ErrNotFound, res.ID())
	}
	return nil
}

// everKept is the window a refund reads the log of a budget no longer
// defined through: longer than any a log keeps its entries for, so that
// the read counts every kept entry and prunes nothing a budget defined
// again could count.
const everKept = 100 * 365 * 24 * time.Hour

// undefinedCharged returns, sorted, the budgets the reservation of owner
// recorded at at with nonce charged that the limiter does not define (a
// budget deleted from the store keeps its logs): the budgets whose
// breakdown rows since at name them and whose log holds the entry. It
// reads and writes nothing else.
func (l *Limiter) undefinedCharged(ctx context.Context, owner string, at time.Time, nonce string) ([]string, error) {
	now := l.now()
	rows, err := l.store.Breakdown(ctx, &backend.BreakdownRequest{API: l.api, Owner: owner, Since: at, Now: now})
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, r := range rows {
		if _, ok := l.index[r.Budget]; ok || seen[r.Budget] || backend.CheckName("budget", r.Budget) != nil {
			continue
		}
		seen[r.Budget] = true
		es, err := l.store.Entries(ctx, &backend.EntriesRequest{API: l.api, Owner: owner, Budget: Budget{Name: r.Budget, Limit: MaxLimit, Window: Sliding(everKept)}, Now: now})
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if e.Nonce == nonce && e.At.Equal(at) && e.Cost > 0 {
				out = append(out, r.Budget)
				break
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Exhaust marks budget spent for cred until until, in the store, so every
// process sharing it refuses charges to that budget until then (the upstream
// said the quota is spent). A zero until clears the mark; an until later
// than a store can keep (see MaxTimeMicro, in 2255) marks it until then.
func (l *Limiter) Exhaust(ctx context.Context, cred Credential, budget string, until time.Time) error {
	if err := checkContext(ctx, "exhaust"); err != nil {
		return err
	}
	until = backend.ClampTime(until)
	l.refreshOverrides(ctx)
	b, err := l.budget(budget)
	if err != nil {
		return err
	}
	id, err := l.identify(ctx, cred)
	if err != nil {
		return err
	}
	l.endLeases(ctx, id.account, budget)
	err = l.store.Exhaust(ctx, &backend.ExhaustRequest{API: l.api, Owner: id.account, Budget: b, Until: until, Now: l.now()})
	l.marked(ctx, cred, id.fp, id.account, budget, until, err)
	if err == nil {
		l.forgetRefusals(id.account)
	}
	return err
}

// Adjust sets budget's usage for cred to used units recorded now, dropping
// its log and any exhaustion mark: to match the upstream's console. Adjust
// with used 0 resets the budget. The blocks other processes' leases took
// within their lease time (WithLeases) stay counted on top of used until
// those leases end, since they may admit from them until then: Status may
// show more than used. The adjust bumps the owner's change version, which
// ends those leases within their CheckEvery (see WithLeases).
func (l *Limiter) Adjust(ctx context.Context, cred Credential, budget string, used int64) error {
	if err := checkContext(ctx, "adjust"); err != nil {
		return err
	}
	l.refreshOverrides(ctx)
	b, err := l.budget(budget)
	if err != nil {
		return err
	}
	if used < 0 || used > b.Limit {
		return invalidf("used %d for budget %q: must be between 0 and the limit %d", used, budget, b.Limit)
	}
	id, err := l.identify(ctx, cred)
	if err != nil {
		return err
	}
	req := &backend.AdjustRequest{API: l.api, Owner: id.account, Budget: b, Used: used, Nonce: l.nonce(), Now: l.now()}
	if ls := l.endLeases(ctx, id.account, budget); ls != nil {
		// its block is held past now, but the lease admits no more: what
		// it admitted is in used
		req.DropAt, req.DropNonce = ls.stamp, ls.nonce
	}
	if err := l.store.Adjust(ctx, req); err != nil {
		return err
	}
	l.forgetRefusals(id.account)
	return nil
}

// Status returns the usage of every budget of cred's owner, in definition
// order: used, limit, remaining, next reset or next free unit,
// exhausted-until. It reads the store's catalog and writes nothing.
func (l *Limiter) Status(ctx context.Context, cred Credential) ([]Usage, error) {
	if err := checkContext(ctx, "status"); err != nil {
		return nil, err
	}
	id, err := l.lookup(ctx, cred)
	if err != nil {
		return nil, err
	}
	return l.StatusOf(ctx, id.account)
}

// StatusOf is Status for an account: an owner name, or the fingerprint of a
// credential that is its own owner (CredentialInfo.Owner from List).
func (l *Limiter) StatusOf(ctx context.Context, account string) ([]Usage, error) {
	if err := checkContext(ctx, "status"); err != nil {
		return nil, err
	}
	l.refreshOverrides(ctx)
	now := l.now()
	us, err := l.store.Usage(ctx, &backend.UsageRequest{API: l.api, Owner: account, Budgets: l.Budgets(), Now: now})
	if err != nil {
		return nil, err
	}
	if now.IsZero() {
		now = time.Now()
	}
	for i := range us {
		finishUsage(&us[i], now)
	}
	return us, nil
}

// Entries returns the entries counted now in cred's budget, oldest first:
// the usage history over the window.
func (l *Limiter) Entries(ctx context.Context, cred Credential, budget string) ([]Entry, error) {
	if err := checkContext(ctx, "entries"); err != nil {
		return nil, err
	}
	l.refreshOverrides(ctx)
	b, err := l.budget(budget)
	if err != nil {
		return nil, err
	}
	id, err := l.lookup(ctx, cred)
	if err != nil {
		return nil, err
	}
	return l.store.Entries(ctx, &backend.EntriesRequest{API: l.api, Owner: id.account, Budget: b, Now: l.now()})
}

// List returns every API, budget and credential the store knows.
func (l *Limiter) List(ctx context.Context) ([]APIInfo, error) {
	if err := checkContext(ctx, "list"); err != nil {
		return nil, err
	}
	return l.store.List(ctx)
}
