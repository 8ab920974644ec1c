package quota_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/internal/ytsim"
	"github.com/quotactl/quotactl/quota"
)

// trKey is the raw API key of the tests; it must never show up in errors
// or logs.
const trKey = "AIzaSy-test-secret-key-0123456789"

// trOwner is the owner a transport over the YouTube table meters every
// credential as when no owner is named.
const trOwner = "unnamed-project"

// trEnv is one test's metered client against a simulated YouTube.
type trEnv struct {
	t      *testing.T
	clk    *testkit.Clock // shared by the limiter, the simulator and the retry timers, whose waits it records
	store  *quota.MemoryStore
	table  *costs.Table
	lim    *quota.Limiter
	srv    *ytsim.Server
	client *http.Client
	logs   *testkit.Buffer
}

// waits returns the retry waits so far, in order.
func (e *trEnv) waits() []time.Duration { return e.clk.Waits() }

func newTrEnv(t *testing.T, simOpts []ytsim.Option, opts ...quota.TransportOption) *trEnv {
	t.Helper()
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	e := &trEnv{t: t, clk: testkit.NewClock(time.Date(2026, 3, 10, 10, 0, 0, 0, la)), store: quota.NewMemoryStore(), logs: &testkit.Buffer{}}
	e.table = anyHost(t, "youtube")
	e.srv = ytsim.New(append([]ytsim.Option{ytsim.WithClock(e.clk.Now)}, simOpts...)...)
	t.Cleanup(e.srv.Close)
	e.lim = e.newLimiter()
	logger := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	base := append([]quota.TransportOption{
		quota.WithLabel("yt-key-1"),
		quota.WithTransportLogger(logger),
		quota.WithRetryClock(e.clk, e.clk.NewTimer), // retries without sleeping
	}, opts...)
	tr := quota.NewTransport(e.lim, e.table, base...)
	e.client = &http.Client{Transport: tr}
	t.Cleanup(e.client.CloseIdleConnections)
	return e
}

// anyHost returns the named built-in table pricing requests to any host:
// the tests that use it send to loopback servers of their own (the
// simulator, recorders, redirect targets) and test what the transport does
// with a priced request. How it honours the built-in table's own hosts is
// tested in transport_host_test.go.
func anyHost(tb testing.TB, name string) *costs.Table {
	tb.Helper()
	table, err := costs.Builtin(name)
	if err == nil {
		table, err = table.WithHosts()
	}
	if err != nil {
		tb.Fatal(err)
	}
	return table
}

// newLimiter returns another limiter on the same store: another process.
func (e *trEnv) newLimiter() *quota.Limiter {
	e.t.Helper()
	lim, err := quota.New(e.store, e.table.API, e.table.Budgets, quota.WithClock(e.clk.Now))
	if err != nil {
		e.t.Fatal(err)
	}
	return lim
}

func (e *trEnv) url(path string, query ...string) string {
	q := url.Values{"key": {trKey}}
	for i := 0; i+1 < len(query); i += 2 {
		q.Set(query[i], query[i+1])
	}
	return e.srv.URL() + path + "?" + q.Encode()
}

// do sends a request and returns the response (body read and closed) or
// the error.
func (e *trEnv) do(ctx context.Context, method, u string, body io.Reader) (*http.Response, []byte, error) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, b, nil
}

// used returns what the meter counts for budget now.
func (e *trEnv) used(budget string) int64 {
	e.t.Helper()
	// The YouTube table keeps budgets per project and these tests name
	// none: the transport meters the key as the one unnamed project.
	us, err := e.lim.Status(context.Background(), quota.Credential{Secret: trKey, Owner: trOwner})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, u := range us {
		if u.Budget == budget {
			return u.Used
		}
	}
	e.t.Fatalf("no budget %q", budget)
	return 0
}

// agree checks the meter's count equals the simulator's for every budget.
func (e *trEnv) agree() {
	e.t.Helper()
	for _, b := range e.table.Budgets {
		if m, s := e.used(b.Name), e.srv.Used(trKey, b.Name); m != s {
			e.t.Errorf("budget %s: meter counts %d units, upstream %d", b.Name, m, s)
		}
	}
}

func TestTransportChargesThenSends(t *testing.T) {
	e := newTrEnv(t, nil)
	ctx := context.Background()
	calls := []struct {
		method, path string
		query        []string
		body         string
		budget       string
		units        int64
	}{
		{"GET", "/youtube/v3/videos", []string{"chart", "mostPopular", "regionCode", "GB", "maxResults", "50"}, "", "units", 1},
		{"GET", "/youtube/v3/search", []string{"q", "cats", "regionCode", "GB"}, "", "search", 1},
		{"GET", "/youtube/v3/videos:batchGetStats", []string{"id", "a,b"}, "", "stats", 1},
		{"PUT", "/youtube/v3/videos", []string{"part", "snippet"}, `{"id":"x"}`, "units", 50},
		{"POST", "/upload/youtube/v3/videos", []string{"uploadType", "resumable"}, `{}`, "uploads", 1},
		{"PUT", "/upload/youtube/v3/videos", []string{"uploadType", "resumable", "upload_id", "u1"}, "chunk", "", 0}, // free
		{"GET", "/youtube/v3/liveChat/messages", []string{"liveChatId", "c"}, "", "units", 5},
		{"POST", "/upload/youtube/v3/captions", nil, "caption", "units", 400},
	}
	want := map[string]int64{}
	for _, c := range calls {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		resp, b, err := e.do(ctx, c.method, e.url(c.path, c.query...), body)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %s %s", c.method, c.path, resp.Status, b)
		}
		if c.budget != "" {
			want[c.budget] += c.units
		}
		for _, bg := range e.table.Budgets {
			if got := e.used(bg.Name); got != want[bg.Name] {
				t.Fatalf("after %s %s: meter has %s=%d, want %d", c.method, c.path, bg.Name, got, want[bg.Name])
			}
		}
		e.agree()
	}
	// The credential is stored by fingerprint, with the label.
	apis, err := e.lim.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(apis) != 1 || len(apis[0].Credentials) != 1 || apis[0].Credentials[0].Label != "yt-key-1" ||
		apis[0].Credentials[0].ID != quota.DefaultFingerprint(trKey) {
		t.Fatalf("stored credentials: %+v", apis)
	}
}

func TestTransportRefusalIsNeverSent(t *testing.T) {
	e := newTrEnv(t, nil)
	ctx := context.Background()
	if err := e.lim.Adjust(ctx, quota.Credential{Secret: trKey, Owner: trOwner}, "units", 9990); err != nil {
		t.Fatal(err)
	}
	// captions.list costs 50 > the 10 left.
	_, _, err := e.do(ctx, "GET", e.url("/youtube/v3/captions", "videoId", "v"), nil)
	var ex *quota.ExhaustedError
	if !errors.Is(err, quota.ErrExhausted) || !errors.As(err, &ex) {
		t.Fatalf("err = %v, want an *ExhaustedError", err)
	}
	if ex.Budget != "units" || ex.Cost != 50 || ex.Used != 9990 || ex.Credential != "yt-key-1" {
		t.Fatalf("ExhaustedError = %+v", ex)
	}
	if n := e.srv.Requests(); n != 0 {
		t.Fatalf("upstream received %d requests, want none", n)
	}
	// Cheaper calls still go through.
	if resp, _, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("videos.list: %v", err)
	}
	if got := e.used("units"); got != 9991 {
		t.Fatalf("used = %d, want 9991", got)
	}
}

func TestTransportRefundsWhenNotSent(t *testing.T) {
	ctx := context.Background()
	t.Run("dial error", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		e := newTrEnv(t, nil)
		_, _, err = e.do(ctx, "GET", "http://"+addr+"/youtube/v3/videos?chart=mostPopular&key="+trKey, nil)
		if err == nil {
			t.Fatal("want a dial error")
		}
		if errors.Is(err, quota.ErrExhausted) {
			t.Fatalf("err = %v: not a refusal", err)
		}
		if got := e.used("units"); got != 0 {
			t.Fatalf("used = %d after a dial error, want 0 (refunded)", got)
		}
		if len(e.waits()) != 0 {
			t.Fatalf("a refused connection was retried: waits %v", e.waits())
		}
	})
	t.Run("context cancelled after the take", func(t *testing.T) {
		e := newTrEnv(t, nil)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var took, refunded int64
		cctx = quota.ContextWithChargeFunc(cctx, func(res *quota.Reservation, refund bool) {
			if refund {
				refunded++
				return
			}
			took++
			cancel() // the caller gives up between the take and the send
		})
		_, _, err := e.do(cctx, "GET", e.url("/youtube/v3/videos", "chart", "mostPopular"), nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if took != 1 || refunded != 1 {
			t.Fatalf("observer saw %d takes, %d refunds; want 1, 1", took, refunded)
		}
		if got, n := e.used("units"), e.srv.Requests(); got != 0 || n != 0 {
			t.Fatalf("used = %d, upstream requests = %d; want 0, 0", got, n)
		}
	})
	t.Run("context cancelled while dialling", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		dialer := &http.Transport{DialContext: func(dctx context.Context, network, addr string) (net.Conn, error) {
			cancel()
			<-dctx.Done()
			return nil, dctx.Err()
		}}
		e := newTrEnv(t, nil, quota.WithBase(dialer))
		_, _, err := e.do(cctx, "GET", e.url("/youtube/v3/videos", "chart", "mostPopular"), nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if got, n := e.used("units"), e.srv.Requests(); got != 0 || n != 0 {
			t.Fatalf("used = %d, upstream requests = %d; want 0, 0", got, n)
		}
	})
}

func TestTransportUpstreamExhaustionStopsEveryProcess(t *testing.T) {
	// The upstream's real quota is smaller than the meter thinks (another
	// tool spent most of it): it answers 403 quotaExceeded on the 4th call.
	e := newTrEnv(t, []ytsim.Option{ytsim.WithLimit("units", 3)})
	ctx := context.Background()
	list := e.url("/youtube/v3/videos", "chart", "mostPopular", "regionCode", "FR")
	for i := range 3 {
		if resp, _, err := e.do(ctx, "GET", list, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	_, _, err := e.do(ctx, "GET", list, nil)
	var ex *quota.ExhaustedError
	if !errors.As(err, &ex) || !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("err = %v, want an *ExhaustedError", err)
	}
	la, _ := time.LoadLocation("America/Los_Angeles")
	midnight := time.Date(2026, 3, 11, 0, 0, 0, 0, la)
	if ex.Budget != "units" || !ex.ExhaustedUntil.Equal(midnight) || !ex.RetryAt.Equal(midnight) || ex.RetryAfter != 14*time.Hour {
		t.Fatalf("ExhaustedError = %+v, want units spent until %v (in 14h)", ex, midnight)
	}
	if !strings.Contains(err.Error(), "403 quotaExceeded") {
		t.Fatalf("err = %q, want it to name the upstream's answer", err)
	}
	e.agree() // the refused attempt was refunded: 3 and 3

	// Another process sharing the store refuses without sending.
	received := e.srv.Received(trKey, "units")
	other := quota.NewTransport(e.newLimiter(), e.table)
	req, _ := http.NewRequest("GET", e.url("/youtube/v3/channels", "id", "c"), nil)
	if _, err := other.RoundTrip(req); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("other process: err = %v, want ErrExhausted", err)
	}
	if _, _, err := e.do(ctx, "GET", list, nil); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("same process: err = %v, want ErrExhausted", err)
	}
	if got := e.srv.Received(trKey, "units"); got != received {
		t.Fatalf("upstream received %d more requests after the meter refused", got-received)
	}
	// The other buckets are not affected.
	if resp, _, err := e.do(ctx, "GET", e.url("/youtube/v3/search", "q", "x"), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("search.list: %v", err)
	}
	// After midnight Pacific both sides start afresh.
	e.clk.Add(14 * time.Hour)
	if resp, _, err := e.do(ctx, "GET", list, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("next day: %v", err)
	}
	e.agree()
}

func TestTransportDroppedReusedConnection(t *testing.T) {
	// A connection kept alive from an earlier call breaks: http.Transport
	// may resend the request on its own. Every copy the upstream receives
	// is charged.
	e := newTrEnv(t, nil)
	ctx := context.Background()
	u := e.url("/youtube/v3/videos", "id", "v")
	if _, _, err := e.do(ctx, "GET", u, nil); err != nil {
		t.Fatal(err)
	}
	e.srv.Inject(ytsim.Fault{Drop: true})
	if resp, _, err := e.do(ctx, "GET", u, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("err = %v", err)
	}
	if got := e.srv.Received(trKey, "units"); got != 3 {
		t.Fatalf("upstream received %d requests, want 3", got)
	}
	e.agree()
}

func TestTransportRetries(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		faults []ytsim.Fault
		waits  []time.Duration // minimum waits
	}{
		{"503 twice", []ytsim.Fault{{Status: 503}, {Status: 503}}, []time.Duration{0, 0}},
		{"500 then 502", []ytsim.Fault{{Status: 500}, {Status: 502}}, []time.Duration{0, 0}},
		{"dropped connections", []ytsim.Fault{{Drop: true}, {Drop: true}}, []time.Duration{0, 0}},
		{"429 with Retry-After", []ytsim.Fault{{Status: 429, RetryAfter: 3 * time.Second}}, []time.Duration{3 * time.Second}},
		{"503 with Retry-After", []ytsim.Fault{{Status: 503, RetryAfter: 2 * time.Second}}, []time.Duration{2 * time.Second}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTrEnv(t, nil)
			e.srv.Inject(c.faults...)
			// videos.rate is a POST with a replayable body: 50 units an attempt.
			resp, b, err := e.do(ctx, "POST", e.url("/youtube/v3/videos/rate", "id", "v", "rating", "like"), strings.NewReader("{}"))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("err = %v, resp = %v %s", err, resp, b)
			}
			attempts := int64(len(c.faults) + 1)
			if got := e.used("units"); got != 50*attempts {
				t.Fatalf("meter charged %d units, want %d (every attempt)", got, 50*attempts)
			}
			e.agree()
			if got := e.srv.Received(trKey, "units"); got != attempts {
				t.Fatalf("upstream received %d attempts, want %d", got, attempts)
			}
			if len(e.waits()) != len(c.waits) {
				t.Fatalf("waits = %v, want %d", e.waits(), len(c.waits))
			}
			for i, w := range c.waits {
				if e.waits()[i] < w {
					t.Fatalf("wait %d = %v, want at least %v (Retry-After)", i, e.waits()[i], w)
				}
			}
		})
	}
}

func TestTransportRetriesAreBounded(t *testing.T) {
	ctx := context.Background()
	t.Run("attempts", func(t *testing.T) {
		e := newTrEnv(t, nil, quota.WithRetries(3, time.Hour))
		for range 5 {
			e.srv.Inject(ytsim.Fault{Status: 503})
		}
		resp, _, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil)
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("want the last 503 back, got %v %v", resp, err)
		}
		if got := e.srv.Received(trKey, "units"); got != 3 {
			t.Fatalf("attempts = %d, want 3", got)
		}
		e.agree()
	})
	t.Run("elapsed time", func(t *testing.T) {
		e := newTrEnv(t, nil, quota.WithRetries(100, 5*time.Second))
		for range 10 {
			e.srv.Inject(ytsim.Fault{Status: 503, RetryAfter: 2 * time.Second})
		}
		resp, _, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil)
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("want the last 503 back, got %v %v", resp, err)
		}
		var total time.Duration
		for _, w := range e.waits() {
			total += w
		}
		if total > 5*time.Second || len(e.waits()) < 1 {
			t.Fatalf("waited %v in %d waits, want at most 5s", total, len(e.waits()))
		}
		e.agree()
	})
	t.Run("long Retry-After", func(t *testing.T) {
		e := newTrEnv(t, nil)
		e.srv.Inject(ytsim.Fault{Status: 429, RetryAfter: time.Hour})
		resp, _, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil)
		if err != nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3600" {
			t.Fatalf("want the 429 back, got %v %v", resp, err)
		}
		if len(e.waits()) != 0 {
			t.Fatalf("waits = %v, want none", e.waits())
		}
	})
	t.Run("context cancelled while waiting", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		e := newTrEnv(t, nil)
		// Rebuild the client with timers that never fire: the first wait
		// cancels the request instead.
		e.client.Transport = quota.NewTransport(e.lim, e.table, quota.WithRetryClock(e.clk, func() backoff.Timer {
			return e.clk.StuckTimer(cancel)
		}))
		e.srv.Inject(ytsim.Fault{Status: 503})
		_, _, err := e.do(cctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if got := e.srv.Received(trKey, "units"); got != 1 {
			t.Fatalf("attempts = %d, want 1", got)
		}
		e.agree()
	})
}

// trOnceReader is a request body that cannot be replayed.
type trOnceReader struct{ r io.Reader }

func (o *trOnceReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestTransportDoesNotRetryUnreplayableBody(t *testing.T) {
	e := newTrEnv(t, nil)
	e.srv.Inject(ytsim.Fault{Status: 503})
	req, err := http.NewRequest("POST", e.url("/youtube/v3/playlists", "part", "snippet"), &trOnceReader{strings.NewReader(`{"snippet":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if req.GetBody != nil {
		t.Fatal("test needs a body without GetBody")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("status = %d, want the 503 back", resp.StatusCode)
	}
	if got := e.srv.Received(trKey, "units"); got != 1 || len(e.waits()) != 0 {
		t.Fatalf("attempts = %d, waits = %v; want 1 attempt, no wait", got, e.waits())
	}
	e.agree()
}

func TestTransportCredentials(t *testing.T) {
	ctx := context.Background()
	fp := quota.DefaultFingerprint
	t.Run("header and bearer", func(t *testing.T) {
		// Two credentials of two projects: each owner counts its own call.
		// Labels are unique per API: each credential gets its own.
		e := newTrEnv(t, nil, quota.WithOwnerFunc(func(r *http.Request) string {
			if r.Header.Get("Authorization") != "" {
				return "proj-bearer"
			}
			return "proj-header"
		}), quota.WithLabelFunc(func(r *http.Request) string {
			return "via-" + strings.ToLower(r.Header.Get("X-Goog-Api-Key") + "bearer")[:6]
		}))
		owners := map[string]string{"header-key": "proj-header", "ya29.token": "proj-bearer"}
		for _, h := range []struct{ name, value, secret string }{
			{"X-Goog-Api-Key", "header-key", "header-key"},
			{"Authorization", "Bearer ya29.token", "ya29.token"},
		} {
			req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL()+"/youtube/v3/videos?id=v", nil)
			req.Header.Set(h.name, h.value)
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			us, err := e.lim.Status(ctx, quota.Credential{Secret: h.secret, Owner: owners[h.secret]})
			if err != nil || us[0].Used != 1 || e.srv.Used(h.secret, "units") != 1 {
				t.Fatalf("%s: status %+v, %v", h.name, us, err)
			}
		}
		apis, _ := e.lim.List(ctx)
		var ids []string
		for _, c := range apis[0].Credentials {
			ids = append(ids, c.ID)
		}
		if len(ids) != 2 || !strings.Contains(strings.Join(ids, " "), fp("ya29.token")) {
			t.Fatalf("credentials = %v", ids)
		}
	})
	t.Run("fixed credential", func(t *testing.T) {
		e := newTrEnv(t, nil, quota.WithCredential(quota.Credential{Secret: "project-1", Label: "project"}))
		for _, tok := range []string{"tok-a", "tok-b"} { // rotating OAuth tokens
			req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL()+"/youtube/v3/videos?id=v", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		us, err := e.lim.Status(ctx, quota.Credential{Label: "project"})
		if err != nil || us[0].Used != 2 {
			t.Fatalf("status %+v, %v; want both calls on the fixed credential", us, err)
		}
	})
	t.Run("label func", func(t *testing.T) {
		e := newTrEnv(t, nil, quota.WithLabelFunc(func(r *http.Request) string { return r.Header.Get("X-Tenant") }))
		req, _ := http.NewRequestWithContext(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil)
		req.Header.Set("X-Tenant", "tenant-7")
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if _, err := e.lim.Status(ctx, quota.Credential{Label: "tenant-7"}); err != nil {
			t.Fatalf("label not stored: %v", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		e := newTrEnv(t, nil)
		_, _, err := e.do(ctx, "GET", e.srv.URL()+"/youtube/v3/videos?id=v", nil)
		if !errors.Is(err, quota.ErrInvalid) || e.srv.Requests() != 0 {
			t.Fatalf("err = %v, requests = %d; want ErrInvalid, nothing sent", err, e.srv.Requests())
		}
	})
}

func TestTransportUnknownRouteIsNotSent(t *testing.T) {
	e := newTrEnv(t, nil)
	_, _, err := e.do(context.Background(), "GET", e.url("/youtube/v3/notAResource"), nil)
	if !errors.Is(err, costs.ErrUnknownMethod) {
		t.Fatalf("err = %v, want costs.ErrUnknownMethod", err)
	}
	if e.srv.Requests() != 0 {
		t.Fatalf("upstream received %d requests", e.srv.Requests())
	}
}

func TestTransportNeverRevealsTheCredential(t *testing.T) {
	ctx := context.Background()
	e := newTrEnv(t, []ytsim.Option{ytsim.WithLimit("units", 60)})
	var errs []error
	record := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	send := func(method, path string, query ...string) {
		req, _ := http.NewRequestWithContext(ctx, method, e.url(path, query...), nil)
		// RoundTrip directly: http.Client adds the URL (and its key) to its
		// own *url.Error, which is out of the transport's hands.
		resp, err := e.client.Transport.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		record(err)
	}
	e.srv.Inject(ytsim.Fault{Status: 503}, ytsim.Fault{Drop: true})
	send("GET", "/youtube/v3/videos", "id", "v")       // retried twice: debug logs
	send("POST", "/youtube/v3/videos/rate", "id", "v") // 50 of the upstream's 60
	send("POST", "/youtube/v3/videos/rate", "id", "v") // upstream: quotaExceeded
	send("GET", "/youtube/v3/videos", "id", "v")       // refused by the meter
	send("GET", "/youtube/v3/nothing")                 // unpriceable
	closed := "http://127.0.0.1:1/youtube/v3/search?q=x&key=" + trKey
	req, _ := http.NewRequest("GET", closed, nil)
	_, err := e.client.Transport.RoundTrip(req) // dial error
	record(err)
	if len(errs) < 4 {
		t.Fatalf("want at least 4 errors, got %v", errs)
	}
	for _, err := range errs {
		if strings.Contains(err.Error(), trKey) {
			t.Errorf("error reveals the key: %v", err)
		}
		if strings.Contains(err.Error(), trKey[:12]) {
			t.Errorf("error reveals part of the key: %v", err)
		}
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "retrying") || !strings.Contains(logs, "upstream says the budget is spent") {
		t.Fatalf("expected retry and exhaustion logs, got:\n%s", logs)
	}
	if strings.Contains(logs, trKey) || strings.Contains(logs, trKey[:12]) {
		t.Fatalf("logs reveal the key:\n%s", logs)
	}
	if !strings.Contains(logs, "yt-key-1") {
		t.Fatalf("logs should name the credential by label:\n%s", logs)
	}
}

func TestTransportObserverCountsNetUnits(t *testing.T) {
	e := newTrEnv(t, nil)
	var mu sync.Mutex
	var net int64
	ctx := quota.ContextWithChargeFunc(context.Background(), func(res *quota.Reservation, refund bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, u := range res.Usage {
			if refund {
				net -= u.Cost
			} else {
				net += u.Cost
			}
		}
	})
	e.srv.Inject(ytsim.Fault{Status: 503})
	for range 3 {
		if _, _, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.do(ctx, "GET", "http://127.0.0.1:1/youtube/v3/videos?key="+trKey, nil); err == nil {
		t.Fatal("want a dial error")
	}
	if net != 4 || e.used("units") != 4 {
		t.Fatalf("observer net = %d, used = %d; want 4 and 4", net, e.used("units"))
	}
}

func TestNewTransportPanicsOnNil(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("want a panic")
		}
	}()
	quota.NewTransport(nil, quota.PricerFunc(func(*http.Request) (quota.Charge, error) { return quota.Units("u", 1), nil }))
}

// trWrapped is a base RoundTripper that is not an *http.Transport: the
// Transport cannot trace it and judges from its errors alone.
type trWrapped struct {
	rt  http.RoundTripper
	err func(*http.Request) error // when set, fail with this error instead
}

func (w trWrapped) RoundTrip(req *http.Request) (*http.Response, error) {
	if w.err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, w.err(req)
	}
	return w.rt.RoundTrip(req)
}

func TestTransportOptions(t *testing.T) {
	ctx := context.Background()
	t.Run("no classifier", func(t *testing.T) {
		e := newTrEnv(t, []ytsim.Option{ytsim.WithLimit("units", 0)}, quota.WithClassifier(nil))
		resp, b, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil)
		if err != nil || resp.StatusCode != 403 || !strings.Contains(string(b), "quotaExceeded") {
			t.Fatalf("want the 403 back unread, got %v %v", resp, err)
		}
		if us, _ := e.lim.Status(ctx, quota.Credential{Secret: trKey, Owner: trOwner}); !us[0].ExhaustedUntil.IsZero() {
			t.Fatalf("budget marked spent without a classifier: %+v", us[0])
		}
	})
	t.Run("custom classifier", func(t *testing.T) {
		var saw []byte
		c := trClassifierFunc(func(req *http.Request, resp *http.Response, body []byte) quota.Verdict {
			saw = body
			return quota.Verdict{Transient: resp.StatusCode == 418}
		})
		e := newTrEnv(t, nil, quota.WithClassifier(c))
		e.srv.Inject(ytsim.Fault{Status: 418, Reason: "teapot"})
		resp, _, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil)
		if err != nil || resp.StatusCode != 200 || len(e.waits()) != 1 || !strings.Contains(string(saw), "teapot") {
			t.Fatalf("resp %v err %v waits %v body %q", resp, err, e.waits(), saw)
		}
		e.agree()
	})
	t.Run("max retry-after and constant backoff", func(t *testing.T) {
		e := newTrEnv(t, nil,
			quota.WithMaxRetryAfter(time.Minute),
			quota.WithRetries(4, time.Minute),
			quota.WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(7 * time.Second) }))
		e.srv.Inject(ytsim.Fault{Status: 429, RetryAfter: 30 * time.Second}, ytsim.Fault{Status: 502})
		resp, _, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("resp %v err %v", resp, err)
		}
		if len(e.waits()) != 2 || e.waits()[0] != 30*time.Second || e.waits()[1] != 7*time.Second {
			t.Fatalf("waits = %v, want [30s 7s]", e.waits())
		}
		e.agree()
	})
	t.Run("retry-after as a date", func(t *testing.T) {
		e := newTrEnv(t, nil)
		at := e.clk.Now().Add(4 * time.Second).UTC().Format(http.TimeFormat)
		// ytsim sets seconds; a wrapping base rewrites the header to a date.
		base := trRoundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err == nil && resp.Header.Get("Retry-After") != "" {
				resp.Header.Set("Retry-After", at)
			}
			return resp, err
		})
		e.client.Transport = quota.NewTransport(e.lim, e.table, quota.WithBase(base), quota.WithRetryClock(e.clk, e.clk.NewTimer))
		e.srv.Inject(ytsim.Fault{Status: 429, RetryAfter: time.Second})
		if resp, _, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("resp %v err %v", resp, err)
		}
		if len(e.waits()) != 1 || e.waits()[0] < 4*time.Second {
			t.Fatalf("waits = %v, want one of at least 4s", e.waits())
		}
	})
	t.Run("untraced base: dial errors refunded", func(t *testing.T) {
		e := newTrEnv(t, nil, quota.WithBase(trWrapped{rt: http.DefaultTransport}))
		if _, _, err := e.do(ctx, "GET", "http://127.0.0.1:1/youtube/v3/videos?key="+trKey, nil); err == nil {
			t.Fatal("want a dial error")
		}
		if got := e.used("units"); got != 0 {
			t.Fatalf("used = %d, want 0", got)
		}
		if resp, _, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("resp %v err %v", resp, err)
		}
		e.agree()
	})
	t.Run("untraced base: other errors charged and scrubbed", func(t *testing.T) {
		leaky := trWrapped{err: func(req *http.Request) error {
			return errors.New("proxy failed for " + req.URL.String()) // names the key
		}}
		e := newTrEnv(t, nil, quota.WithBase(leaky))
		_, err := e.client.Transport.RoundTrip(trRequest(t, e.url("/youtube/v3/videos", "id", "v")))
		if err == nil || strings.Contains(err.Error(), trKey) || !strings.Contains(err.Error(), "<redacted>") {
			t.Fatalf("err = %v, want the key redacted", err)
		}
		if errors.Unwrap(err) == nil {
			t.Fatal("the scrubbed error should still wrap the cause")
		}
		if got := e.used("units"); got != 1 {
			t.Fatalf("used = %d, want 1: the request may have reached the upstream", got)
		}
	})
}

type trClassifierFunc func(*http.Request, *http.Response, []byte) quota.Verdict

func (f trClassifierFunc) Classify(req *http.Request, resp *http.Response, body []byte) quota.Verdict {
	return f(req, resp, body)
}

type trRoundTripFunc func(*http.Request) (*http.Response, error)

func (f trRoundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func trRequest(t *testing.T, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
