// Package proxy is a metering reverse proxy: it serves one upstream API
// through a quota.Transport, so a job written in any language (Python,
// Node, curl) is metered as a Go service is — every request priced by the
// cost table, charged to its credential's owner, sent only when admitted,
// its response classified — by pointing its client's base URL at the
// proxy.
//
// A refused call never reaches the upstream: the client gets 429 with
// Retry-After and an RFC 9457 problem document, or, when the table
// declares the upstream's own error shape (costs.Table.Refusal), that
// shape, so the client library's own handling applies. The proxy may hold
// the credential itself (Config.Credential): jobs then carry none, and a
// request carrying another is refused. Credentials never appear in what
// the proxy logs or answers.
//
// quotactl proxy runs it; see docs/proxy.md.
package proxy

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/bearer"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// Defaults used by New and Serve.
const (
	DefaultMaxBody       = 32 << 20 // bytes of a request body
	DefaultMaxConns      = 1024     // connections served at once
	DefaultShutdownGrace = 30 * time.Second
)

// TokenHeader is the header a client sends the proxy's token in
// (Config.Token), as "Bearer TOKEN". It is hop-by-hop (RFC 9110): the
// upstream never sees it, and Authorization stays free for the upstream's
// own credential.
const TokenHeader = "Proxy-Authorization"

// Config configures a Proxy (New).
type Config struct {
	// Upstream is the base URL requests go to, scheme and host only, e.g.
	// "https://www.googleapis.com" or a simulator's "http://127.0.0.1:8080".
	// Requests go nowhere else: the proxy prices Upstream's host as the
	// table's API host, whatever hosts the table lists. Required.
	Upstream string
	// Table prices requests and classifies responses. Required.
	Table *costs.Table
	// Limiter meters them: quota.New(store, Table.API, Table.Budgets, ...),
	// with the options (observers, clock) the caller wants. Required.
	Limiter *quota.Limiter
	// Owner names the owner every credential's budgets belong to (a Google
	// Cloud project). Exclusive with Owners. Neither: the owner the store
	// records for the credential, else the Transport's default.
	Owner string
	// Owners maps credential secrets to their owners. New keeps only
	// fingerprints of the secrets (keyed hashes, with a key of this
	// process); a credential not in it is metered as with no Owners.
	Owners map[string]string
	// Credential, when set, is the secret the proxy adds to each outbound
	// request, the way the table says it travels (costs.Table.Credential):
	// clients carry none. A request carrying another credential is refused
	// (403); one carrying this one is accepted.
	Credential string
	// Label labels Credential in the store, e.g. "yt-key-1" (with
	// Credential only).
	Label string
	// Token, when set, must be sent with every request as
	// "Proxy-Authorization: Bearer TOKEN". Serve refuses to listen beyond
	// loopback without one.
	Token string
	// MaxBody bounds a request body, in bytes: a longer one gets 413.
	// 0: DefaultMaxBody.
	MaxBody int64
	// MaxConns bounds the connections Serve serves at once: one more is
	// answered 503 and closed. 0: DefaultMaxConns.
	MaxConns int
	// ShutdownGrace is how long Serve lets in-flight calls finish when its
	// context ends. 0: DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// Logger receives one line per refused call and the failures the proxy
	// answers for. Default: slog.Default().
	Logger *slog.Logger
	// Base sends requests to the upstream. Default: a clone of
	// http.DefaultTransport keeping up to 256 idle connections to it.
	Base http.RoundTripper
	// TransportOptions are passed to quota.NewTransport after the proxy's
	// own (retries, observers, clocks).
	TransportOptions []quota.TransportOption
}

// Proxy is a metering reverse proxy, an http.Handler; see the package
// documentation. Serve serves it with the connection bound and graceful
// shutdown. Safe for concurrent use.
type Proxy struct {
	upstream  *url.URL
	table     *costs.Table
	limiter   *quota.Limiter
	transport *quota.Transport
	rp        *httputil.ReverseProxy
	log       *slog.Logger

	secret   string
	form     string // how the credential travels: costs.Credential*
	owner    string
	owners   map[[sha256.Size]byte]string
	fpKey    []byte
	token    string
	maxBody  int64
	maxConns int
	grace    time.Duration
}

var _ http.Handler = (*Proxy)(nil)

// New checks cfg and returns its Proxy. An error names the field at fault
// and never holds a credential.
func New(cfg Config) (*Proxy, error) {
	if cfg.Table == nil || cfg.Limiter == nil {
		return nil, fmt.Errorf("%w: proxy: Config.Table and Config.Limiter are required", quota.ErrInvalid)
	}
	up, err := parseUpstream(cfg.Upstream)
	if err != nil {
		return nil, err
	}
	table, err := cfg.Table.WithHosts(hostOf(up))
	if err != nil {
		return nil, fmt.Errorf("%w: proxy: upstream %s: %v", quota.ErrInvalid, up.Redacted(), err)
	}
	p := &Proxy{
		upstream: up, table: table, limiter: cfg.Limiter,
		secret: cfg.Credential, form: table.Credential(), owner: cfg.Owner, token: cfg.Token,
		maxBody: orDefault(cfg.MaxBody, DefaultMaxBody), maxConns: int(orDefault(int64(cfg.MaxConns), DefaultMaxConns)),
		grace: cfg.ShutdownGrace, log: cfg.Logger,
	}
	if p.grace <= 0 {
		p.grace = DefaultShutdownGrace
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if err := p.setOwners(cfg); err != nil {
		return nil, err
	}
	if strings.ContainsAny(cfg.Credential, " \t\r\n") {
		return nil, fmt.Errorf("%w: proxy: Config.Credential holds a space or line break (a stray newline from a file?)", quota.ErrInvalid)
	}
	base := cfg.Base
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 256
		base = t
	}
	opts := []quota.TransportOption{quota.WithBase(base), quota.WithTransportLogger(p.log)}
	if p.owner != "" || p.owners != nil {
		opts = append(opts, quota.WithOwnerFunc(p.ownerOf))
	}
	if cfg.Label != "" && cfg.Credential != "" {
		opts = append(opts, quota.WithLabel(cfg.Label))
	}
	p.transport = quota.NewTransport(cfg.Limiter, table, append(opts, cfg.TransportOptions...)...)
	p.rp = &httputil.ReverseProxy{
		Rewrite:      p.rewrite,
		Transport:    p.transport,
		ErrorHandler: p.fail,
		ErrorLog:     log.New(scrubWriter{p}, "proxy: ", 0),
		// Server-sent events and responses of unknown length are flushed
		// as they come (ReverseProxy does so for text/event-stream and
		// ContentLength -1); others are buffered a little.
		FlushInterval: 0,
	}
	return p, nil
}

func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// parseUpstream checks the upstream URL: http or https, a host, and no
// path, query, fragment or user (the table's routes are matched on the
// request's own path).
func parseUpstream(s string) (*url.URL, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: proxy: no upstream: name the API's base URL, e.g. https://www.googleapis.com", quota.ErrInvalid)
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: proxy: upstream: not a URL: want scheme and host, e.g. https://www.googleapis.com", quota.ErrInvalid)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: proxy: upstream %s: want an http or https URL, e.g. https://www.googleapis.com", quota.ErrInvalid, u.Redacted())
	case u.Host == "":
		return nil, fmt.Errorf("%w: proxy: upstream %s: no host", quota.ErrInvalid, u.Redacted())
	case u.User != nil:
		return nil, fmt.Errorf("%w: proxy: upstream %s: no user info in the URL: give the credential with Config.Credential", quota.ErrInvalid, u.Redacted())
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%w: proxy: upstream %s: give scheme and host only: requests keep their own path, which the cost table prices", quota.ErrInvalid, u.Redacted())
	}
	u.Path = ""
	return u, nil
}

// hostOf returns u's host as a cost table names it: without the scheme's
// default port.
func hostOf(u *url.URL) string {
	port := u.Port()
	if port == "" || u.Scheme == "https" && port == "443" || u.Scheme == "http" && port == "80" {
		h := u.Hostname()
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return u.Host
}

// setOwners checks Owner and Owners and keeps Owners as fingerprints.
func (p *Proxy) setOwners(cfg Config) error {
	if cfg.Owner != "" && len(cfg.Owners) > 0 {
		return fmt.Errorf("%w: proxy: give Owner or Owners, not both", quota.ErrInvalid)
	}
	if cfg.Owner != "" {
		if err := backend.CheckName("owner", cfg.Owner); err != nil {
			return fmt.Errorf("proxy: Config.Owner: %w", err)
		}
	}
	if len(cfg.Owners) == 0 {
		return nil
	}
	p.fpKey = make([]byte, 32)
	_, _ = rand.Read(p.fpKey) // never fails (crypto/rand)
	p.owners = make(map[[sha256.Size]byte]string, len(cfg.Owners))
	for secret, owner := range cfg.Owners {
		if secret == "" {
			return fmt.Errorf("%w: proxy: Config.Owners: an empty credential", quota.ErrInvalid)
		}
		if err := backend.CheckName("owner", owner); err != nil {
			return fmt.Errorf("proxy: Config.Owners: %w", err)
		}
		p.owners[p.fingerprint(secret)] = owner
	}
	return nil
}

func (p *Proxy) fingerprint(secret string) [sha256.Size]byte {
	m := hmac.New(sha256.New, p.fpKey)
	m.Write([]byte(secret))
	var out [sha256.Size]byte
	m.Sum(out[:0])
	return out
}

// ownerOf names the owner of an outbound request's credential (for
// quota.WithOwnerFunc): Config.Owner, else the owner Config.Owners maps
// it to, else "" (the store's).
func (p *Proxy) ownerOf(req *http.Request) string {
	if p.owner != "" {
		return p.owner
	}
	creds := credentials(req)
	if len(creds) == 0 {
		return ""
	}
	return p.owners[p.fingerprint(creds[0])]
}

// ServeHTTP meters and forwards one request; see the package
// documentation.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.token != "" && !bearer.Check(r.Header, TokenHeader, p.token) {
		w.Header().Set("Proxy-Authenticate", `Bearer realm="quotactl proxy"`)
		p.problem(w, r, problem{Type: "token-required", Title: "Token required", Status: http.StatusUnauthorized,
			Detail: "this proxy requires its token: send it as \"" + TokenHeader + ": Bearer TOKEN\""})
		return
	}
	if r.ContentLength > p.maxBody {
		p.tooLarge(w, r)
		return
	}
	if p.secret != "" {
		for _, c := range credentials(r) {
			if !bearer.Equal(c, p.secret) {
				p.problem(w, r, problem{Type: "foreign-credential", Title: "Credential refused", Status: http.StatusForbidden,
					Detail: "the request carries a credential other than the one this proxy holds: send none, the proxy adds its own"})
				return
			}
		}
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, p.maxBody)
	}
	p.rp.ServeHTTP(w, r)
}

// rewrite sends the request to the upstream, with the proxy's credential
// when it holds one.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.upstream)
	if p.secret == "" {
		return
	}
	out := pr.Out
	out.URL.RawQuery = dropKeys(out.URL.RawQuery)
	for _, h := range bearer.KeyHeaders {
		out.Header.Del(h)
	}
	if isBearer(out.Header.Get("Authorization")) {
		out.Header.Del("Authorization")
	}
	switch p.form {
	case costs.CredentialKey:
		if out.URL.RawQuery != "" {
			out.URL.RawQuery += "&"
		}
		out.URL.RawQuery += "key=" + url.QueryEscape(p.secret)
	case costs.CredentialGoogleKey, costs.CredentialAPIKey, costs.CredentialShopify:
		out.Header.Set(p.form, p.secret) // the form is the header's name
	default:
		out.Header.Set("Authorization", "Bearer "+p.secret)
	}
}

// credentials returns the credentials r carries as a quota.Transport reads
// them: every "key" query parameter, API-key header (bearer.KeyHeaders)
// and Bearer token, non-empty.
func credentials(r *http.Request) []string {
	var out []string
	for _, kv := range strings.Split(r.URL.RawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if unescape(k) == "key" && v != "" {
			out = append(out, unescape(v))
		}
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			switch {
			case v == "":
			case bearer.IsKeyHeader(k):
				out = append(out, v)
			case strings.EqualFold(k, "Authorization") && isBearer(v):
				out = append(out, strings.TrimSpace(v[7:]))
			}
		}
	}
	return out
}

func isBearer(v string) bool {
	return len(v) > 7 && strings.EqualFold(v[:7], "bearer ") && strings.TrimSpace(v[7:]) != ""
}

// dropKeys removes every "key" parameter from a raw query, its name
// escaped or not, and keeps the others as they are.
func dropKeys(raw string) string {
	if raw == "" {
		return raw
	}
	parts := strings.Split(raw, "&")
	kept := parts[:0]
	for _, kv := range parts {
		k, _, _ := strings.Cut(kv, "=")
		if unescape(k) != "key" {
			kept = append(kept, kv)
		}
	}
	return strings.Join(kept, "&")
}

func unescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// scrub removes the proxy's credential from s, as is and escaped.
func (p *Proxy) scrub(s string) string {
	if p.secret == "" {
		return s
	}
	for _, v := range []string{p.secret, url.QueryEscape(p.secret), url.PathEscape(p.secret)} {
		s = strings.ReplaceAll(s, v, "[credential]")
	}
	return s
}

// scrubWriter is where ReverseProxy's own log lines go: scrubbed, to the
// proxy's logger.
type scrubWriter struct{ p *Proxy }

func (s scrubWriter) Write(b []byte) (int, error) {
	s.p.log.Warn(strings.TrimSpace(s.p.scrub(string(b))))
	return len(b), nil
}

// Serve serves the proxy on ln until ctx ends, then stops accepting and
// lets the calls in flight finish (and settle or refund) for up to
// Config.ShutdownGrace before closing what is left. It serves at most
// Config.MaxConns connections at once. It refuses a listener beyond
// loopback when the proxy has no token. It returns nil after a shutdown
// that let every call finish.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	if p.token == "" && !Loopback(ln.Addr()) {
		_ = ln.Close()
		return fmt.Errorf("%w: proxy: %s is reachable from other hosts: give a token, or listen on 127.0.0.1", quota.ErrInvalid, ln.Addr())
	}
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(scrubWriter{p}, "proxy: ", 0),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(newLimitListener(ln, p.maxConns)) }()
	select {
	case err := <-done:
		return fmt.Errorf("proxy: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-done
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("proxy: stopping: calls still in flight after %v were cut: %w", p.grace, err)
	}
	return nil
}

// Loopback reports whether addr only accepts connections from this host.
func Loopback(addr net.Addr) bool {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback()
}

// errClientGone reports a request its client abandoned.
func errClientGone(r *http.Request, err error) bool {
	return r.Context().Err() != nil && errors.Is(err, context.Canceled)
}
