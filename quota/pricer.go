package quota

import "net/http"

// Pricer prices an outbound HTTP request: the Charge a Transport takes
// before it sends the request. costs.Table is the Pricer most callers want
// (costs.Builtin("youtube")); PricerFunc adapts a function.
//
// A Charge with no units is free: the Transport sends the request without
// taking anything. A request the Pricer cannot price is an error, and the
// Transport does not send it. Price must be safe for concurrent use and must
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
	// userRateLimitExceeded).
	Transient bool
	// Reason is the upstream's reason, for errors and logs, e.g.
	// "quotaExceeded".
	Reason string
}
