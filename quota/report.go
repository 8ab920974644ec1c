package quota

import (
	"net/http"
	"time"
)

// Report is what one upstream response says of the owner's standing in one
// of its budgets: the upstream's limit, what it counts used or remaining,
// and when its window resets. A Reporter (a cost table's profile) reads
// them; the Transport trues the store up to them (Limiter.TrueUp).
type Report struct {
	// Budget is the local budget the report applies to.
	Budget string
	// Limit is the upstream's limit for the owner (0: not said).
	Limit int64
	// Used and Remaining are what the upstream counts spent and left in
	// its window (-1: not said). At least one is said.
	Used, Remaining int64
	// Reset is when the upstream's window next resets (zero: not said).
	Reset time.Time
	// Window is the upstream's window length when it says one (IETF
	// RateLimit-Policy w), else 0.
	Window time.Duration
	// Scope is the upstream's name for what the report covers: a GitHub
	// resource ("core"), an IETF policy and partition key, a Google quota
	// limit. For events and logs.
	Scope string
	// RetryAfter is the wait the upstream asked for (Retry-After), if any.
	RetryAfter time.Duration
	// Spent says the upstream refuses every call of this scope until Reset:
	// a window that resets whole (GitHub's x-ratelimit-remaining, an IETF
	// policy's r) with nothing remaining, not a bucket that refills as it
	// goes. The Transport then marks the budget spent until Reset
	// (Limiter.Exhaust), whatever the store counts: entries counted before
	// the upstream's window began may leave the store's window sooner.
	Spent bool
}

// Reporter is implemented by a Pricer (costs.Table is one) that reads
// reports from upstream responses. The Transport calls it for every
// response, with up to the first 64 KiB of the body for a status >= 400
// (nil otherwise), and now, the Limiter's clock when the response arrived:
// what relative resets count from. ignored lists values it could not read, for events: a
// malformed report is never an error to the caller. It must be safe for
// concurrent use and must not panic on any input.
type Reporter interface {
	Reports(req *http.Request, resp *http.Response, body []byte, now time.Time) (reports []Report, ignored []string)
}
