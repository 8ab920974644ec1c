package proxy_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/anthropicsim"
	"github.com/quotactl/quotactl/internal/ytsim"
	"github.com/quotactl/quotactl/proxy"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// The YouTube table prices and charges each method per its buckets,
// whatever hosts the table lists: the proxy prices its upstream as the
// API host.
func TestPricedAndChargedPerTable(t *testing.T) {
	sim := ytsim.New()
	defer sim.Close()
	table, err := costs.Builtin("youtube")
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, table, sim.URL(), nil)
	for _, target := range []string{
		"/youtube/v3/videos?part=snippet&chart=mostPopular&regionCode=US&key=K1",
		"/youtube/v3/search?part=snippet&q=go&key=K1",
		"/youtube/v3/videos?part=snippet&chart=mostPopular&regionCode=FR&key=K1",
	} {
		if r := get(t, e.url+target); r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", target, r.status, r.body)
		}
	}
	if got := used(t, e.limiter, "team", "units"); got != 2 {
		t.Errorf("units used %d, want 2 (two videos.list)", got)
	}
	if got := used(t, e.limiter, "team", "search"); got != 1 {
		t.Errorf("search used %d, want 1", got)
	}
	if sim.Used("K1", "units") != 2 || sim.Used("K1", "search") != 1 {
		t.Errorf("upstream charged units %d search %d, want 2 and 1", sim.Used("K1", "units"), sim.Used("K1", "search"))
	}
}

// A spent budget is refused before the upstream, with 429, Retry-After in
// whole seconds rounded up, and a problem document naming the budget.
func TestRefusedBeforeUpstream(t *testing.T) {
	up := newCounting(t, nil)
	e := start(t, demoTable(t, ""), up.URL, nil)
	for i := range 5 {
		if r := get(t, e.url+"/v1/items", "Authorization", "Bearer tok"); r.status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
		if i == 0 {
			e.clock.Add(1500e6) // the first entry frees 1.5s before the others
		}
	}
	r := get(t, e.url+"/v1/items", "Authorization", "Bearer tok")
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("6th call: %d %s, want 429", r.status, r.body)
	}
	if up.n.Load() != 5 {
		t.Fatalf("upstream received %d requests, want 5: a refused call reached it", up.n.Load())
	}
	// The first entry frees at t0+1h, 1h-1.5s from now: 3599 rounded up.
	if ra := r.header.Get("Retry-After"); ra != "3599" {
		t.Errorf("Retry-After %q, want 3599", ra)
	}
	pb := problemOf(t, r)
	want := map[string]any{
		"type": proxy.ProblemBase + "budget-exhausted", "title": "Budget exhausted", "status": 429.0,
		"api": "demo", "budget": "demo/units", "used": 5.0, "limit": 5.0, "cost": 1.0, "retry_after": 3599.0,
		"retry_at": "2026-03-10T13:00:00Z",
	}
	for k, v := range want {
		if pb[k] != v {
			t.Errorf("problem %s = %v, want %v", k, pb[k], v)
		}
	}
	if d, _ := pb["detail"].(string); !contains(d, "demo/units", "5 of 5", "3599s") {
		t.Errorf("detail %q", d)
	}
	if !contains(e.logs.String(), "proxy: refused", "budget=demo/units", "used=5", "limit=5", "retry_after=3599") {
		t.Errorf("no refusal log line: %s", e.logs.String())
	}
	if n := strings.Count(e.logs.String(), "proxy: refused"); n != 1 {
		t.Errorf("%d refusal lines, want 1", n)
	}
}

// A table declaring refusal: google answers as YouTube does, so Google's
// client libraries read quotaExceeded and do not retry.
func TestGoogleRefusalShape(t *testing.T) {
	sim := ytsim.New()
	defer sim.Close()
	table, err := costs.Builtin("youtube")
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, table, sim.URL(), nil)
	// search.list has its own bucket of 100 calls.
	for i := range 100 {
		if r := get(t, e.url+"/youtube/v3/search?part=snippet&q=x&key=K1"); r.status != 200 {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
	r := get(t, e.url+"/youtube/v3/search?part=snippet&q=x&key=K1")
	if r.status != http.StatusForbidden || r.header.Get("Retry-After") == "" {
		t.Fatalf("101st search: %d (Retry-After %q) %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	var body struct {
		Error struct {
			Code    int
			Message string
			Errors  []struct{ Domain, Reason string }
		}
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatal(err)
	}
	if body.Error.Code != 403 || len(body.Error.Errors) != 1 || body.Error.Errors[0].Reason != "quotaExceeded" ||
		body.Error.Errors[0].Domain != "youtube.quota" || !strings.Contains(body.Error.Message, "youtube/search") {
		t.Errorf("body %s", r.body)
	}
	if sim.QuotaExceeded() != 0 || sim.Received("K1", "search") != 100 {
		t.Errorf("upstream refused %d, received %d searches: want 0 and 100", sim.QuotaExceeded(), sim.Received("K1", "search"))
	}
}

// A table declaring refusal: github answers as GitHub does for a spent
// primary rate limit.
func TestGitHubRefusalShape(t *testing.T) {
	up := newCounting(t, nil)
	e := start(t, demoTable(t, costs.RefusalGitHub), up.URL, nil)
	for range 5 {
		get(t, e.url+"/v1/items", "Authorization", "Bearer tok")
	}
	r := get(t, e.url+"/v1/items", "Authorization", "Bearer tok")
	h := r.header
	if r.status != http.StatusForbidden || h.Get("X-Ratelimit-Remaining") != "0" || h.Get("X-Ratelimit-Limit") != "5" ||
		h.Get("X-Ratelimit-Reset") != "1773147600" { // t0 + 1h
		t.Fatalf("%d %v %s", r.status, h, r.body)
	}
	var body map[string]string
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || !strings.HasPrefix(body["message"], "API rate limit exceeded") || body["documentation_url"] == "" {
		t.Errorf("body %s (%v)", r.body, err)
	}
	if up.n.Load() != 5 {
		t.Errorf("upstream received %d, want 5", up.n.Load())
	}
}

// The upstream's own 403 quotaExceeded (the meter did not know the
// project's quota was spent) marks the budget spent: the next call is
// refused by the proxy and never reaches the upstream.
func TestUpstreamQuotaExceededMarksSpent(t *testing.T) {
	sim := ytsim.New(ytsim.WithLimit("units", 2))
	defer sim.Close()
	table, _ := costs.Builtin("youtube")
	e := start(t, table, sim.URL(), nil)
	const target = "/youtube/v3/videos?part=id&id=abc&key=K1"
	for range 2 {
		if r := get(t, e.url+target); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	r := get(t, e.url+target)
	if r.status != http.StatusForbidden || !strings.Contains(r.body, "quotaExceeded") {
		t.Fatalf("3rd call: %d %s", r.status, r.body)
	}
	if sim.QuotaExceeded() != 1 {
		t.Fatalf("upstream refused %d calls, want 1", sim.QuotaExceeded())
	}
	before := sim.Requests()
	r = get(t, e.url+target)
	if r.status != http.StatusForbidden || sim.Requests() != before {
		t.Fatalf("4th call: %d, upstream requests %d -> %d: want a refusal that never reaches it", r.status, before, sim.Requests())
	}
}

// Server-sent events pass through unbuffered: the client reads the first
// event before the upstream writes the second.
func TestStreamPassesThroughUnbuffered(t *testing.T) {
	firstRead := make(chan struct{})
	up := newCounting(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-firstRead:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: two\n\n")
	})
	e := start(t, demoTable(t, ""), up.URL, nil)
	req, _ := http.NewRequest("GET", e.url+"/v1/stream", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event %q %v", line, err)
	}
	close(firstRead)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: two\n\n" {
		t.Fatalf("rest %q %v", rest, err)
	}
	if got := used(t, e.limiter, "team", "units"); got != 1 {
		t.Errorf("used %d, want 1", got)
	}
}

// With a held credential, clients carry none: the proxy adds it the way
// the table says (YouTube: the key parameter; others: Bearer), and refuses
// a request that carries another.
func TestHeldCredential(t *testing.T) {
	const key = "AIzaSy-held-secret-0001"
	t.Run("key parameter", func(t *testing.T) {
		sim := ytsim.New(ytsim.WithKeys(key))
		defer sim.Close()
		table, _ := costs.Builtin("youtube")
		e := start(t, table, sim.URL(), func(c *proxy.Config) { c.Credential = key })
		if r := get(t, e.url+"/youtube/v3/videos?part=id&id=a"); r.status != 200 {
			t.Fatalf("no key: %d %s", r.status, r.body)
		}
		if r := get(t, e.url+"/youtube/v3/videos?part=id&id=a&key="+key); r.status != 200 {
			t.Fatalf("the held key: %d %s", r.status, r.body)
		}
		if sim.Received(key, "units") != 2 {
			t.Fatalf("upstream received %d calls with the held key, want 2", sim.Received(key, "units"))
		}
		before := sim.Requests()
		const foreign = "AIzaSy-foreign-0002"
		for _, h := range [][]string{nil, {"X-Goog-Api-Key", foreign}, {"Authorization", "Bearer " + foreign}} {
			target := "/youtube/v3/videos?part=id&id=a"
			if h == nil {
				target += "&key=" + foreign
			}
			r := get(t, e.url+target, h...)
			pb := problemOf(t, r)
			if r.status != http.StatusForbidden || pb["type"] != proxy.ProblemBase+"foreign-credential" || strings.Contains(r.body, foreign) || strings.Contains(r.body, key) {
				t.Errorf("another key %v: %d %s", h, r.status, r.body)
			}
		}
		if sim.Requests() != before {
			t.Errorf("a request with another key reached the upstream")
		}
	})
	t.Run("x-api-key", func(t *testing.T) {
		const ant = "sk-ant-held-0003"
		sim := anthropicsim.New(anthropicsim.WithOrganization("org", ant))
		defer sim.Close()
		table, _ := costs.Builtin("anthropic")
		e := start(t, table, sim.URL(), func(c *proxy.Config) { c.Credential = ant })
		msg := `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
		if r := do(t, http.MethodPost, e.url+"/v1/messages", strings.NewReader(msg)); r.status != 200 {
			t.Fatalf("no key: %d %s", r.status, r.body)
		}
		if sim.Requests() != 1 {
			t.Fatalf("upstream received %d calls, want 1 with the held key", sim.Requests())
		}
		r := do(t, http.MethodPost, e.url+"/v1/messages", strings.NewReader(msg), "X-Api-Key", "sk-ant-foreign")
		if r.status != http.StatusForbidden || strings.Contains(r.body, ant) || sim.Requests() != 1 {
			t.Errorf("another x-api-key: %d %s; %d upstream calls", r.status, r.body, sim.Requests())
		}
	})
	t.Run("bearer", func(t *testing.T) {
		up := newCounting(t, nil)
		e := start(t, demoTable(t, ""), up.URL, func(c *proxy.Config) { c.Credential = key })
		if r := get(t, e.url+"/v1/items?a=1"); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if a := up.lastAuth.Load(); a != "Bearer "+key {
			t.Errorf("upstream Authorization %q", a)
		}
		if q := up.lastQuery.Load(); q != "a=1" {
			t.Errorf("upstream query %q", q)
		}
	})
}

// The proxy's token: required on every request, in Proxy-Authorization,
// never forwarded.
func TestToken(t *testing.T) {
	up := newCounting(t, nil)
	e := start(t, demoTable(t, ""), up.URL, func(c *proxy.Config) { c.Token = "tok-123" })
	r := get(t, e.url+"/v1/items", "Authorization", "Bearer k")
	if r.status != http.StatusUnauthorized || problemOf(t, r)["type"] != proxy.ProblemBase+"token-required" {
		t.Fatalf("no token: %d %s", r.status, r.body)
	}
	r = get(t, e.url+"/v1/items", "Authorization", "Bearer k", proxy.TokenHeader, "Bearer wrong")
	if r.status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", r.status)
	}
	r = get(t, e.url+"/v1/items", "Authorization", "Bearer k", proxy.TokenHeader, "Bearer tok-123")
	if r.status != http.StatusOK || up.n.Load() != 1 {
		t.Fatalf("token: %d, upstream %d", r.status, up.n.Load())
	}
}

// Request bodies are bounded: a declared length over the limit is refused
// before anything is charged, a streamed one when it passes the limit.
func TestBodyLimit(t *testing.T) {
	up := newCounting(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	})
	e := start(t, demoTable(t, ""), up.URL, func(c *proxy.Config) { c.MaxBody = 16 })
	r := do(t, "POST", e.url+"/v1/items", strings.NewReader(strings.Repeat("x", 17)), "Authorization", "Bearer k")
	if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(problemOf(t, r)["detail"].(string), "16 bytes") {
		t.Fatalf("17 bytes: %d %s", r.status, r.body)
	}
	if up.n.Load() != 0 || used(t, e.limiter, "team", "units") != 0 {
		t.Fatalf("an oversized body was sent or charged")
	}
	// Chunked, no length: refused when the limit is passed.
	r = do(t, "POST", e.url+"/v1/items", io.MultiReader(strings.NewReader(strings.Repeat("y", 40))), "Authorization", "Bearer k")
	if r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("streamed 40 bytes: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", e.url+"/v1/items", strings.NewReader("small"), "Authorization", "Bearer k"); r.status != 200 {
		t.Fatalf("small body: %d %s", r.status, r.body)
	}
}

// A store outage is a 503 problem, not a refusal.
func TestStoreOutageIs503(t *testing.T) {
	up := newCounting(t, nil)
	// A Redis store at an address where nothing listens: a real outage.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	client := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	defer client.Close()
	table := demoTable(t, "")
	lim, err := quota.New(redisstore.New(client, redisstore.WithPrefix("proxy-outage-test:")), table.API, table.Budgets)
	if err != nil {
		t.Fatal(err)
	}
	p, err := proxy.New(proxy.Config{Upstream: up.URL, Table: table, Limiter: lim, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	r := get(t, srv.URL+"/v1/items", "Authorization", "Bearer k")
	if r.status != http.StatusServiceUnavailable || problemOf(t, r)["type"] != proxy.ProblemBase+"store-unavailable" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if up.n.Load() != 0 {
		t.Fatal("sent while the store was down")
	}
}

// Unknown methods, bad upstream URLs and conflicting owners are clear
// errors.
func TestBadInput(t *testing.T) {
	up := newCounting(t, nil)
	e := start(t, demoTable(t, ""), up.URL, nil)
	r := get(t, e.url+"/v2/nothing", "Authorization", "Bearer k")
	if r.status != http.StatusNotFound || problemOf(t, r)["type"] != proxy.ProblemBase+"unknown-method" {
		t.Errorf("unknown method: %d %s", r.status, r.body)
	}
	r = get(t, e.url+"/v1/items")
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "carries no credential") {
		t.Errorf("no credential: %d %s", r.status, r.body)
	}
	lim, _ := quota.New(quota.NewMemoryStore(), "demo", demoTable(t, "").Budgets)
	for _, c := range []struct {
		cfg  proxy.Config
		want string
	}{
		{proxy.Config{Upstream: "", Table: demoTable(t, ""), Limiter: lim}, "no upstream"},
		{proxy.Config{Upstream: "ftp://x", Table: demoTable(t, ""), Limiter: lim}, "http or https"},
		{proxy.Config{Upstream: "http://x/base", Table: demoTable(t, ""), Limiter: lim}, "scheme and host only"},
		{proxy.Config{Upstream: "http://user:pw@x", Table: demoTable(t, ""), Limiter: lim}, "no user info"},
		{proxy.Config{Upstream: "http://x", Table: demoTable(t, ""), Limiter: lim, Owner: "a", Owners: map[string]string{"k": "b"}}, "not both"},
		{proxy.Config{Upstream: "http://x", Table: demoTable(t, ""), Limiter: lim, Owner: "bad owner"}, "owner"},
		{proxy.Config{Upstream: "http://x", Limiter: lim}, "required"},
	} {
		_, err := proxy.New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "pw") {
			t.Errorf("%+v: err %v, want one containing %q", c.cfg.Upstream, err, c.want)
		}
	}
}

// Owners maps keys to owners: each key spends its own owner's budgets.
func TestOwnersMapping(t *testing.T) {
	up := newCounting(t, nil)
	owners, err := proxy.ParseOwners("owners.txt", strings.NewReader("# key owner\nk-one proj-a\n\nk-two proj-a\nk-three proj-b\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, demoTable(t, ""), up.URL, func(c *proxy.Config) { c.Owner, c.Owners = "", owners })
	for _, k := range []string{"k-one", "k-two", "k-three"} {
		if r := get(t, e.url+"/v1/items", "Authorization", "Bearer "+k); r.status != 200 {
			t.Fatal(r.status, r.body)
		}
	}
	if used(t, e.limiter, "proj-a", "units") != 2 || used(t, e.limiter, "proj-b", "units") != 1 {
		t.Errorf("proj-a %d proj-b %d, want 2 and 1", used(t, e.limiter, "proj-a", "units"), used(t, e.limiter, "proj-b", "units"))
	}
	for _, c := range []struct{ file, want string }{
		{"k1\n", "owners.txt:1: want a credential and its owner"},
		{"k1 a\nk1 b\n", "owners.txt:2: the credential of line 1 again"},
		{"# nothing\n", "no credentials"},
		{"secret-key bad/owner\n", "owners.txt:1"},
	} {
		_, err := proxy.ParseOwners("owners.txt", strings.NewReader(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "secret-key") || strings.Contains(err.Error(), "k1") {
			t.Errorf("%q: %v, want %q", c.file, err, c.want)
		}
	}
}
