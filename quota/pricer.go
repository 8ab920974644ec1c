package quota

import (
	"net/http"
	"time"
)

// Pricer prices an outbound HTTP request: the Charge a Transport takes
// before it sends the request. costs.Table is the Pricer most callers want
// (costs.Builtin("youtube")); PricerFunc adapts a function.
//
// A Charge with no units is free: the Transport sends the request without
// taking anything. A request the Pricer cannot price is an error, and the
// Transport does not send it, except an error wrapping ErrForeignHost: the
// request goes to a host the Pricer does not price, so it is not a call of
// the API at all, and the Transport sends it unmetered unless it carries a
// credential (see Transport). Price must be safe for concurrent use and must
// not read the request body.
type Pricer interface {
	Price(req *http.Request) (Charge, error)
}

// PricerFunc adapts a function to Pricer.
type PricerFunc func(req *http.Request) (Charge, error)

// Price calls f(req).
func (f PricerFunc) Price(req *http.Request) (Charge, error) { return f(req) }

// Classifier reads an upstream error response for a Transport: whether it
// says budgets are spent, or is worth a retry. A Transport whose Pricer also
// implements Classifier uses it (costs.Table does); WithClassifier sets
// another.
//
// The Transport calls Classify only for responses with a status >= 400,
// with up to the first 64 KiB of the body (the response body still holds
// all of it). It must be safe for concurrent use.
type Classifier interface {
	Classify(req *http.Request, resp *http.Response, body []byte) Verdict
}

// Verdict is a Classifier's reading of one upstream response. The zero
// Verdict says nothing: the Transport then retries 5xx and 429 responses and
// returns the others.
type Verdict struct {
	// Exhausted names the budgets the upstream says are spent. The Transport
	// marks each spent (Limiter.Exhaust) until its window's next reset, so
	// every process sharing the store stops charging it.
	Exhausted []string
	// Transient marks a failure worth retrying (for example Google's 403
	// userRateLimitExceeded, or a 429 whose quota limit is per minute).
	Transient bool
	// Hold names methods (Charge.Method) the request's credential may not
	// call for HoldFor, whatever its owner's budgets say (YouTube's 400
	// uploadLimitExceeded: a channel's uploads are capped per 24 hours). The
	// Transport records the hold in the store, keyed by the credential (not
	// its owner), so every process refuses those calls for that credential
	// until it ends; the owner's budgets are left alone.
	Hold    []string
	HoldFor time.Duration
	// Reason is the upstream's reason, for errors and logs, e.g.
	// "quotaExceeded".
	Reason string
}

// OwnerKind is implemented by a Pricer whose upstream keeps budgets per
// owner rather than per credential: OwnerKind returns the kind of owner,
// e.g. "project" (Google bills YouTube quota per Cloud project), or "" when
// each credential is its own owner. costs.Table implements it (the
// table's owner field).
//
// A Transport over such a Pricer that is given no owner mapping (no
// WithOwnerFunc, no Owner on a WithCredential credential, no limiter-wide
// owner, no owner recorded in the store for the credential) meters every
// credential it sees as one owner, named "unnamed-" + kind
// ("unnamed-project"), and logs that once: it never lets several keys of
// one project spend more than one project's quota.
type OwnerKind interface {
	OwnerKind() string
}

// Holder is implemented by a Classifier whose verdicts may hold a
// credential (Verdict.Hold): HoldMethods names the methods that can be
// held. A Transport checks the store for a hold (one extra read) only
// before requests to one of them, so other requests cost no extra round
// trip. costs.Table implements it.
type Holder interface {
	HoldMethods() []string
}
