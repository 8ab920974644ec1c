package quota_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/internal/ytsim"
	"github.com/quotactl/quotactl/quota"
)

// hostServer is a loopback server standing for one named host: it records
// what reaches it.
type hostServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func (h *hostServer) requests() []*http.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*http.Request(nil), h.reqs...)
}

// newHostServer starts a loopback server (TLS when tls is set) answering
// with handler, or 200 and a small JSON body when handler is nil.
func newHostServer(t *testing.T, tls bool, handler http.HandlerFunc) *hostServer {
	t.Helper()
	h := &hostServer{}
	hf := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c := r.Clone(context.Background())
		c.Body = io.NopCloser(bytes.NewReader(body))
		h.mu.Lock()
		h.reqs = append(h.reqs, c)
		h.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if handler != nil {
			handler(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"items":[]}`))
	})
	if tls {
		h.srv = httptest.NewTLSServer(hf)
	} else {
		h.srv = httptest.NewServer(hf)
	}
	t.Cleanup(h.srv.Close)
	return h
}

// hostsBase returns an *http.Transport that connects each "host:port" it
// dials (lower case, without a trailing dot) to the loopback address
// lookup gives, as /etc/hosts would: requests keep the URL and Host they
// name, nothing is rewritten. A host lookup does not know is a dial error:
// no test reaches the network. TLS trusts roots.
func hostsBase(t *testing.T, lookup func(hostport string) (addr string, ok bool), roots *x509.CertPool) *http.Transport {
	t.Helper()
	var d net.Dialer
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			to, ok := lookup(strings.TrimSuffix(strings.ToLower(host), ".") + ":" + port)
			if !ok {
				return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("test: no server for " + addr)}
			}
			return d.DialContext(ctx, network, to)
		},
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// hostsTable is a table for api.example.com alone.
const hostsTable = `
api: demo
hosts: [api.example.com]
budgets: [{name: units, limit: 100, window: "sliding:24h"}]
methods:
  items.list: {routes: [GET /v1/items], cost: {units: 1}}
  token: {routes: [POST /token], cost: {units: 5}}
responses:
  - {status: 429, exhaust: "*"}
`

const hostsSecret = "demo-secret-key-0123456789"

// hostsEnv is a metered client over hostsTable, with servers for the API's
// host (plain and TLS) and for hosts the table does not name.
type hostsEnv struct {
	t        *testing.T
	lim      *quota.Limiter
	client   *http.Client
	servers  map[string]*hostServer
	logs     *testkit.Buffer
	api, tls *hostServer
}

func newHostsEnv(t *testing.T, opts ...quota.TransportOption) *hostsEnv {
	t.Helper()
	table, err := costs.Parse("hosts.yaml", []byte(hostsTable))
	if err != nil {
		t.Fatal(err)
	}
	clk := testkit.NewClock(time.Date(2026, 3, 10, 10, 0, 0, 0, time.UTC))
	lim, err := quota.New(quota.NewMemoryStore(), table.API, table.Budgets, quota.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	e := &hostsEnv{t: t, lim: lim, logs: &testkit.Buffer{}}
	e.api, e.tls = newHostServer(t, false, nil), newHostServer(t, true, nil)
	e.servers = map[string]*hostServer{
		"api.example.com:80":   e.api,
		"api.example.com:8080": e.api, // another port: another service, which happens to answer too
		"api.example.com:443":  e.tls,
	}
	for _, h := range []string{"evil.example:80", "cdn.example:80", "auth.example:80"} {
		e.servers[h] = newHostServer(t, false, nil)
	}
	logger := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// The test certificate of the TLS server names example.com and
	// *.example.com.
	roots := x509.NewCertPool()
	roots.AddCert(e.tls.srv.Certificate())
	lookup := func(hostport string) (string, bool) {
		s, ok := e.servers[hostport] // read at each dial: a test may add hosts
		if !ok {
			return "", false
		}
		return s.srv.Listener.Addr().String(), true
	}
	opts = append([]quota.TransportOption{quota.WithBase(hostsBase(t, lookup, roots)), quota.WithTransportLogger(logger),
		quota.WithRetryClock(clk, clk.NewTimer),
	}, opts...)
	e.client = &http.Client{Transport: quota.NewTransport(lim, table, opts...)}
	return e
}

// do sends req through the metered client and returns the response (body
// read and closed) or the error.
func (e *hostsEnv) do(req *http.Request) (*http.Response, error) {
	e.t.Helper()
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	_, _ = io.ReadAll(resp.Body)
	return resp, nil
}

// used returns what the meter counts for the secret's units.
func (e *hostsEnv) used(secret string) int64 {
	e.t.Helper()
	us, err := e.lim.Status(context.Background(), quota.Credential{Secret: secret})
	if err != nil {
		e.t.Fatal(err)
	}
	return us[0].Used
}

// received counts the requests every server received.
func (e *hostsEnv) received() int {
	n := 0
	seen := map[*hostServer]bool{}
	for _, s := range e.servers {
		if !seen[s] {
			seen[s] = true
			n += len(s.requests())
		}
	}
	return n
}

// A request on one of the API's paths to a host the table does not name is
// not the API's: when it carries a credential the transport meters, in any
// form, it is not sent (the credential never reaches that host) and nothing
// is charged; the error wraps quota.ErrForeignHost and never shows the
// secret.
func TestTransportForeignHostWithCredentialIsNotSent(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []quota.TransportOption
		url  string
		set  func(*http.Request)
		says string
	}{
		{"key parameter", nil, "http://evil.example/v1/items?key=" + hostsSecret, nil, "a key parameter"},
		{"api key header", nil, "http://evil.example/v1/items", func(r *http.Request) { r.Header.Set("X-Goog-Api-Key", hostsSecret) }, "an X-Goog-Api-Key header"},
		{"bearer", nil, "http://evil.example/v1/items", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+hostsSecret) }, "a Bearer token"},
		{"bearer lower case", nil, "http://evil.example/v1/items", func(r *http.Request) { r.Header.Set("Authorization", "bearer "+hostsSecret) }, "a Bearer token"},
		{"second authorization", nil, "http://evil.example/v1/items", func(r *http.Request) {
			r.Header.Add("Authorization", "Basic Y2xpZW50OnNlY3JldA==")
			r.Header.Add("Authorization", "Bearer "+hostsSecret)
		}, "a Bearer token"},
		{"fixed credential in a header", []quota.TransportOption{quota.WithCredential(quota.Credential{Secret: hostsSecret})},
			"http://evil.example/v1/items", func(r *http.Request) { r.Header.Set("X-Api-Token", hostsSecret) }, "the WithCredential secret in a header"},
		{"fixed credential in the path", []quota.TransportOption{quota.WithCredential(quota.Credential{Secret: hostsSecret})},
			"http://evil.example/v1/items/" + hostsSecret, nil, "the WithCredential secret in its URL"},
		{"another port", nil, "http://api.example.com:8080/v1/items?key=" + hostsSecret, nil, "a key parameter"},
		{"second key parameter", nil, "http://evil.example/v1/items?key=&key=" + hostsSecret, nil, "a key parameter"},
		{"escaped key name", nil, "http://evil.example/v1/items?%6Bey=" + hostsSecret, nil, "a key parameter"},
		{"api key header set by index", nil, "http://evil.example/v1/items", func(r *http.Request) { r.Header["x-goog-api-key"] = []string{hostsSecret} }, "an X-Goog-Api-Key header"},
		{"anthropic key header", nil, "http://evil.example/v1/items", func(r *http.Request) { r.Header["x-api-key"] = []string{hostsSecret} }, "an X-Api-Key header"},
		{"shopify token header", nil, "http://evil.example/v1/items", func(r *http.Request) { r.Header.Set("X-Shopify-Access-Token", hostsSecret) }, "an X-Shopify-Access-Token header"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newHostsEnv(t, c.opts...)
			req, _ := http.NewRequest("GET", c.url, nil)
			if c.set != nil {
				c.set(req)
			}
			_, err := e.do(req)
			// http.Client wraps the transport's error in a *url.Error
			// holding the URL as the caller wrote it: look past it.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			if !errors.Is(err, quota.ErrForeignHost) || !strings.Contains(err.Error(), "not sent: it carries "+c.says) {
				t.Fatalf("err = %v, want ErrForeignHost saying it carries %s", err, c.says)
			}
			if !strings.Contains(err.Error(), "table demo prices requests to api.example.com, not to ") {
				t.Fatalf("err = %v: does not say which hosts the table prices", err)
			}
			if strings.Contains(err.Error(), hostsSecret) || strings.Contains(e.logs.String(), hostsSecret) {
				t.Fatalf("the secret leaked: %v\n%s", err, e.logs)
			}
			if n := e.received(); n != 0 {
				t.Fatalf("%d requests reached a server, want none", n)
			}
			if u := e.used(hostsSecret); u != 0 {
				t.Fatalf("charged %d units for a request to another host", u)
			}
			apis, err := e.lim.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range apis {
				if len(a.Credentials) != 0 {
					t.Fatalf("the store records credentials %+v for a request that was not the API's", a.Credentials)
				}
			}
		})
	}
}

// A request to another host that carries no credential the transport
// meters passes through unmetered, as the client sent it: a download from
// a CDN, a token refresh authenticated with Basic and a form body. The
// transport neither retries nor classifies its answer (a 429 there says
// nothing about the API's budgets), and adds no credential.
func TestTransportForeignHostWithoutCredentialPasses(t *testing.T) {
	e := newHostsEnv(t)
	cdn, auth := e.servers["cdn.example:80"], e.servers["auth.example:80"]

	resp, err := e.do(mustRequest(t, "GET", "http://cdn.example/v1/items", nil))
	if err != nil || resp.StatusCode != 200 || len(cdn.requests()) != 1 {
		t.Fatalf("cdn: %v, %d requests", err, len(cdn.requests()))
	}

	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"rt-123"}}
	req := mustRequest(t, "POST", "http://auth.example/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("client-id", "client-secret")
	if resp, err := e.do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("token refresh: %v", err)
	}
	got := auth.requests()
	if len(got) != 1 || got[0].URL.Path != "/token" || got[0].Header.Get("Authorization") != req.Header.Get("Authorization") {
		t.Fatalf("the token endpoint received %d requests: %+v", len(got), got)
	}
	if b, _ := io.ReadAll(got[0].Body); string(b) != form.Encode() {
		t.Fatalf("token body %q", b)
	}

	// An error answer from another host is returned as it is: not retried,
	// not read as the API's.
	throttled := newHostServer(t, false, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":{"code":429,"errors":[{"reason":"rateLimitExceeded"}]}}`, http.StatusTooManyRequests)
	})
	e.servers["busy.example:80"] = throttled // the map is read at each dial
	resp, err = e.do(mustRequest(t, "GET", "http://busy.example/v1/items", nil))
	if err != nil || resp.StatusCode != 429 || len(throttled.requests()) != 1 {
		t.Fatalf("429 from another host: %v, %d requests, want it returned after one", err, len(throttled.requests()))
	}

	// Nothing of this was the API's: no credential recorded, and the API's
	// own host still serves a metered call with the whole budget.
	req = mustRequest(t, "GET", "http://api.example.com/v1/items", nil)
	req.Header.Set("X-Goog-Api-Key", hostsSecret)
	if resp, err := e.do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the API: %v", err)
	}
	us, err := e.lim.Status(context.Background(), quota.Credential{Secret: hostsSecret})
	if err != nil || us[0].Used != 1 || !us[0].ExhaustedUntil.IsZero() {
		t.Fatalf("units = %+v, %v; want 1 used, open", us, err)
	}
	for _, s := range []*hostServer{cdn, auth, throttled} {
		for _, r := range s.requests() {
			if carriesSecret(r, hostsSecret) {
				t.Fatalf("%s received the API's credential", r.Host)
			}
		}
	}
}

// The table's hosts compare ignoring case, a trailing dot and the scheme's
// default port, over plain HTTP and TLS; a request to them is metered as
// before, and reaches the server for the host it names.
func TestTransportHostMatching(t *testing.T) {
	e := newHostsEnv(t)
	for i, u := range []string{
		"http://api.example.com/v1/items",
		"http://API.Example.COM/v1/items",
		"http://api.example.com:80/v1/items",
		"http://api.example.com./v1/items",
		"https://api.example.com/v1/items",
		"https://Api.Example.Com:443/v1/items",
	} {
		req := mustRequest(t, "GET", u, nil)
		req.Header.Set("X-Goog-Api-Key", hostsSecret)
		resp, err := e.do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v", u, err)
		}
		if got := e.used(hostsSecret); got != int64(i+1) {
			t.Fatalf("%s: used %d, want %d", u, got, i+1)
		}
	}
	if p, s := len(e.api.requests()), len(e.tls.requests()); p != 4 || s != 2 {
		t.Fatalf("plain server got %d, TLS server %d; want 4 and 2", p, s)
	}
	for _, r := range append(e.api.requests(), e.tls.requests()...) {
		if r.Header.Get("X-Goog-Api-Key") != hostsSecret {
			t.Fatalf("the API's host did not receive the credential: %v", r.Header)
		}
	}
}

// A redirect from another host to the API's host, even one whose Location
// carries a key, is not a metered call: the key is removed before it leaves
// for a host the first request did not name, and nothing is charged.
func TestTransportForeignRedirectToTheAPI(t *testing.T) {
	e := newHostsEnv(t)
	e.servers["evil.example:80"] = newHostServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://api.example.com/v1/items?key="+hostsSecret, http.StatusFound)
	})
	resp, err := e.do(mustRequest(t, "GET", "http://evil.example/v1/items", nil))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("redirect: %v", err)
	}
	got := e.api.requests()
	if len(got) != 1 || carriesSecret(got[0], hostsSecret) {
		t.Fatalf("the API's host received %d requests, with the key: %v", len(got), len(got) == 1 && carriesSecret(got[0], hostsSecret))
	}
	if u := e.used(hostsSecret); u != 0 {
		t.Fatalf("charged %d", u)
	}
}

// A redirect to a host the call did not name carries no credential the
// transport would refuse to send there itself, whatever carries it: an
// API key header set by index (not canonical, which http.Client copies to
// every hop as it is), or the WithCredential secret in a header of the
// caller's choosing or a cookie (http.Client keeps cookies for a
// subdomain). A hop whose Location holds that secret is not sent. The
// call is charged once.
func TestTransportRedirectStripsEveryCarriedCredential(t *testing.T) {
	const other = "other-api-key-9876543210"
	withCred := []quota.TransportOption{quota.WithCredential(quota.Credential{Secret: hostsSecret, Label: "k"})}
	for _, c := range []struct {
		name, to string
		opts     []quota.TransportOption
		set      func(*http.Request)
		notSent  bool
	}{
		{name: "lower-case key header", to: "http://evil.example/x?hop=1", set: func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+hostsSecret)
			r.Header["x-goog-api-key"] = []string{other}
		}},
		{name: "lower-case key header, fixed credential", to: "http://evil.example/x?hop=1", opts: withCred, set: func(r *http.Request) {
			r.Header["x-goog-api-key"] = []string{hostsSecret}
		}},
		{name: "secret in a header of its own", to: "http://evil.example/x?hop=1", opts: withCred, set: func(r *http.Request) {
			r.Header.Set("X-Api-Key", hostsSecret)
		}},
		{name: "anthropic key header, no fixed credential", to: "http://evil.example/x?hop=1", set: func(r *http.Request) {
			r.Header.Set("X-Api-Key", hostsSecret)
		}},
		{name: "shopify token header", to: "http://evil.example/x?hop=1", set: func(r *http.Request) {
			r.Header.Set("X-Shopify-Access-Token", hostsSecret)
		}},
		{name: "shopify token header set by index, beside a bearer", to: "http://evil.example/x?hop=1", set: func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+hostsSecret)
			r.Header["x-shopify-access-token"] = []string{other}
		}},
		{name: "secret in a cookie, to a subdomain", to: "http://sub.api.example.com/x?hop=1", opts: withCred, set: func(r *http.Request) {
			r.Header.Set("Cookie", "session="+hostsSecret)
		}},
		// a key parameter whose name is escaped is a key parameter all
		// the same: the upstream unescapes it
		{name: "escaped key parameter", to: "http://evil.example/x?hop=1&%6Bey=" + other, set: func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+hostsSecret)
		}},
		{name: "secret in the Location", to: "http://evil.example/x/" + hostsSecret + "?hop=1", opts: withCred, notSent: true, set: func(r *http.Request) {
			r.Header.Set("X-Api-Key", hostsSecret)
		}},
	} {
		for _, code := range []int{http.StatusFound, http.StatusPermanentRedirect} {
			t.Run(fmt.Sprintf("%s/%d", c.name, code), func(t *testing.T) {
				e := newHostsEnv(t, c.opts...)
				e.servers["sub.api.example.com:80"] = newHostServer(t, false, nil)
				first := newHostServer(t, false, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Location", c.to)
					w.WriteHeader(code)
				})
				e.servers["api.example.com:80"] = first
				req := mustRequest(t, "GET", "http://api.example.com/v1/items", nil)
				c.set(req)
				_, err := e.do(req)
				if got := first.requests(); len(got) != 1 || !carriesSecret(got[0], hostsSecret) {
					t.Fatalf("the API's host received %d requests, want 1 with the credential", len(got))
				}
				for hp, s := range e.servers {
					if s == first {
						continue
					}
					for _, r := range s.requests() {
						if carriesSecret(r, hostsSecret) || carriesSecret(r, other) {
							t.Errorf("%s received a credential: %s %v", hp, r.URL, r.Header)
						}
					}
				}
				if c.notSent {
					if !errors.Is(err, quota.ErrForeignHost) || e.received() != 1 {
						t.Errorf("err = %v, %d requests received; want ErrForeignHost and only the first", err, e.received())
					}
				} else if err != nil || e.received() != 2 {
					t.Errorf("err = %v, %d requests received; want the redirect followed", err, e.received())
				}
				if strings.Contains(e.logs.String(), hostsSecret) {
					t.Errorf("the log shows the secret: %s", e.logs.String())
				}
				if u := e.used(hostsSecret); u != 1 {
					t.Errorf("charged %d units for one logical call, want 1", u)
				}
			})
		}
	}
}

func mustRequest(t *testing.T, method, u string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// carriesSecret reports whether a received request holds secret in its URL
// or any header.
func carriesSecret(r *http.Request, secret string) bool {
	if strings.Contains(r.URL.String(), secret) {
		return true
	}
	for _, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, secret) {
				return true
			}
		}
	}
	return false
}

// The built-in YouTube table, as shipped, prices the Data API at Google's
// hosts and nothing else, through a client that also fetches thumbnails and
// refreshes its OAuth token: a YouTube path on a foreign host is not
// charged to YouTube's budgets (and with the API key on it, not sent); a
// thumbnail on i.ytimg.com and a token refresh at oauth2.googleapis.com
// pass through unmetered; the Data API at www.googleapis.com and
// youtube.googleapis.com is metered as always. Every host is a loopback
// server, reached through a DialContext that plays DNS.
func TestTransportYouTubeHosts(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	clk := testkit.NewClock(time.Date(2026, 3, 10, 10, 0, 0, 0, la))
	sim := ytsim.New(ytsim.WithClock(clk.Now))
	t.Cleanup(sim.Close)
	jpeg := []byte("\xff\xd8\xff\xe0 a thumbnail")
	thumbs := newHostServer(t, false, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/jpeg")
		_, _ = w.Write(jpeg)
	})
	oauth := newHostServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.URL.Path != "/token" || r.PostForm.Get("grant_type") != "refresh_token" {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"ya29.fresh-token-0123456789","expires_in":3599,"token_type":"Bearer"}`))
	})
	evil := newHostServer(t, false, nil)
	hosts := map[string]string{
		"www.googleapis.com:80":     sim.Host(),
		"youtube.googleapis.com:80": sim.Host(),
		"i.ytimg.com:80":            thumbs.srv.Listener.Addr().String(),
		"oauth2.googleapis.com:80":  oauth.srv.Listener.Addr().String(),
		"evil.example:80":           evil.srv.Listener.Addr().String(),
	}
	base := hostsBase(t, func(hp string) (string, bool) { a, ok := hosts[hp]; return a, ok }, nil)

	table, err := costs.Builtin("youtube") // as shipped
	if err != nil {
		t.Fatal(err)
	}
	lim, err := quota.New(quota.NewMemoryStore(), table.API, table.Budgets, quota.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	client := &http.Client{Transport: quota.NewTransport(lim, table, quota.WithBase(base),
		quota.WithTransportLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))}
	get := func(req *http.Request) (*http.Response, []byte, error) {
		t.Helper()
		resp, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	units := func() int64 {
		t.Helper()
		return trStatus(t, lim, quota.Credential{Secret: trKey, Owner: trOwner}, "units").Used
	}

	// The Data API, at both its hosts, whatever the case and the default
	// port: metered.
	for _, u := range []string{
		"http://www.googleapis.com/youtube/v3/videos?part=id&id=v1&key=" + trKey,
		"http://YouTube.GoogleAPIs.com:80/youtube/v3/videos?part=id&id=v2&key=" + trKey,
	} {
		if resp, _, err := get(mustRequest(t, "GET", u, nil)); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v", u, err)
		}
	}
	if got, upstream := units(), sim.Used(trKey, "units"); got != 2 || upstream != 2 {
		t.Fatalf("units: meter %d, upstream %d; want 2 and 2", got, upstream)
	}

	// A YouTube path on a foreign host, with the key: not sent, not charged.
	_, _, err = get(mustRequest(t, "GET", "http://evil.example/youtube/v3/videos?part=id&key="+trKey, nil))
	if !errors.Is(err, quota.ErrForeignHost) || errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("evil.example with the key: %v, want ErrForeignHost", err)
	}
	// The same without a credential: none of YouTube's business, sent as is.
	if resp, _, err := get(mustRequest(t, "GET", "http://evil.example/youtube/v3/videos?part=id", nil)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("evil.example without a credential: %v", err)
	}
	if n := len(evil.requests()); n != 1 {
		t.Fatalf("evil.example received %d requests, want the one without a credential", n)
	}

	// A thumbnail, and an OAuth token refresh (client credentials in the
	// form, or in Basic auth as golang.org/x/oauth2 sends them): unmetered.
	resp, body, err := get(mustRequest(t, "GET", "http://i.ytimg.com/vi/v1/hqdefault.jpg", nil))
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, jpeg) {
		t.Fatalf("thumbnail: %v, %q", err, body)
	}
	var token string
	for _, basic := range []bool{false, true} {
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"1//refresh-token"}}
		if !basic {
			form.Set("client_id", "client.apps.googleusercontent.com")
			form.Set("client_secret", "client-secret")
		}
		req := mustRequest(t, "POST", "http://oauth2.googleapis.com/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if basic {
			req.SetBasicAuth("client.apps.googleusercontent.com", "client-secret")
		}
		resp, body, err := get(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("token refresh (basic %v): %v, %s", basic, err, body)
		}
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" {
			t.Fatalf("token: %v, %s", err, body)
		}
		token = tok.AccessToken
	}
	if got := units(); got != 2 {
		t.Fatalf("units = %d after requests to other hosts, want still 2", got)
	}

	// The refreshed token at the Data API: metered as the credential it is.
	req := mustRequest(t, "GET", "http://www.googleapis.com/youtube/v3/channels?part=id&mine=true", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, _, err := get(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("channels.list with the token: %v", err)
	}
	if got := trStatus(t, lim, quota.Credential{Secret: token, Owner: trOwner}, "units").Used; got != 3 || sim.Used(token, "units") != 1 {
		t.Fatalf("units = %d, upstream charged the token %d; want 3 and 1", got, sim.Used(token, "units"))
	}

	// No credential ever reached a host the request did not name, nor a
	// host that is not the API's.
	for _, s := range []*hostServer{evil, thumbs, oauth} {
		for _, r := range s.requests() {
			if carriesSecret(r, trKey) || carriesSecret(r, token) {
				t.Fatalf("%s %s received a credential", r.Method, r.URL)
			}
		}
	}
	if sim.Requests() != 3 {
		t.Fatalf("the API received %d requests, want 3", sim.Requests())
	}
	if strings.Contains(logs.String(), trKey) || strings.Contains(logs.String(), token) {
		t.Fatalf("a credential is in the logs:\n%s", logs.String())
	}
}
