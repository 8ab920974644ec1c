package backend

import (
	"context"
	"time"
)

// Store keeps the logs behind a Limiter. Backends live in their own packages
// (quota/redisstore, quota/sqlitestore) plus the in-process MemoryStore here;
// every one passes quota/storetest. Callers use a Limiter, not a Store.
//
// Every method is safe for concurrent use. Credentials arrive as
// fingerprints, never secrets. Where a request's Now is zero the store uses
// its own clock (Redis TIME, the host clock); a non-zero Now is an injected
// test clock and is used as is. Errors reaching the store wrap
// ErrStoreUnavailable; bad arguments (a nil context among them) wrap
// ErrInvalid.
//
// A budget's window may change between requests (its definition changed):
// a store keeps each log's entries for the window Retain gives, deletes
// only what that window no longer keeps, and counts, for each request,
// the kept entries the request's window covers. Only decisions (Take,
// Refund, Exhaust, Adjust) move the kept window; reads never do. Instants
// are clamped to MaxTimeMicro.
type Store interface {
	// Take is the one decision: for the credential and each debited budget,
	// drop expired entries, compute used, and if every budget can pay (and
	// none is marked exhausted), record one entry per budget holding the
	// cost and return OK with usage after the charge. Otherwise record
	// nothing and return, per refusing budget, RetryAt: exactly when enough
	// units free up. Atomic across all debits.
	Take(ctx context.Context, req *TakeRequest) (*TakeResult, error)

	// Refund removes the entries of one reservation from the named budgets
	// and returns the units given back per budget; an empty map when none
	// was found (already refunded or expired).
	Refund(ctx context.Context, req *RefundRequest) (map[string]int64, error)

	// Settle shrinks the entries of one reservation (found by req.At and
	// req.Nonce, as Refund finds them) to the units really spent: each named
	// budget's entry becomes min(its cost, the debit's Cost), and is removed
	// at 0. It never increases a charge and never moves an entry in time. It
	// returns the units freed per budget whose entry was found (0 when the
	// entry already cost no more); an empty map when none was found.
	Settle(ctx context.Context, req *SettleRequest) (map[string]int64, error)

	// Exhaust marks a budget spent until req.Until; a zero or past Until
	// clears the mark. A store that implements ChangeVersioner bumps the
	// owner's version in the same step.
	Exhaust(ctx context.Context, req *ExhaustRequest) error

	// Adjust replaces a budget's log for one credential with a single entry
	// of req.Used units at now (none if Used is 0) and clears any exhaustion
	// mark: it resets a budget, or sets it to match the upstream's console.
	// It keeps the entries recorded after now (TakeRequest.Hold): open
	// leases' blocks, which their leases may admit from until they end. A
	// store that implements ChangeVersioner bumps the owner's version in
	// the same step, so that those leases end within their CheckEvery.
	Adjust(ctx context.Context, req *AdjustRequest) error

	// Usage returns current usage of each budget for one credential, after
	// dropping expired entries. It records nothing.
	Usage(ctx context.Context, req *UsageRequest) ([]Usage, error)

	// Entries returns the entries counted in one budget's window now,
	// oldest first.
	Entries(ctx context.Context, req *EntriesRequest) ([]Entry, error)

	// DefineBudgets records budget definitions for api, replacing any of the
	// same name, so another process can list and inspect them.
	DefineBudgets(ctx context.Context, api string, budgets []Budget) error

	// DeleteBudget removes a budget definition (not its logs).
	DeleteBudget(ctx context.Context, api, budget string) error

	// UpdateCredential changes api's credential catalog in one atomic step:
	// it registers a fingerprint, rotates a label to a new fingerprint,
	// relabels or forgets a credential (see CredentialUpdate), and returns
	// the record as stored afterwards. Every store applies the same rules,
	// ApplyCredentialUpdate, to the API's catalog under its own lock or
	// transaction, so labels stay unique per API across processes.
	UpdateCredential(ctx context.Context, api string, u CredentialUpdate) (CredentialInfo, error)

	// List returns every API the store knows, sorted by name, with its
	// budget definitions and credentials.
	List(ctx context.Context) ([]APIInfo, error)

	// Breakdown returns the units each method and job spent, per hour, in
	// the owner's budgets from the hour holding req.Since on, sorted by
	// hour, budget, method and job, without rows of zero units. Take adds
	// to them (the TakeRequest's Method and Job) and Refund subtracts (the
	// RefundRequest's; a refund that names no method, made by reservation
	// ID alone, is subtracted under method and job "", so the hour's total
	// stays exact while that row goes negative). Adjust is no method's
	// spending and changes no row. A row is kept at least
	// BreakdownKeep(window) after its hour ends.
	Breakdown(ctx context.Context, req *BreakdownRequest) ([]BreakdownRow, error)

	// MarkCrossing records that a budget crossed a threshold, unless a mark
	// for the same API, owner, budget and percent holds already (recorded
	// and not lapsed at now): set-if-absent, atomic across every process
	// sharing the store. first is true for the call that recorded it.
	MarkCrossing(ctx context.Context, req *CrossingMark) (first bool, err error)

	// Close releases what the store owns. A store built on a caller's
	// client leaves that client open.
	Close() error
}

// ChangeVersioner is implemented by a Store that keeps a change version
// per API and owner: a number that every Adjust and every Exhaust (a clear
// included) of any of the owner's budgets changes, in the same atomic step
// as its write, whichever process or store handle makes it. A lease
// (WithLeases) reads it now and then to learn that another process lowered
// what is left (the upstream counts more used, or said the budget is
// spent): the change ends the lease, as its expiry would, instead of
// reaching it only when it ends. Take, Refund and Settle leave it as it
// is: a take is bounded by what each lease set aside, and a refund or
// settle only gives units back.
//
// The version is opaque: callers compare it for equality only. It never
// changes back to a value it had while any entry of the owner is held
// (TakeRequest.Hold) in the store. Reading it records nothing and costs
// one cheap store call (a map read, one SQLite row, one Redis HMGET).
//
// A Store without it keeps the older bound: a change made by another
// process reaches an open lease only when the lease ends (LeaseOptions
// MaxTime). Every store in this module implements it.
type ChangeVersioner interface {
	// ChangeVersion returns the owner's change version in api (0 when no
	// change was ever recorded, or the store no longer holds one).
	ChangeVersion(ctx context.Context, api, owner string) (int64, error)
}

// Debit is one budget's part of a charge.
type Debit struct {
	Budget
	Cost int64 // units, > 0 and <= Limit
}

// TakeRequest asks a Store for one decision.
type TakeRequest struct {
	API string
	// Owner is the account the budgets are kept under: the owner's name
	// (Credential.Owner), or the credential's fingerprint when the credential
	// is its own owner.
	Owner  string
	Nonce  string // unique per call; identifies the entries for Refund
	Method string // for the record and Breakdown; may be empty
	Job    string // the job run charging (quota.ContextWithJob), for Breakdown; may be empty
	Now    time.Time
	Debits []Debit
	// TrustStore asks a store that finds it lost recorded state (see
	// TakeResult.StoreLoss) to decide on what it still holds, instead of
	// counting the affected budgets as spent (WithStoreLoss).
	TrustStore bool
	// Hold, when > 0, records the entries at now+Hold instead of now (see
	// HeldAt): a lease's block, stamped where the lease ends. A sliding
	// window's block then counts from now until Hold past its window, so
	// every unit the lease admits up to now+Hold stays counted at least a
	// window after its admission. A calendar (daily or monthly) entry
	// counts until the reset wherever it sits in the period, so such a hold
	// only marks the block as held: it is recorded at now+Hold or the
	// period's last microsecond,
	// whichever comes first. Adjust keeps held entries (those stamped after
	// its now): an open lease still admits from them.
	// Hold is at most a tenth of each sliding window it applies to; stores
	// refuse more with ErrInvalid (Redis keeps a log's keys that much past
	// its newest entry's time).
	Hold time.Duration
}

// CheckHold reports whether hold suits every debit: at most a tenth of each
// sliding window (see TakeRequest.Hold).
func CheckHold(hold time.Duration, debits []Debit) error {
	for _, d := range debits {
		if hold > 0 && !d.Window.IsCalendar() && hold > d.Window.Duration()/10 {
			return invalidf("hold %v for budget %q: more than a tenth of its window %v", hold, d.Name, d.Window.Duration())
		}
	}
	return nil
}

// SettleRequest shrinks one reservation's entries.
type SettleRequest struct {
	API    string
	Owner  string    // as in TakeRequest
	At     time.Time // when the entries were recorded (a held entry: its stamp)
	Nonce  string
	Method string // the reservation's, for usage by method
	Job    string // the reservation's, for usage by job
	// Debits name the budgets to settle and, as Cost, the units really
	// spent in each (>= 0; 0 removes the entry).
	Debits []Debit
	Now    time.Time
	// Decided is when the store decided the charge (its TakeResult.At),
	// when that is not At: a held entry is stamped after its decision. The
	// freed units leave the usage breakdown row the take spent them in,
	// the hour of Decided (zero: of At).
	Decided time.Time
}

// TakeResult is a Store's decision.
type TakeResult struct {
	OK bool
	At time.Time // the store's now: when the entries were recorded
	// Usage has one element per debit, in order: after the charge when OK,
	// the current state otherwise, with RetryAt set on refusing budgets.
	Usage []Usage
	// StoreLoss is set when the store found it had lost writes of this
	// owner that it had acknowledged (a restart without persistence, a
	// flush, a failover): every budget of the owner is affected, not only
	// the debited ones. Usage[i].StoreLoss marks each debited budget found
	// lost. Unless the request said TrustStore, the store marked those
	// budgets spent (ExhaustedUntil) and refused the charge. Stores that
	// cannot lose state never set it.
	StoreLoss bool
}

// RefundRequest names one reservation's entries.
type RefundRequest struct {
	API     string
	Owner   string    // as in TakeRequest
	At      time.Time // when the reservation was recorded
	Nonce   string
	Budgets []Budget // the budgets to look in
	// Method and Job are the reservation's, for Breakdown: the refund is
	// subtracted from that row of the hour of At. Empty when unknown (a
	// refund by reservation ID alone).
	Method, Job string
	Now         time.Time
}

// ExhaustRequest marks a budget spent.
type ExhaustRequest struct {
	API    string
	Owner  string // as in TakeRequest
	Budget Budget
	Until  time.Time
	Now    time.Time
	// StoreLoss says the mark reacts to lost store state: it never shortens
	// a later mark, and Usage reports it with StoreLoss.
	StoreLoss bool
}

// AdjustRequest sets a budget's usage.
type AdjustRequest struct {
	API    string
	Owner  string // as in TakeRequest
	Budget Budget
	Used   int64 // >= 0
	Nonce  string
	Now    time.Time
	// DropAt and DropNonce name one entry held past Now that Adjust drops
	// all the same: the block of the caller's own lease, which it ended
	// first (the usage set includes what that lease admitted). A zero
	// DropAt names none.
	DropAt    time.Time
	DropNonce string
}

// UsageRequest asks for usage of several budgets.
type UsageRequest struct {
	API     string
	Owner   string // as in TakeRequest
	Budgets []Budget
	Now     time.Time
}

// EntriesRequest asks for one budget's counted entries.
type EntriesRequest struct {
	API    string
	Owner  string // as in TakeRequest
	Budget Budget
	Now    time.Time
}

// Usage is one budget's state for one account.
type Usage struct {
	Budget    string `json:"budget"`
	Window    Window `json:"window"`
	Limit     int64  `json:"limit"`
	Used      int64  `json:"used"`      // units counted in the window now
	Remaining int64  `json:"remaining"` // Limit-Used, or 0 while marked exhausted
	Cost      int64  `json:"cost,omitempty"`
	// Reset is when capacity next frees: a calendar window's next reset, or
	// when a sliding window's oldest counted entry expires (zero when the
	// window is empty).
	Reset time.Time `json:"reset,omitzero"`
	// ExhaustedUntil is set while the budget is marked spent (Exhaust).
	ExhaustedUntil time.Time `json:"exhausted_until,omitzero"`
	// RetryAt is set on a refusing budget: when this charge could be paid.
	RetryAt time.Time `json:"retry_at,omitzero"`
	// StoreLoss is set when the store was found to have lost this budget's
	// recorded state: in a TakeResult, when this decision found it; from
	// Usage, while ExhaustedUntil is the mark that finding set (the budget
	// counts as spent until then; Adjust clears it).
	StoreLoss bool `json:"store_loss,omitempty"`
}

// Entry is one recorded charge of one budget.
type Entry struct {
	At    time.Time `json:"at"`
	Cost  int64     `json:"cost"`
	Nonce string    `json:"nonce"`
}

// CredentialInfo is what a store knows of a credential: its fingerprint,
// label and owner. JSON fields: id, label, owner.
type CredentialInfo struct {
	ID    string `json:"id"` // fingerprint
	Label string `json:"label,omitempty"`
	// Owner is the account the credential's budgets are kept under: an
	// owner name, or the credential's own fingerprint (ID) when it is its
	// own owner. Stores fill it in List and UpdateCredential.
	Owner string `json:"owner"`
}

// APIInfo is one API as a store knows it.
type APIInfo struct {
	Name        string           `json:"api"`
	Budgets     []Budget         `json:"budgets"`
	Credentials []CredentialInfo `json:"credentials"`
}

// StateStore keeps small named values and bounded record streams: the jobs
// package keeps checkpoints and run history in it. Every store in this
// module implements it.
type StateStore interface {
	// SaveState sets key to value.
	SaveState(ctx context.Context, key string, value []byte) error
	// LoadState returns key's value, or an error wrapping ErrNotFound.
	LoadState(ctx context.Context, key string) ([]byte, error)
	// AppendRecord appends rec to stream, keeping the newest keep records.
	AppendRecord(ctx context.Context, stream string, rec []byte, keep int) error
	// Records returns up to limit records of stream, newest first
	// (limit <= 0: all).
	Records(ctx context.Context, stream string, limit int) ([][]byte, error)
	// Streams returns the names of the streams that start with prefix, sorted.
	Streams(ctx context.Context, prefix string) ([]string, error)

	// AcquireLease grants req.Holder the lease on req.Key until now+TTL,
	// with a fencing token greater than any earlier grant on the key,
	// unless another lease on the key is live: then it grants nothing and
	// returns a *StateLeaseHeldError naming the holder and its expiry. One
	// holder at a time, across every process and host using the store.
	AcquireLease(ctx context.Context, req *StateLeaseRequest) (StateLease, error)
	// RenewLease extends the live lease on req.Key granted with req.Token
	// to now+TTL; ErrLeaseLost when that lease has ended or was replaced.
	RenewLease(ctx context.Context, req *StateLeaseRequest) (StateLease, error)
	// ReleaseLease ends the live lease on req.Key granted with req.Token
	// (compare and delete); ErrLeaseLost when it had already ended or been
	// replaced, and then nothing changes.
	ReleaseLease(ctx context.Context, req *StateLeaseRequest) error
	// LoadLease returns the live lease on req.Key, or an error wrapping
	// ErrNotFound when none is live.
	LoadLease(ctx context.Context, req *StateLeaseRequest) (StateLease, error)
	// SaveStateFenced sets key to value, as SaveState, unless a lease on key
	// was granted with a token greater than token (the writer's lease was
	// taken over): then it writes nothing and returns an error wrapping
	// ErrLeaseLost. The check and the write are one atomic step.
	SaveStateFenced(ctx context.Context, key string, value []byte, token int64) error
}

// SettledCost is the cost an entry of cost c keeps when settled to actual
// (SettleRequest): min(c, actual), and 0 for a negative actual. A settle
// never grows an entry.
func SettledCost(c, actual int64) int64 { return min(c, max(actual, 0)) }
