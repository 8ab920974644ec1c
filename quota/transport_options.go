package quota

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// TransportOption configures a Transport in NewTransport.
type TransportOption func(*Transport)

// Transport defaults, used by NewTransport.
const (
	DefaultMaxAttempts   = 4                // the first attempt and up to 3 retries
	DefaultMaxElapsed    = 30 * time.Second // time spent waiting between attempts, at most
	DefaultMaxRetryAfter = 10 * time.Second // a longer Retry-After is not waited for
	maxErrorBody         = 64 << 10         // bytes of an error response given to the Classifier
)

// WithBase sets the RoundTripper that sends requests. Default:
// http.DefaultTransport.
func WithBase(rt http.RoundTripper) TransportOption {
	return func(t *Transport) {
		if rt != nil {
			t.base = rt
		}
	}
}

// WithCredential bills every request to c, whatever key or token it carries.
// Use it for OAuth tokens, which rotate (each token would otherwise be a
// credential of its own), or to bill several keys of one project to one
// budget. Default: the credential is read from each request.
func WithCredential(c Credential) TransportOption {
	return func(t *Transport) { t.cred = &c }
}

// WithLabel gives the credentials this Transport reads from requests a
// human label, such as "yt-key-1", stored with their fingerprint and shown
// by quotactl. Default: no label. Labels are unique per API: give it to a
// Transport that sees one credential; with several, a second secret under
// the label is refused (ErrLabelTaken), so label them with WithLabelFunc.
func WithLabel(label string) TransportOption {
	return func(t *Transport) { t.label = label }
}

// WithLabelFunc labels each request's credential with fn(req) (for example
// from a header naming the tenant). fn must not return the secret. It takes
// precedence over WithLabel when it returns a non-empty label.
func WithLabelFunc(fn func(req *http.Request) string) TransportOption {
	return func(t *Transport) { t.labelFn = fn }
}

// WithOwnerFunc names the owner each request's credential belongs to,
// fn(req), such as the Cloud project of the request's key: every credential
// of one owner shares its budgets. When fn returns "", the credential's
// Owner, the limiter's WithOwner, then the owner the store records apply; an
// invalid name is an error and the request is not sent. fn must not return
// the secret.
func WithOwnerFunc(fn func(req *http.Request) string) TransportOption {
	return func(t *Transport) { t.ownerFn = fn }
}

// WithClassifier sets how upstream error responses are read. Default: the
// Pricer, if it implements Classifier (costs.Table does), else none (5xx and
// 429 are retried, other errors returned). A nil c disables classification.
func WithClassifier(c Classifier) TransportOption {
	return func(t *Transport) {
		t.classifier = c
		if c == nil {
			t.classifier = noClassifier{}
		}
	}
}

// WithRetries bounds retries: at most maxAttempts attempts per request (1
// disables retries), and at most maxElapsed spent waiting between them.
// Defaults: DefaultMaxAttempts, DefaultMaxElapsed.
func WithRetries(maxAttempts int, maxElapsed time.Duration) TransportOption {
	return func(t *Transport) {
		t.maxAttempts = max(maxAttempts, 1)
		t.maxElapsed = max(maxElapsed, 0)
	}
}

// WithMaxRetryAfter sets the longest Retry-After a 429 or 503 response may
// ask for and still be retried; a longer one is returned to the caller (or,
// when the Classifier says a budget is spent, exhausts it). Default:
// DefaultMaxRetryAfter.
func WithMaxRetryAfter(d time.Duration) TransportOption {
	return func(t *Transport) { t.maxRetryAfter = d }
}

// WithBackOff sets the backoff policy between attempts; fn is called once
// per request that needs a retry. A Retry-After longer than the policy's
// wait is honoured instead. Default: exponential from 250ms, doubling, at
// most 5s, randomised by ±50% (backoff.ExponentialBackOff).
func WithBackOff(fn func() backoff.BackOff) TransportOption {
	return func(t *Transport) {
		if fn != nil {
			t.newBackOff = fn
		}
	}
}

// WithRetryClock sets the clock that measures the time spent retrying and
// the timers that wait between attempts, so tests retry without sleeping.
// Defaults: the system clock and real timers.
func WithRetryClock(clock backoff.Clock, newTimer func() backoff.Timer) TransportOption {
	return func(t *Transport) {
		if clock != nil {
			t.clock = clock
		}
		if newTimer != nil {
			t.newTimer = newTimer
		}
	}
}

// WithTransportObserver adds o to the observers of the limiter calls this
// Transport makes (its decisions, refunds and exhaust marks), on top of the
// Limiter's own (WithObserver); see Observer.
func WithTransportObserver(o Observer) TransportOption {
	return func(t *Transport) {
		if o != nil {
			t.obs = append(t.obs, o)
		}
	}
}

// WithTransportLogger sets where the Transport logs retries (Debug),
// upstream exhaustion and attempts it could not meter (Warn). Default:
// slog.Default() at the time NewTransport is called.
func WithTransportLogger(log *slog.Logger) TransportOption {
	return func(t *Transport) { t.log = log }
}

type noClassifier struct{}

func (noClassifier) Classify(*http.Request, *http.Response, []byte) Verdict { return Verdict{} }

func defaultBackOff() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(250*time.Millisecond),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(0), // the Transport bounds elapsed time itself
	)
}

// realTimer is backoff's default timer (not exported by backoff v4).
type realTimer struct{ t *time.Timer }

func (r *realTimer) Start(d time.Duration) {
	if r.t == nil {
		r.t = time.NewTimer(d)
	} else {
		r.t.Reset(d)
	}
}
func (r *realTimer) Stop() {
	if r.t != nil {
		r.t.Stop()
	}
}
func (r *realTimer) C() <-chan time.Time { return r.t.C }
