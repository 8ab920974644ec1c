package quota

import (
	"context"
	"fmt"
	"log/slog"
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

	// limits per owner (ownerlimit.go)
	progIn       []OwnerLimit              // WithOwnerLimits, until New validates them
	prog         map[ownerBudget]int64     // the program's limits per owner
	raises       bool                      // WithLearnedRaises
	owners       atomic.Pointer[ownerView] // the limits per owner in force
	ownerMu      sync.Mutex                // orders loads and LearnLimit's writes of owners
	progRecorded atomic.Bool               // prog is recorded in the store
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
// and DefaultEventQueue once there is one), operator overrides and limits
// per owner reloaded every DefaultOverrideRefresh (WithOverrideRefresh),
// no limits per owner of the program's own (WithOwnerLimits; those
// recorded in the store apply), and a limit learned from the upstream
// applied only when smaller (WithLearnedRaises).
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
	if err := l.setupOwnerLimits(); err != nil {
		return nil, err
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

// define records the budget definitions in the store, once per limiter. It
// never blocks a decision: a failure is retried with the next credential.
func (l *Limiter) define(ctx context.Context) {
	l.recordProgramLimits(ctx)
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
