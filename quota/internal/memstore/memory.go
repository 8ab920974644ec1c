package memstore

import (
	"sync"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// Store is a backend.Store (and StateStore) that lives in one process: for
// tests, and for a single service with no need to share or keep its budget.
// It is safe for concurrent use; one mutex serialises decisions. Its clock
// (for a request with no Now) is the host's: the wall clock as read at
// most 100ms before, plus the monotonic clock's time since, so that a step
// of the wall clock shows within 100ms. The zero value is not usable: call
// New.
type Store struct {
	mu      sync.Mutex
	logs    map[logKey]*memLog
	apis    map[string]*memAPI
	state   map[string][]byte
	records map[string][][]byte
	leases  map[string]*memLease
	ops     uint64
	use     map[useKey]*useRow // Breakdown rows
	marks   map[markKey]int64  // MarkCrossing: lapses at (µs)
	// ChangeVersion per API and owner, bumped by Adjust and Exhaust; never
	// dropped, so a version never comes back
	vers map[verKey]int64
	// the log used last, so a run of decisions on one budget skips the
	// map; cleared when the sweep drops logs
	lastKey logKey
	last    *memLog
	clock   HostClock // a decision's, when the request gives no Now
	// the prefix of the nonces the store makes (a Limiter's decisions):
	// random, as a Limiter's own prefix is
	noncePfx string
}

var _ backend.Store = (*Store)(nil)
var _ backend.StateStore = (*Store)(nil)
var _ backend.ChangeVersioner = (*Store)(nil)

type verKey struct{ api, owner string }

type logKey struct{ api, cred, budget string }

type memAPI struct {
	budgets map[string]backend.Budget
	creds   map[string]backend.CredentialInfo // fingerprint -> record, stored form
}

// sweepEvery is how many decisions pass between sweeps that drop the logs of
// idle credentials.
const sweepEvery = 4096

// New returns an empty Store on the host clock.
func New() *Store {
	return &Store{
		logs:    make(map[logKey]*memLog),
		apis:    make(map[string]*memAPI),
		state:   make(map[string][]byte),
		records: make(map[string][][]byte),
		leases:  make(map[string]*memLease),
		// as unlikely as another Limiter's to be any Limiter's prefix
		noncePfx: NewNoncePrefix(),
	}
}

// Nonce returns the nonce the store made of seq (see Decide).
func (s *Store) Nonce(seq uint64) string {
	var buf [NonceMax]byte
	return string(AppendNonce(buf[:0], s.noncePfx, seq))
}

func (s *Store) log(api, cred string, b backend.Budget, now int64) *memLog {
	lg := s.logOf(api, cred, b.Name)
	lg.use(b.Window, now)
	return lg
}

// instant returns a decision's now: reqNow as given (to the µs, in its
// location), else nowUS, the host clock's.
func (s *Store) instant(reqNow time.Time, nowUS int64) time.Time {
	if !reqNow.IsZero() {
		return reqNow.Truncate(time.Microsecond)
	}
	return time.UnixMicro(nowUS)
}

// logOf returns the log of api, cred and budget, made if new.
func (s *Store) logOf(api, cred, budget string) *memLog {
	k := logKey{api, cred, budget}
	lg := s.last
	if lg == nil || s.lastKey != k {
		lg = s.logs[k]
		if lg == nil {
			lg = &memLog{}
			s.logs[k] = lg
		}
		s.lastKey, s.last = k, lg
	}
	return lg
}

func (s *Store) sweep(now int64) {
	for k, lg := range s.logs {
		lg.prune(now)
		lg.row = nil
		if lg.idle() {
			delete(s.logs, k)
		}
	}
	s.sweepUse(now)
	s.lastKey, s.last = logKey{}, nil
}

// Close implements Store; it does nothing.
func (s *Store) Close() error { return nil }
