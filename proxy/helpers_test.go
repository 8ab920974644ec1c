package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/proxy"
	"github.com/quotactl/quotactl/quota"
)

// t0 is the fake clock's start: 2026-03-10 12:00 UTC.
var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// demoTable is a small table with a sliding hour of 5 units, in refusal
// shape refusal ("" for the default).
func demoTable(t testing.TB, refusal string) *costs.Table {
	t.Helper()
	tb, err := costs.New(costs.Spec{
		API: "demo", Refusal: refusal,
		Budgets: []quota.Budget{{Name: "units", Limit: 5, Window: quota.Sliding(time.Hour)}},
		Methods: []costs.Method{
			{Name: "items.list", Routes: []string{"GET /v1/items"}, Cost: map[string]int64{"units": 1}},
			{Name: "items.insert", Routes: []string{"POST /v1/items"}, Cost: map[string]int64{"units": 2}},
			{Name: "stream", Routes: []string{"GET /v1/stream"}, Cost: map[string]int64{"units": 1}},
		},
		Hosts: []string{"api.example.com"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// counting is an upstream that counts the requests it receives and
// records the last one's credential headers and query.
type counting struct {
	*httptest.Server
	n         atomic.Int64
	lastQuery atomic.Value // string
	lastAuth  atomic.Value // string
}

func newCounting(t testing.TB, h http.HandlerFunc) *counting {
	c := &counting{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		c.lastQuery.Store(r.URL.RawQuery)
		c.lastAuth.Store(r.Header.Get("Authorization"))
		if h != nil {
			h(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"items":[]}`)
	}))
	t.Cleanup(c.Close)
	return c
}

type env struct {
	proxy   *proxy.Proxy
	url     string
	limiter *quota.Limiter
	clock   *testkit.Clock
	logs    *testkit.Buffer
}

// start builds a proxy over table in front of upstream, with a memory
// store and a fake clock, served by httptest; edit changes the config.
func start(t testing.TB, table *costs.Table, upstream string, edit func(*proxy.Config)) *env {
	t.Helper()
	e := &env{clock: testkit.NewClock(t0), logs: &testkit.Buffer{}}
	lim, err := quota.New(quota.NewMemoryStore(), table.API, table.Budgets, quota.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	e.limiter = lim
	cfg := proxy.Config{
		Upstream: upstream, Table: table, Limiter: lim, Owner: "team",
		Logger:           slog.New(slog.NewTextHandler(e.logs, nil)),
		TransportOptions: []quota.TransportOption{quota.WithRetryClock(e.clock, e.clock.NewTimer)},
	}
	if edit != nil {
		edit(&cfg)
	}
	p, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.proxy = p
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// serve serves p on a loopback listener with Serve; the returned channel
// yields Serve's result once ctx ends.
func serve(t testing.TB, ctx context.Context, p *proxy.Proxy) (string, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), done
}

type reply struct {
	status int
	header http.Header
	body   string
}

func do(t testing.TB, method, url string, body io.Reader, header ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func get(t testing.TB, url string, header ...string) reply {
	t.Helper()
	return do(t, http.MethodGet, url, nil, header...)
}

// problemOf decodes a problem document.
func problemOf(t testing.TB, r reply) map[string]any {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json (status %d, body %s)", ct, r.status, r.body)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
	return m
}

func used(t testing.TB, lim *quota.Limiter, owner, budget string) int64 {
	t.Helper()
	us, err := lim.StatusOf(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if u.Budget == budget {
			return u.Used
		}
	}
	t.Fatalf("no budget %q in %+v", budget, us)
	return 0
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
