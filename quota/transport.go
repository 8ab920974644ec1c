package quota

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/quotactl/quotactl/quota/backend"
)

// How a Transport meters a request, step by step. For each request it
//
//  1. prices it with the Pricer (a request that cannot be priced is not sent).
//     A request to a host the Pricer does not price (an error wrapping
//     ErrForeignHost: a costs.Table declaring hosts, such as the YouTube
//     table, for a thumbnail on i.ytimg.com or an OAuth token refresh at
//     oauth2.googleapis.com) is no call of the API: it is charged to none
//     of its budgets, and sent through the base RoundTripper unmetered (not
//     retried, not classified) when it carries no credential the Transport
//     meters — no "key" query parameter, X-Goog-Api-Key header or
//     "Authorization: Bearer" token, and not the WithCredential secret in
//     its URL or headers. One that carries such a credential is not sent:
//     the error wraps ErrForeignHost. Whether the host serves the API under
//     another name, which would spend the budgets unmetered, or is another
//     service, which has no business with the credential, refusing is the
//     safe answer; add the host to the table if it serves the API, or send
//     the request through a client without this Transport. The Transport
//     never adds a credential to a request, nor moves one to another host;
//  2. identifies the credential it is billed to: a fixed one (WithCredential),
//     else the "key" query parameter, else the X-Goog-Api-Key header, else an
//     "Authorization: Bearer" token; and the owner whose budgets it spends
//     (WithOwnerFunc, the credential's Owner, the limiter's WithOwner; over
//     a Pricer whose budgets are kept per owner, such as the YouTube table,
//     with none of these every credential is metered as one owner, see
//     OwnerKind);
//  3. takes the charge from the Limiter, and only then sends the request
//     through the base RoundTripper. A refused charge returns an error
//     wrapping *ExhaustedError and the request is never sent;
//  4. refunds the charge when the request never reached the upstream (a dial
//     error, a context cancelled before sending);
//  5. reads error responses with the Classifier: when the upstream says a
//     budget is spent (YouTube's 403 quotaExceeded), it marks the budget
//     spent until its next reset (Limiter.Exhaust), so every process sharing
//     the store stops, refunds the refused attempt, and returns an error
//     wrapping *ExhaustedError (errors.Is(err, ErrExhausted)) instead of the
//     response;
//  6. retries transient failures — 500, 502, 503, 504, 429 (honouring a
//     Retry-After up to WithMaxRetryAfter), connection resets, responses the
//     Classifier calls transient — with exponential backoff, bounded in
//     attempts and elapsed time, honouring the request's context. Each
//     attempt is charged, as the upstream charges it. A request whose body
//     cannot be replayed (Body set, GetBody nil) is not retried. A
//     Retry-After longer than WithMaxRetryAfter, or than the time left of
//     the retry budget, stops the retries: the response goes to the caller;
//  7. when the Classifier holds a method for the credential (Verdict.Hold,
//     YouTube's per-channel upload cap), records the hold in the store for
//     that credential alone and refuses that method for it, in every
//     process, until the hold ends (an error wrapping *ExhaustedError for
//     API "<api>.holds"); the owner's budgets are left alone. Only requests
//     to methods the Classifier can hold (Holder) pay the extra store read.
//
// One logical call is charged once: the requests http.Client makes to
// follow a redirect are sent without another charge, and a redirect to
// another host (host and port) than the chain's first request named never
// carries the credential — the X-Goog-Api-Key and Authorization headers
// (their names compared ignoring case), the "key" query parameter and any
// header holding the WithCredential secret are removed before it is sent,
// and a hop whose URL holds that secret is not sent (ErrForeignHost). The Transport
// finds the first request through each response's Request, which it fills
// in when the base leaves it nil; when a RoundTripper wrapping the
// Transport drops it, the first request is unknown and every redirect is
// sent without the credential.
//
// Wrap an existing client by setting its transport:
//
//	client.Transport = quota.NewTransport(lim, table, quota.WithBase(client.Transport))
//
// Credentials are never logged or returned in errors; the limiter sees only
// their fingerprints. (http.Client itself puts the request URL, query
// included, in the *url.Error it returns: send API keys in the
// X-Goog-Api-Key header rather than the "key" parameter to keep them out of
// such errors.) A Transport is safe for concurrent use.

// Transport is an http.RoundTripper that meters every outbound request
// against a Limiter before sending it. For each request it prices it with
// the Pricer, identifies the credential and owner it is billed to, takes the
// charge, and only then sends it: a refused charge returns an error
// wrapping *ExhaustedError, and the request is never sent. A request that
// never reached the upstream is refunded. When the upstream says a budget
// is spent (the Classifier), it is marked spent until its reset in every
// process sharing the store. Transient failures are retried with backoff,
// each attempt charged. One logical call is charged once, redirects
// included, and a credential never travels to a host the request did not
// name. Wrap an existing client by setting its transport:
//
//	client.Transport = quota.NewTransport(lim, table, quota.WithBase(client.Transport))
//
// Credentials are never logged or returned in errors; the limiter sees
// only their fingerprints. A Transport is safe for concurrent use.
type Transport struct {
	limiter    *Limiter
	pricer     Pricer
	classifier Classifier
	base       http.RoundTripper
	traced     bool // base is an *http.Transport: httptrace tells what reached the wire

	cred    *Credential
	label   string
	labelFn func(*http.Request) string
	ownerFn func(*http.Request) string

	// unnamed is the owner a credential is metered as when the Pricer keeps
	// budgets per owner (OwnerKind) and nothing names one (not ownerFn, nor
	// the credential, nor the store's catalog); "" when the limiter or the
	// fixed credential names an owner, or the Pricer has no owner kind.
	unnamed    string
	unnamedFor *unnamedOwner // unnamed, for this Transport's limiter; nil with unnamed ""
	unnamedLog sync.Once
	// values are what the limiter calls of a request that carries none
	// are made under (see context): obs and unnamedFor; nil with neither.
	values *callValues

	// holds meters Verdict.Hold marks per credential (see Holder); nil
	// when the Classifier holds nothing. held are the methods it can hold.
	holds *Limiter
	held  map[string]bool
	obs   []Observer // WithTransportObserver

	maxAttempts   int
	maxElapsed    time.Duration
	maxRetryAfter time.Duration
	newBackOff    func() backoff.BackOff
	clock         backoff.Clock
	newTimer      func() backoff.Timer
	log           *slog.Logger
	maxWait       time.Duration // WithWait; 0: no waiting (wait.go)

	budgets map[string]Budget
}

var _ http.RoundTripper = (*Transport)(nil)

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

// NewTransport returns a Transport that meters requests with limiter and
// prices them with pricer; see Transport. It panics if either is nil.
//
// Defaults: http.DefaultTransport as base; credential from each request;
// its owner from the credential or the limiter, else, when the Pricer keeps
// budgets per owner (OwnerKind), the one owner "unnamed-" + kind; the
// Pricer as Classifier when it is one, and as Holder when it is one; DefaultMaxAttempts attempts
// within DefaultMaxElapsed; Retry-After honoured up to DefaultMaxRetryAfter;
// exponential backoff from 250ms to 5s; the system clock; slog.Default().
func NewTransport(limiter *Limiter, pricer Pricer, opts ...TransportOption) *Transport {
	if limiter == nil || pricer == nil {
		panic("quota: NewTransport: nil limiter or pricer")
	}
	t := &Transport{
		limiter:       limiter,
		pricer:        pricer,
		base:          http.DefaultTransport,
		maxAttempts:   DefaultMaxAttempts,
		maxElapsed:    DefaultMaxElapsed,
		maxRetryAfter: DefaultMaxRetryAfter,
		newBackOff:    defaultBackOff,
		clock:         backoff.SystemClock,
		newTimer:      func() backoff.Timer { return &realTimer{} },
		budgets:       make(map[string]Budget, len(limiter.budgets)),
	}
	if c, ok := pricer.(Classifier); ok {
		t.classifier = c
	}
	for _, o := range opts {
		o(t)
	}
	if _, ok := t.classifier.(noClassifier); ok {
		t.classifier = nil
	}
	if t.log == nil {
		t.log = slog.Default()
	}
	_, t.traced = t.base.(*http.Transport)
	for _, b := range limiter.budgets {
		t.budgets[b.Name] = b
	}
	if ok, ok2 := pricer.(OwnerKind); ok2 {
		kind := ok.OwnerKind()
		mapped := t.cred != nil && t.cred.Owner != "" || limiter.owner != ""
		if kind != "" && !mapped {
			t.unnamed = "unnamed-" + kind
			t.unnamedFor = &unnamedOwner{lim: limiter, owner: t.unnamed}
		}
	}
	if len(t.obs) > 0 || t.unnamedFor != nil {
		t.values = &callValues{observers: t.obs, unnamed: t.unnamedFor}
	}
	if h, ok := t.classifier.(Holder); ok {
		t.held = map[string]bool{}
		var budgets []Budget
		for _, m := range h.HoldMethods() {
			if backend.CheckName("budget", m) == nil && !t.held[m] {
				t.held[m] = true
				budgets = append(budgets, Budget{Name: m, Limit: 1, Window: Sliding(24 * time.Hour)})
			}
		}
		if len(budgets) > 0 {
			t.holds = limiter.holdLimiter(budgets)
		}
	}
	return t
}

// holdLimiter returns a Limiter over l's store for holds: API "<api>.holds",
// one budget per method that can be held, every credential its own owner
// (a hold belongs to the credential, such as a YouTube channel, not to its
// project), with l's clock, fingerprint key and logger.
func (l *Limiter) holdLimiter(budgets []Budget) *Limiter {
	opts := []Option{WithFingerprintKey(l.fpKey), WithLogger(l.log)}
	if l.clock != nil {
		opts = append(opts, WithClock(l.clock))
	}
	h, err := New(l.store, l.api+".holds", budgets, opts...)
	if err != nil {
		return nil // an API name of 64 bytes leaves no room for ".holds": no holds
	}
	return h
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

// RoundTrip meters and sends one request; see Transport.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var (
		resp *http.Response
		err  error
	)
	if req.Response != nil {
		resp, err = t.redirect(req)
	} else {
		resp, err = t.meter(req)
	}
	if resp != nil && resp.Request == nil {
		// http.Client fills in Response.Request only when the base does
		// (http.Transport does; many RoundTrippers do not). redirect walks
		// Response.Request back to the first request of a redirect chain
		// to know which host the call named: record it here.
		resp.Request = req
	}
	return resp, err
}

// meter meters and sends a request that is not part of a redirect chain.
func (t *Transport) meter(req *http.Request) (*http.Response, error) {
	ch, err := t.pricer.Price(req)
	if err != nil {
		if errors.Is(err, ErrForeignHost) {
			return t.foreign(req, err)
		}
		closeBody(req)
		return nil, fmt.Errorf("quota: transport: price %s %s: %w", req.Method, req.URL.Path, err)
	}
	if len(ch.Units) == 0 {
		return t.base.RoundTrip(req) // free: nothing to take
	}
	if err := req.Context().Err(); err != nil {
		// The caller stopped: no store call, no charge, no failure policy.
		closeBody(req)
		return nil, fmt.Errorf("quota: transport: %s: not sent: %w", ch.Method, err)
	}
	cred, err := t.credential(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	if t.holds != nil && t.held[ch.Method] {
		if err := t.checkHold(req, cred, ch); err != nil {
			closeBody(req)
			return nil, err
		}
	}
	return t.roundTrip(req, cred, ch)
}

// foreign sends a request to a host the Pricer does not price (cause wraps
// ErrForeignHost): no call of the API, so nothing is taken; but only when
// it carries no credential this Transport meters, which must not reach a
// host the cost table does not name.
func (t *Transport) foreign(req *http.Request, cause error) (*http.Response, error) {
	if what := t.carried(req); what != "" {
		closeBody(req)
		err := fmt.Errorf("quota: transport: %s %s%s: not sent: it carries %s, a credential this transport meters for API %s, to a host the pricer does not price: %w",
			req.Method, req.URL.Host, req.URL.EscapedPath(), what, t.limiter.api, cause)
		if t.cred != nil {
			err = scrubbed(err, t.cred.Secret)
		}
		return nil, err
	}
	return t.base.RoundTrip(req)
}

// carried names the credential req carries that this Transport meters, as
// credentialOf reads it (every value of the headers, not only the first),
// or the WithCredential secret anywhere in its URL or headers; "" when it
// carries none.
func (t *Transport) carried(req *http.Request) string {
	// Every key parameter, its name escaped or not (?key=&key=K and
	// ?%6Bey=K reach an upstream as a key all the same); and the headers
	// by name ignoring case (one set by index is not canonical).
	for raw := req.URL.RawQuery; raw != ""; {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(kv, "=")
		if u, err := url.QueryUnescape(k); err == nil {
			k = u
		}
		if k == "key" && v != "" {
			return "a key parameter"
		}
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			switch {
			case v == "":
			case strings.EqualFold(k, "X-Goog-Api-Key"):
				return "an X-Goog-Api-Key header"
			case strings.EqualFold(k, "Authorization") && len(v) > 7 && strings.EqualFold(v[:7], "bearer ") && strings.TrimSpace(v[7:]) != "":
				return "a Bearer token"
			}
		}
	}
	if t.cred != nil && t.cred.Secret != "" {
		if t.holdsSecret(req.URL.String()) {
			return "the WithCredential secret in its URL"
		}
		for _, vs := range req.Header {
			for _, v := range vs {
				if t.holdsSecret(v) {
					return "the WithCredential secret in a header"
				}
			}
		}
	}
	return ""
}

// holdsSecret reports whether s holds the WithCredential secret, as is or
// escaped for a query or a path; false with no such secret.
func (t *Transport) holdsSecret(s string) bool {
	if t.cred == nil || t.cred.Secret == "" {
		return false
	}
	secret := t.cred.Secret
	return strings.Contains(s, secret) || strings.Contains(s, url.QueryEscape(secret)) || strings.Contains(s, url.PathEscape(secret))
}

// redirect sends a request http.Client made to follow a redirect: part of a
// logical call whose first request was charged, so it is not charged again.
// When it leaves the first request's host, or when that host cannot be
// found, it carries no credential.
func (t *Transport) redirect(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		return t.base.RoundTrip(req) // nothing to send to: the base says so
	}
	if first := origin(req); first != nil && strings.EqualFold(first.Host, req.URL.Host) && first.Scheme == req.URL.Scheme {
		return t.base.RoundTrip(req)
	}
	out := req.Clone(req.Context())
	for k, vs := range out.Header {
		// Header keys compared ignoring case: a header set by index
		// (req.Header["x-goog-api-key"]) is not canonical, and http.Client
		// copies it to every hop as it is; the upstream reads it all the same.
		if strings.EqualFold(k, "X-Goog-Api-Key") || strings.EqualFold(k, "Authorization") {
			delete(out.Header, k)
			continue
		}
		// The WithCredential secret, whatever header carries it (one the
		// caller chose, a cookie): carried would refuse it to this host.
		for _, v := range vs {
			if t.holdsSecret(v) {
				delete(out.Header, k)
				break
			}
		}
	}
	if _, ok := queryParam(out.URL.RawQuery, "key"); ok {
		q := out.URL.Query()
		q.Del("key")
		out.URL.RawQuery = q.Encode()
	}
	if t.holdsSecret(out.URL.String()) {
		closeBody(out)
		return nil, fmt.Errorf("quota: transport: redirect to %s: not sent: its URL carries the WithCredential secret, to a host the request did not name: %w",
			out.URL.Host, ErrForeignHost)
	}
	return t.base.RoundTrip(out)
}

// maxRedirectHops bounds the walk back along a redirect chain (http.Client
// stops after 10 redirects unless CheckRedirect says otherwise).
const maxRedirectHops = 1000

// origin returns the URL of the first request of the redirect chain req
// belongs to: the request whose response led, hop by hop, to req. It is
// nil when the chain is broken (a Response without its Request, which a
// RoundTripper wrapping this Transport may return), so that the caller
// fails safe and strips the credential.
func origin(req *http.Request) *url.URL {
	r := req
	for hops := 0; r.Response != nil; hops++ {
		if r.Response.Request == nil || hops >= maxRedirectHops {
			return nil
		}
		r = r.Response.Request
	}
	return r.URL
}

// checkHold refuses a request to a method held for cred (Verdict.Hold).
// A store error is logged and left to Take, which applies the limiter's
// failure policy.
func (t *Transport) checkHold(req *http.Request, cred Credential, ch Charge) error {
	if cred.Secret == "" {
		return nil // a credential known by label alone: its holds are found when the upstream answers
	}
	// A hold is kept under the credential's own fingerprint: read it
	// directly, without registering the credential with the holds API.
	us, err := t.holds.StatusOf(req.Context(), t.holdAccount(cred.Secret))
	if err != nil {
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrUnknownCredential) || cancelled(req.Context()) {
			return nil // a cancelled caller is no store failure: Take reports it
		}
		t.log.LogAttrs(req.Context(), slog.LevelWarn, "quota: transport: could not read holds",
			slog.String("api", t.limiter.api), slog.String("method", ch.Method), slog.Any("credential", cred),
			slog.String("error", strings.ReplaceAll(err.Error(), cred.Secret, "<redacted>")))
		return nil
	}
	for _, u := range us {
		if u.Budget != ch.Method || u.ExhaustedUntil.IsZero() {
			continue
		}
		now := t.holds.now()
		if now.IsZero() {
			now = time.Now()
		}
		who := cred.Label
		if who == "" {
			who = cred.String()
		}
		return fmt.Errorf("quota: transport: %s: held for this credential by the upstream: %w", ch.Method, &ExhaustedError{
			API: t.holds.api, Budget: ch.Method, Credential: who, Limit: u.Limit,
			RetryAfter: u.ExhaustedUntil.Sub(now), RetryAt: u.ExhaustedUntil, ExhaustedUntil: u.ExhaustedUntil,
		})
	}
	return nil
}

// credential finds the credential req is billed to and names its owner.
func (t *Transport) credential(req *http.Request) (Credential, error) {
	c, err := t.credentialOf(req)
	if err != nil {
		return c, err
	}
	if t.ownerFn != nil {
		if o := t.ownerFn(req); o != "" {
			if err := backend.CheckName("owner", o); err != nil {
				return Credential{}, fmt.Errorf("quota: transport: WithOwnerFunc for %s %s: %w", req.Method, req.URL.Path, err)
			}
			c.Owner = o
		}
	}
	// A credential named by nothing here keeps the owner the store records
	// for it (quotactl --owner, another process, its own account); one the
	// store does not record is registered under the unnamed owner, in the
	// registration's own atomic step (see context), never by naming the
	// unnamed owner here, which would replace an owner recorded meanwhile.
	return c, nil
}

// context returns the context the limiter calls for req are made under:
// with the Transport's observers, and its unnamed owner for the
// credentials nothing names (CredentialUpdate.OwnerIfNew).
func (t *Transport) context(req *http.Request) context.Context {
	ctx := req.Context()
	if t.values == nil {
		return ctx
	}
	if valuesOf(ctx) == nil {
		// The usual case: the request carries no values of its own, so
		// the Transport's, made once, serve as they are (never written).
		return context.WithValue(ctx, callValuesKey{}, t.values)
	}
	ctx = withObservers(ctx, t.obs)
	if t.unnamedFor != nil {
		ctx = withValues(ctx, func(v *callValues) { v.unnamed = t.unnamedFor })
	}
	return ctx
}

// metered notes the account a charge was metered under: the unnamed
// owner is logged once per Transport, when a request is first metered
// under it.
func (t *Transport) metered(ctx context.Context, res *Reservation) {
	if t.unnamed == "" || res.Owner != t.unnamed {
		return
	}
	t.unnamedLog.Do(func() {
		t.log.LogAttrs(ctx, slog.LevelWarn, "quota: transport: the cost table keeps budgets per owner and none is named: every credential is metered as one owner, never more than one owner's quota; name owners with quota.WithOwnerFunc, Credential.Owner or quota.WithOwner",
			slog.String("api", t.limiter.api), slog.String("owner", t.unnamed))
	})
}

// credentialOf finds the credential req is billed to, before owners.
func (t *Transport) credentialOf(req *http.Request) (Credential, error) {
	if t.cred != nil {
		return *t.cred, nil
	}
	label := t.label
	if t.labelFn != nil {
		if l := t.labelFn(req); l != "" {
			label = l
		}
	}
	if v, ok := queryParam(req.URL.RawQuery, "key"); ok && v != "" {
		return Credential{Secret: v, Label: label}, nil
	}
	if v := req.Header.Get("X-Goog-Api-Key"); v != "" {
		return Credential{Secret: v, Label: label}, nil
	}
	if v := req.Header.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		if tok := strings.TrimSpace(v[7:]); tok != "" {
			return Credential{Secret: tok, Label: label}, nil
		}
	}
	return Credential{}, fmt.Errorf("%w: quota: transport: %s %s carries no credential (a key parameter, an X-Goog-Api-Key header or a Bearer token); give one with WithCredential",
		ErrInvalid, req.Method, req.URL.Path)
}

// queryParam returns the first value of name in a raw query, without
// parsing the whole query.
func queryParam(raw, name string) (string, bool) {
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k != name {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			if u, err := url.QueryUnescape(v); err == nil {
				v = u
			}
		}
		return v, true
	}
	return "", false
}

// attempt is the state of one request across its attempts.
type attempt struct {
	t      *Transport
	req    *http.Request
	ctx    context.Context
	cred   Credential
	charge Charge
}

func (t *Transport) roundTrip(req *http.Request, cred Credential, ch Charge) (*http.Response, error) {
	a := &attempt{t: t, req: req, ctx: t.context(req), cred: cred, charge: ch}
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	var (
		bo    backoff.BackOff
		start time.Time
	)
	for n := 1; ; n++ {
		areq := req
		if n > 1 {
			areq = req.Clone(a.ctx)
			if req.GetBody != nil {
				body, err := req.GetBody()
				if err != nil {
					return nil, a.errorf("replay body: %w", err)
				}
				areq.Body = body
			}
		}
		res, err := t.take(a.ctx, cred, ch)
		if err != nil {
			closeBody(areq)
			return nil, a.errorf("%w", err)
		}
		t.metered(a.ctx, res)
		if err := a.ctx.Err(); err != nil {
			a.refund(res)
			closeBody(areq)
			return nil, a.errorf("not sent: %w", err)
		}
		resp, sent, err := a.send(areq)
		var wait time.Duration
		if err != nil {
			if !sent {
				a.refund(res)
			}
			if !transientError(err) || !replayable || a.ctx.Err() != nil {
				return nil, a.errorf("%w", err)
			}
		} else {
			retry, ra, err := a.judge(resp, res)
			if err != nil {
				return nil, err
			}
			if !retry || !replayable {
				return resp, nil
			}
			wait = ra
		}
		// A retry is in order: bounded by attempts and elapsed time.
		if n >= t.maxAttempts {
			return a.giveUp(resp, err)
		}
		if bo == nil {
			bo, start = t.newBackOff(), t.clock.Now()
		}
		next := bo.NextBackOff()
		if next == backoff.Stop {
			return a.giveUp(resp, err)
		}
		wait = max(wait, next)
		if t.clock.Now().Sub(start)+wait > t.maxElapsed {
			return a.giveUp(resp, err)
		}
		status := 0
		if resp != nil {
			status = resp.StatusCode
			drain(resp)
		}
		t.log.LogAttrs(a.ctx, slog.LevelDebug, "quota: transport: retrying",
			slog.String("api", t.limiter.api), slog.String("method", ch.Method), slog.Any("credential", cred),
			slog.Int("attempt", n), slog.Int("status", status), slog.Duration("wait", wait), slog.String("error", a.scrub(errString(err))))
		if err := a.sleep(wait); err != nil {
			return nil, a.errorf("retry: %w", err)
		}
	}
}

// giveUp returns the last attempt's outcome once retries run out.
func (a *attempt) giveUp(resp *http.Response, err error) (*http.Response, error) {
	if err != nil {
		return nil, a.errorf("%w", err)
	}
	return resp, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// send sends one attempt and reports whether it reached the upstream. With
// an *http.Transport base, httptrace says whether request headers were
// written; http.Transport retries some failed requests on its own, and each
// extra write is charged too, as the upstream may have billed it.
func (a *attempt) send(req *http.Request) (*http.Response, bool, error) {
	if !a.t.traced {
		resp, err := a.t.base.RoundTrip(req)
		return resp, err == nil || !unreached(err), err
	}
	var writes atomic.Int32
	trace := &httptrace.ClientTrace{WroteHeaders: func() { writes.Add(1) }}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := a.t.base.RoundTrip(req)
	n := int(writes.Load())
	for i := 1; i < n; i++ {
		if _, terr := a.t.limiter.Take(context.WithoutCancel(a.ctx), a.cred, a.charge); terr != nil {
			a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: the base transport resent a request that could not be metered",
				slog.String("api", a.t.limiter.api), slog.String("method", a.charge.Method), slog.Any("credential", a.cred),
				slog.String("error", a.scrub(terr.Error())))
		}
	}
	return resp, n > 0 || err == nil, err
}

// judge reads a response: whether to retry it (and the Retry-After to
// honour), or an error replacing it when the upstream says a budget is spent.
func (a *attempt) judge(resp *http.Response, res *Reservation) (retry bool, wait time.Duration, err error) {
	if resp.StatusCode < 400 {
		return false, 0, nil
	}
	var v Verdict
	if a.t.classifier != nil {
		body := peekBody(resp)
		v = a.t.classifier.Classify(a.req, resp, body)
	}
	ra, hasRA := retryAfter(resp, a.t.clock.Now())
	short := hasRA && ra <= a.t.maxRetryAfter
	code := resp.StatusCode
	switch {
	case len(v.Hold) > 0:
		drain(resp)
		return false, 0, a.hold(res, v, code)
	case len(v.Exhausted) > 0:
		drain(resp)
		return false, 0, a.exhausted(res, v, code)
	case hasRA && !short:
		return false, 0, nil // the upstream asks for a longer wait than we make
	case code == http.StatusTooManyRequests || code == 500 || code == 502 || code == 503 || code == 504 || v.Transient:
		return true, ra, nil
	}
	return false, 0, nil
}

// exhausted marks the budgets the upstream says are spent until their next
// reset, refunds the refused attempt and returns the error for the caller.
func (a *attempt) exhausted(res *Reservation, v Verdict, status int) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), 10*time.Second)
	defer cancel()
	var first *ExhaustedError
	for _, name := range v.Exhausted {
		b, ok := a.t.budgets[name]
		if !ok {
			a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: classifier named an unknown budget",
				slog.String("api", a.t.limiter.api), slog.String("budget", name))
			continue
		}
		// the definition in force: an operator's override (quotactl budget
		// set: another zone, window or limit) resets when it says
		b = a.t.limiter.def(b)
		now := res.At
		if now.IsZero() {
			now = time.Now()
		}
		until := b.Window.NextReset(now)
		if until.IsZero() {
			until = now.Add(b.Window.Duration())
		}
		if err := a.t.limiter.Exhaust(ctx, a.cred, name, until); err != nil {
			a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: could not mark budget spent",
				slog.String("api", a.t.limiter.api), slog.String("budget", name), slog.Any("credential", a.cred),
				slog.String("error", a.scrub(err.Error())))
		}
		e := &ExhaustedError{
			API: a.t.limiter.api, Budget: name, Credential: res.Label, Limit: b.Limit,
			RetryAfter: until.Sub(now), RetryAt: until, ExhaustedUntil: until,
		}
		if e.Credential == "" {
			e.Credential = res.Credential
		}
		for _, u := range res.Usage {
			if u.Budget == name {
				e.Used, e.Cost = u.Used-u.Cost, u.Cost
			}
		}
		if first == nil {
			first = e
		}
		a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: upstream says the budget is spent",
			slog.String("api", a.t.limiter.api), slog.String("budget", name), slog.Any("credential", a.cred),
			slog.String("method", a.charge.Method), slog.Int("status", status), slog.String("reason", v.Reason),
			slog.Time("until", until))
	}
	a.refund(res) // the upstream refused the call: it did not bill it
	if first == nil {
		return a.errorf("upstream answered %d %s naming no known budget", status, v.Reason)
	}
	return a.errorf("upstream answered %d %s: %w", status, v.Reason, first)
}

// hold records that the upstream refuses the methods v.Hold names to this
// credential for v.HoldFor, in the store, so that every process refuses
// them for it until then. The attempt's charge is kept: the upstream bills
// a refused request like any other. The owner's budgets are left alone.
func (a *attempt) hold(res *Reservation, v Verdict, status int) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), 10*time.Second)
	defer cancel()
	now := res.At
	if now.IsZero() {
		now = time.Now()
	}
	until := now.Add(v.HoldFor)
	who := res.Label
	if who == "" {
		who = res.Credential
	}
	var first *ExhaustedError
	for _, m := range v.Hold {
		if a.t.holds == nil || !a.t.held[m] {
			continue
		}
		if err := a.t.holds.Exhaust(ctx, Credential{Secret: a.cred.Secret, Label: a.cred.Label}, m, until); err != nil {
			a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: could not record a hold",
				slog.String("api", a.t.limiter.api), slog.String("method", m), slog.Any("credential", a.cred),
				slog.String("error", a.scrub(err.Error())))
		}
		a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: upstream holds a method for this credential",
			slog.String("api", a.t.limiter.api), slog.String("method", m), slog.Any("credential", a.cred),
			slog.Int("status", status), slog.String("reason", v.Reason), slog.Time("until", until))
		if first == nil {
			first = &ExhaustedError{API: a.t.limiter.api + ".holds", Budget: m, Credential: who, Limit: 1, Cost: 1,
				RetryAfter: v.HoldFor, RetryAt: until, ExhaustedUntil: until}
		}
	}
	if first == nil {
		return a.errorf("upstream answered %d %s naming no method this transport can hold", status, v.Reason)
	}
	return a.errorf("upstream answered %d %s: %w", status, v.Reason, first)
}

// refund gives back an attempt's charge, even when the request's context is
// done.
func (a *attempt) refund(res *Reservation) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), 10*time.Second)
	defer cancel()
	if err := a.t.limiter.Refund(ctx, res); err != nil {
		a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: refund failed",
			slog.String("api", a.t.limiter.api), slog.String("method", a.charge.Method), slog.Any("credential", a.cred),
			slog.String("error", a.scrub(err.Error())))
	}
}

// sleep waits d on the Transport's timer, or until the context is done.
func (a *attempt) sleep(d time.Duration) error {
	timer := a.t.newTimer()
	timer.Start(d)
	defer timer.Stop()
	select {
	case <-timer.C():
		return nil
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
}

// errorf returns a Transport error naming the method, with the credential's
// secret scrubbed from its text (errors.Is and errors.As still see the
// wrapped errors).
func (a *attempt) errorf(format string, args ...any) error {
	return scrubbed(fmt.Errorf("quota: transport: "+a.charge.Method+": "+format, args...), a.cred.Secret)
}

// scrubbed returns err, its text without secret when it holds it.
func scrubbed(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &scrubbedError{msg: strings.ReplaceAll(err.Error(), secret, "<redacted>"), err: err}
}

func (a *attempt) scrub(s string) string {
	if a.cred.Secret == "" {
		return s
	}
	return strings.ReplaceAll(s, a.cred.Secret, "<redacted>")
}

// scrubbedError is an error whose text had a secret removed.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// unreached reports whether err says the request never left: a failed dial
// or name lookup.
func unreached(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// transientError reports whether a failed attempt is worth retrying: the
// connection broke (reset, closed mid-exchange) or timed out on its own.
func transientError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	v = strings.TrimSpace(v)
	if v != "" && strings.Trim(v, "0123456789") == "" {
		// delay-seconds: a non-negative integer. One that overflows a
		// Duration (18446744074 s) is "wait longer than we ever would".
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil || s > int64(maxRetryAfterSeconds) {
			return maxDuration, true
		}
		return time.Duration(s) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

const (
	maxDuration          = time.Duration(1<<63 - 1)
	maxRetryAfterSeconds = maxDuration / time.Second
)

// peekBody reads up to maxErrorBody bytes of an error response and puts
// them back in front of the rest of the body.
func peekBody(resp *http.Response) []byte {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	rest := io.Reader(resp.Body)
	if err != nil {
		rest = errReader{err}
	}
	resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(buf), rest), Closer: resp.Body}
	return buf
}

type peekedBody struct {
	io.Reader
	io.Closer
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// drain reads a little of a response body and closes it, so the
// connection can be reused.
func drain(resp *http.Response) {
	if resp.Body != nil {
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		_ = resp.Body.Close()
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// holdAccount returns the account a credential's holds are kept under: its
// fingerprint (a hold belongs to the credential, not to its owner).
//
// The main limiter derives it the same way (same key) and caches it: the
// default derivation is deliberately slow.
func (t *Transport) holdAccount(secret string) string { return t.limiter.Fingerprint(secret) }
