package quota

import (
	"time"

	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/internal/memstore"
)

// The value types a user of the Limiter meets, defined with the store
// contract in package backend (database/sql/driver's role) and named here
// too, so that user code needs only this package.
type (
	// Store keeps the limiter's state: NewMemoryStore for one process,
	// sqlitestore for one host, redisstore for many. See package backend
	// to write one.
	Store = backend.Store
	// StateStore is a Store that also keeps small named values (the jobs
	// package's checkpoints and run leases).
	StateStore = backend.StateStore
	// Budget is a named pool of units with a limit over a window.
	Budget = backend.Budget
	// Window is the span a budget's limit applies to: Sliding or Daily.
	Window = backend.Window
	// Usage is one budget's standing for an owner.
	Usage = backend.Usage
	// Entry is one recorded charge of one budget.
	Entry = backend.Entry
	// CredentialInfo is what a store records of a credential.
	CredentialInfo = backend.CredentialInfo
	// APIInfo lists an API's budgets and credentials.
	APIInfo = backend.APIInfo
)

// MaxLimit is the largest limit a Budget may have, on every store: 2^53-1.
const MaxLimit = backend.MaxLimit

// DefaultUnit is the unit of a Budget that declares none (Budget.Unit):
// "units".
const DefaultUnit = backend.DefaultUnit

// UnitUSDMicro is the unit of a Budget counted in micro-dollars (a spend
// budget): "usd-micro", shown by the tools as dollars.
const UnitUSDMicro = backend.UnitUSDMicro

// Sliding returns a window that counts the units of the last d, exactly, at
// every instant. d is a whole number of microseconds, > 0.
func Sliding(d time.Duration) Window { return backend.Sliding(d) }

// Daily returns a window that counts the units since the last midnight in
// loc, as upstreams that reset at a local midnight do (DST-correct).
func Daily(loc *time.Location) Window { return backend.Daily(loc) }

// Monthly returns a window that counts the units since local midnight of
// the 1st of the month in loc, as upstreams that bill by the calendar month
// do (DST-correct: where a DST jump skips that midnight, the month begins
// at the jump).
func Monthly(loc *time.Location) Window { return backend.Monthly(loc) }

// ParseWindow parses a window as Window.String writes it: "sliding:24h0m0s"
// (or a bare time.ParseDuration form such as "24h") for a sliding window,
// "daily:ZONE" for a daily one, "monthly:ZONE" for a monthly one.
func ParseWindow(s string) (Window, error) { return backend.ParseWindow(s) }

// MemoryStore is a Store (and StateStore) that lives in one process: for
// tests, and for a single service with no need to share or keep its
// budget. It is safe for concurrent use. Its clock (for a request with no
// Now) is the host's. The zero value is not usable: call NewMemoryStore.
type MemoryStore = memstore.Store

// NewMemoryStore returns an empty MemoryStore on the host clock.
func NewMemoryStore() *MemoryStore { return memstore.New() }
