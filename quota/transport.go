package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
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
//     meters — no "key" query parameter, API-key header (X-Goog-Api-Key,
//     X-Api-Key, X-Shopify-Access-Token) or
//     "Authorization: Bearer" token, and not the WithCredential secret in
//     its URL or headers. One that carries such a credential is not sent:
//     the error wraps ErrForeignHost. Whether the host serves the API under
//     another name, which would spend the budgets unmetered, or is another
//     service, which has no business with the credential, refusing is the
//     safe answer; add the host to the table if it serves the API, or send
//     the request through a client without this Transport. The Transport
//     never adds a credential to a request, nor moves one to another host;
//  2. identifies the credential it is billed to: a fixed one (WithCredential),
//     else the "key" query parameter, else the X-Goog-Api-Key, X-Api-Key
//     (Anthropic) or X-Shopify-Access-Token header, else an
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
// carries the credential — the API-key headers and Authorization
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
	// reporter reads upstream reports (WithReporter; default the Pricer);
	// learned remembers the limits they said, per owner and budget.
	reporter    Reporter
	reporterSet bool
	learned     learnedLimits
	trueDown    time.Duration // WithTrueDown's grace; 0: reports only add
	flying      *inflight     // the calls in flight, WithTrueDown
	base        http.RoundTripper
	traced      bool // base is an *http.Transport: httptrace tells what reached the wire

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
	if r, ok := pricer.(Reporter); ok && !t.reporterSet {
		t.reporter = r
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
	var est Estimate
	var err error
	if bp, ok := t.pricer.(BodyPricer); ok {
		est, err = bp.EstimateCall(req)
	} else {
		est.Charge, err = t.pricer.Price(req)
	}
	ch := est.Charge
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
	return t.roundTrip(req, cred, est)
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
