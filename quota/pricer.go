package quota

import (
	"io"
	"net/http"
	"time"
)

// Pricer prices an outbound HTTP request: the Charge a Transport takes
// before it sends it. costs.Table is the Pricer most callers want; PricerFunc
// adapts a function. A Charge with no units is free. A request that cannot
// be priced is not sent, except one to a host the Pricer does not price
// (ErrForeignHost), sent unmetered when it carries no credential. Price must
// be safe for concurrent use and must not read the request body.
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
// The Transport calls Classify for responses with a status >= 400, and
// for successful ones of calls whose Estimate asks it (Estimate.Peek),
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
	// Until, when set, is when the upstream says its window resets (GitHub's
	// x-ratelimit-reset): the Transport marks the Exhausted budgets spent
	// until then instead, when it is later than now and sooner than their
	// window's next reset. A later Until is not taken: nothing an upstream
	// says marks a budget spent for longer than its own window.
	Until time.Time
	// RetryAfter, when Until is zero, is how long after the response the
	// upstream says its budget can pay again (Shopify's THROTTLED: the
	// points missing over the restore rate); Until is then now plus it.
	RetryAfter time.Duration
	// Transient marks a failure worth retrying (for example Google's 403
	// userRateLimitExceeded, or a 429 whose quota limit is per minute).
	Transient bool
	// Hold names methods (Charge.Method) the request's credential may not call
	// for HoldFor, whatever its owner's budgets say (YouTube's per-channel
	// upload cap); the hold is kept per credential in the store.
	Hold    []string
	HoldFor time.Duration
	// Reason is the upstream's reason, for errors and logs, e.g.
	// "quotaExceeded".
	Reason string
}

// OwnerKind is implemented by a Pricer whose upstream keeps budgets per
// owner rather than per credential: it returns the kind of owner, e.g.
// "project" (Google bills YouTube quota per Cloud project), or "". A
// Transport over such a Pricer with no owner mapping meters every credential
// as one owner, "unnamed-"+kind, and logs that once: several keys of one
// project never spend more than one project's quota.
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

// BodyPricer is a Pricer some of whose methods cost what the response
// says: an LLM call's tokens, a GraphQL query's calculated cost. A
// Transport over a BodyPricer calls EstimateCall instead of Price, takes the
// estimate before sending, and settles to the actual once the response
// body has been read (see Transport: estimate, then settle). costs.Table
// is one.
type BodyPricer interface {
	Pricer
	// EstimateCall prices req, reading its body when its method is priced by
	// it (an upper bound: never below what the upstream bills), and leaves
	// req ready to send with its body whole. It must be safe for concurrent
	// use.
	EstimateCall(req *http.Request) (Estimate, error)
}

// Estimate is a BodyPricer's price of one request.
type Estimate struct {
	// Charge is what the Transport takes before sending.
	Charge Charge
	// Actual, when not nil, returns a reader of what the call really cost
	// for its successful response (status 2xx), which the Transport
	// settles the charge to; nil: Charge is the cost.
	Actual func(resp *http.Response) Actual
	// Peek makes the Transport read up to 64 KiB of a successful response
	// before returning it, and give them to the Classifier and the
	// Reporter as it does an error's: for an API that answers errors with
	// 200 (GraphQL: Shopify's THROTTLED).
	Peek bool
}

// Actual reads what a call cost from its response body, fed to it as the
// caller reads the body.
type Actual interface {
	io.Writer
	// Units returns what the call cost per budget of the charge once the
	// body has said it (a JSON body's usage, a stream's final usage
	// event); an error says why not yet (a stream stopped half way), and
	// then the charge stays as it is.
	Units() (map[string]int64, error)
}
