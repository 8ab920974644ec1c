package ghsim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/ghsim"
	"github.com/quotactl/quotactl/internal/testkit"
)

var t0 = time.Date(2026, 11, 28, 9, 30, 0, 250_000_000, time.UTC) // mid-second on purpose

type reply struct {
	code   int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	return m
}

func do(t *testing.T, s *ghsim.Server, method, path, tok, body string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
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
	return reply{resp.StatusCode, resp.Header, b}
}

// wantHeaders checks the five x-ratelimit fields exactly.
func wantHeaders(t *testing.T, h http.Header, limit, remaining, used int64, reset time.Time, resource string) {
	t.Helper()
	want := map[string]string{
		"X-Ratelimit-Limit": strconv.FormatInt(limit, 10), "X-Ratelimit-Remaining": strconv.FormatInt(remaining, 10),
		"X-Ratelimit-Used": strconv.FormatInt(used, 10), "X-Ratelimit-Reset": strconv.FormatInt(reset.Unix(), 10),
		"X-Ratelimit-Resource": resource,
	}
	for k, v := range want {
		if got := h.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

func TestCoreHeadersWindowAndPrimary403(t *testing.T) {
	clk := testkit.NewClock(t0)
	s := ghsim.New(ghsim.WithClock(clk.Now), ghsim.WithLimit(ghsim.Core, 3), ghsim.WithUser("octocat", 583231, "tok"))
	defer s.Close()
	reset := time.Unix(t0.Add(time.Hour).Unix()+1, 0) // the first request's time plus an hour, rounded up to a whole second
	for i := int64(1); i <= 3; i++ {
		r := do(t, s, "GET", "/repos/octo/hello/issues", "tok", "")
		if r.code != 200 {
			t.Fatalf("call %d: %d %s", i, r.code, r.body)
		}
		wantHeaders(t, r.header, 3, 3-i, i, reset, "core")
		clk.Add(10 * time.Minute)
	}
	r := do(t, s, "GET", "/repos/octo/hello", "tok", "")
	if r.code != 403 {
		t.Fatalf("4th call: %d, want 403", r.code)
	}
	wantHeaders(t, r.header, 3, 0, 3, reset, "core")
	m := r.json(t)
	if msg, _ := m["message"].(string); !strings.HasPrefix(msg, "API rate limit exceeded for user ID 583231.") ||
		m["documentation_url"] != "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api" || m["status"] != "403" {
		t.Fatalf("body %s", r.body)
	}
	if s.PrimaryErrors() != 1 || s.Served() != 3 || s.Requests() != 4 || s.Used("tok", ghsim.Core) != 3 {
		t.Fatalf("primary %d served %d requests %d used %d", s.PrimaryErrors(), s.Served(), s.Requests(), s.Used("tok", ghsim.Core))
	}
	// One second before the reset: still refused; at the reset, a new window
	// from that request.
	clk.Set(reset.Add(-time.Second))
	if r := do(t, s, "GET", "/user", "tok", ""); r.code != 403 {
		t.Fatalf("before reset: %d", r.code)
	}
	clk.Set(reset)
	r = do(t, s, "GET", "/user", "tok", "")
	if r.code != 200 {
		t.Fatalf("at reset: %d", r.code)
	}
	wantHeaders(t, r.header, 3, 2, 1, reset.Add(time.Hour), "core")
	if s.Spent("tok", ghsim.Core) != 4 {
		t.Fatalf("spent %d, want 4", s.Spent("tok", ghsim.Core))
	}
}

func TestPrimary429AndUnauthenticated(t *testing.T) {
	clk := testkit.NewClock(t0)
	s := ghsim.New(ghsim.WithClock(clk.Now), ghsim.WithLimit(ghsim.Core, 1), ghsim.WithPrimaryStatus(429))
	defer s.Close()
	do(t, s, "GET", "/user", "a", "")
	r := do(t, s, "GET", "/user", "a", "")
	if r.code != 429 || r.header.Get("X-Ratelimit-Remaining") != "0" || r.json(t)["status"] != "429" {
		t.Fatalf("%d %v %s", r.code, r.header, r.body)
	}
	// No token: 60 an hour per client IP, GitHub's message for an IP.
	for i := range 60 {
		if r := do(t, s, "GET", "/repos/a/b", "", ""); r.code != 200 || r.header.Get("X-Ratelimit-Limit") != "60" {
			t.Fatalf("anonymous call %d: %d %v", i, r.code, r.header)
		}
	}
	r = do(t, s, "GET", "/repos/a/b", "", "")
	if msg, _ := r.json(t)["message"].(string); r.code != 429 || !strings.HasPrefix(msg, "API rate limit exceeded for 127.0.0.1. (But here's the good news") {
		t.Fatalf("%d %s", r.code, r.body)
	}
}

// Tokens of one user share its quota; another user has its own, and an
// owner's limit (Enterprise Cloud, Actions) is its own.
func TestTokensOfOneUserShare(t *testing.T) {
	clk := testkit.NewClock(t0)
	s := ghsim.New(ghsim.WithClock(clk.Now),
		ghsim.WithUser("alice", 1, "pat-1", "oauth-1", "app-user-1"),
		ghsim.WithUser("ci", 2, "actions"),
		ghsim.WithOwnerLimit("ci", ghsim.Core, ghsim.ActionsTokenCore),
		ghsim.WithOwnerLimit("ent", ghsim.Core, ghsim.EnterpriseCloudCore),
		ghsim.WithUser("ent", 3, "ent-app"))
	defer s.Close()
	for i, tok := range []string{"pat-1", "oauth-1", "app-user-1", "pat-1"} {
		r := do(t, s, "GET", "/user/repos", tok, "")
		if r.header.Get("X-Ratelimit-Used") != strconv.Itoa(i+1) || r.header.Get("X-Ratelimit-Limit") != "5000" {
			t.Fatalf("%s: %v", tok, r.header)
		}
	}
	if s.Used("oauth-1", ghsim.Core) != 4 || s.Owner("app-user-1") != "alice" || s.Owner("stranger") != "stranger" {
		t.Fatalf("used %d", s.Used("oauth-1", ghsim.Core))
	}
	if r := do(t, s, "GET", "/user", "actions", ""); r.header.Get("X-Ratelimit-Limit") != "1000" || r.header.Get("X-Ratelimit-Used") != "1" {
		t.Fatalf("actions: %v", r.header)
	}
	if r := do(t, s, "GET", "/user", "ent-app", ""); r.header.Get("X-Ratelimit-Limit") != "15000" {
		t.Fatalf("enterprise: %v", r.header)
	}
	// An unmetered client of alice's spends her quota too.
	if !s.Spend("pat-1", ghsim.Core, 4990) || s.Spend("oauth-1", ghsim.Core, 7) {
		t.Fatal("Spend: want 4990 to fit and 7 more not")
	}
	r := do(t, s, "GET", "/user", "app-user-1", "")
	wantHeaders(t, r.header, 5000, 5, 4995, time.Unix(t0.Add(time.Hour).Unix()+1, 0), "core")
}

func TestSearchAndCodeSearch(t *testing.T) {
	clk := testkit.NewClock(t0)
	s := ghsim.New(ghsim.WithClock(clk.Now))
	defer s.Close()
	for i := range 30 {
		r := do(t, s, "GET", "/search/issues?q=bug", "t", "")
		if r.code != 200 || r.header.Get("X-Ratelimit-Resource") != "search" || r.header.Get("X-Ratelimit-Limit") != "30" {
			t.Fatalf("search %d: %d %v", i, r.code, r.header)
		}
	}
	r := do(t, s, "GET", "/search/repositories?q=go", "t", "")
	wantHeaders(t, r.header, 30, 0, 30, time.Unix(t0.Add(time.Minute).Unix()+1, 0), "search")
	if r.code != 403 {
		t.Fatalf("31st search: %d", r.code)
	}
	// Code search is a resource of its own, 10 a minute; core is untouched.
	for i := range 10 {
		if r := do(t, s, "GET", "/search/code?q=x", "t", ""); r.code != 200 || r.header.Get("X-Ratelimit-Resource") != "code_search" {
			t.Fatalf("code search %d: %d %v", i, r.code, r.header)
		}
	}
	if r := do(t, s, "GET", "/search/code?q=x", "t", ""); r.code != 403 || r.header.Get("X-Ratelimit-Remaining") != "0" {
		t.Fatalf("11th code search: %d", r.code)
	}
	if s.Used("t", ghsim.Core) != 0 || s.Used("t", ghsim.Search) != 30 || s.Used("t", ghsim.CodeSearch) != 10 {
		t.Fatal("wrong resources charged")
	}
	clk.Add(61 * time.Second)
	if r := do(t, s, "GET", "/search/code?q=x", "t", ""); r.code != 200 || r.header.Get("X-Ratelimit-Used") != "1" {
		t.Fatalf("after a minute: %d %v", r.code, r.header)
	}
}

func TestRateLimitEndpoint(t *testing.T) {
	clk := testkit.NewClock(t0)
	s := ghsim.New(ghsim.WithClock(clk.Now))
	defer s.Close()
	do(t, s, "GET", "/repos/a/b", "t", "")
	do(t, s, "GET", "/search/issues?q=x", "t", "")
	for range 2 {
		r := do(t, s, "GET", "/rate_limit", "t", "")
		var doc ghsim.RateLimitDoc
		if err := json.Unmarshal(r.body, &doc); err != nil || r.code != 200 {
			t.Fatalf("%d %s", r.code, r.body)
		}
		core := ghsim.RateResource{Limit: 5000, Used: 1, Remaining: 4999, Reset: t0.Add(time.Hour).Unix() + 1}
		if doc.Resources["core"] != core || doc.Rate != core {
			t.Fatalf("core %+v rate %+v, want %+v (GET /rate_limit counts against no primary limit)", doc.Resources["core"], doc.Rate, core)
		}
		if doc.Resources["search"].Used != 1 || doc.Resources["code_search"].Limit != 10 || doc.Resources["graphql"].Remaining != 5000 {
			t.Fatalf("resources %+v", doc.Resources)
		}
		wantHeaders(t, r.header, 5000, 4999, 1, t0.Add(time.Hour+time.Second).Truncate(time.Second), "core")
	}
}

func TestSecondaryLimitPerEndpoint(t *testing.T) {
	clk := testkit.NewClock(t0)
	s := ghsim.New(ghsim.WithClock(clk.Now), ghsim.WithSecondaryLimits(20, 10))
	defer s.Close()
	// 4 POSTs (5 points each) fill the endpoint's 20 points.
	for i := range 4 {
		if r := do(t, s, "POST", "/repos/a/b/issues", "t", "{}"); r.code != 201 {
			t.Fatalf("post %d: %d", i, r.code)
		}
	}
	clk.Add(20 * time.Second)
	r := do(t, s, "GET", "/repos/a/b/issues", "t", "")
	if r.code != 403 || r.header.Get("Retry-After") != "40" {
		t.Fatalf("GET after 20 points: %d retry-after %q", r.code, r.header.Get("Retry-After"))
	}
	m := r.json(t)
	if msg, _ := m["message"].(string); !strings.HasPrefix(msg, "You have exceeded a secondary rate limit.") ||
		!strings.HasSuffix(m["documentation_url"].(string), "#about-secondary-rate-limits") {
		t.Fatalf("body %s", r.body)
	}
	// The primary headers still say where core stands: not spent.
	if r.header.Get("X-Ratelimit-Remaining") != "4996" || r.header.Get("X-Ratelimit-Resource") != "core" {
		t.Fatalf("headers %v", r.header)
	}
	// Another endpoint, and another user, have their own points.
	if r := do(t, s, "GET", "/repos/a/b/pulls", "t", ""); r.code != 200 {
		t.Fatalf("other endpoint: %d", r.code)
	}
	if r := do(t, s, "GET", "/repos/a/b/issues", "u", ""); r.code != 200 {
		t.Fatalf("other user: %d", r.code)
	}
	if s.SecondaryErrors() != 1 || s.Used("t", ghsim.Core) != 5 {
		t.Fatalf("secondary errors %d, core used %d (a refused request is not counted)", s.SecondaryErrors(), s.Used("t", ghsim.Core))
	}
	clk.Add(40 * time.Second)
	if r := do(t, s, "GET", "/repos/a/b/issues", "t", ""); r.code != 200 {
		t.Fatalf("after retry-after: %d", r.code)
	}
	// 429 when asked; GraphQL: a mutation costs 5 of its 10 points.
	s2 := ghsim.New(ghsim.WithClock(clk.Now), ghsim.WithSecondaryLimits(20, 10), ghsim.WithSecondaryStatus(429))
	defer s2.Close()
	mut := `{"query":"mutation { addStar(input:{starrableId:\"x\"}) { clientMutationId } }"}`
	for i := range 2 {
		if r := do(t, s2, "POST", "/graphql", "t", mut); r.code != 200 {
			t.Fatalf("mutation %d: %d %s", i, r.code, r.body)
		}
	}
	r = do(t, s2, "POST", "/graphql", "t", `{"query":"{ viewer { login } }"}`)
	if r.code != 429 || r.header.Get("Retry-After") != "60" || r.header.Get("X-Ratelimit-Resource") != "graphql" {
		t.Fatalf("graphql over its secondary limit: %d %v", r.code, r.header)
	}
}

func TestGraphQLPoints(t *testing.T) {
	clk := testkit.NewClock(t0)
	s := ghsim.New(ghsim.WithClock(clk.Now), ghsim.WithLimit(ghsim.GraphQL, 60))
	defer s.Close()
	// GitHub's own example: 5,101 requests, 51 points.
	q := `query { viewer { login repositories(first: 100) { edges { node { id issues(first: 50) { edges { node { id labels(first: 60) { edges { node { id name } } } } } } } } } } }`
	body, _ := json.Marshal(map[string]any{"query": q})
	r := do(t, s, "POST", "/graphql", "t", string(body))
	if r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	wantHeaders(t, r.header, 60, 9, 51, time.Unix(t0.Add(time.Hour).Unix()+1, 0), "graphql")
	// 51 more do not fit: 200 with a RATE_LIMITED error, as GitHub documents.
	r = do(t, s, "POST", "/graphql", "t", string(body))
	var e struct {
		Errors []struct{ Type, Message string }
	}
	if err := json.Unmarshal(r.body, &e); err != nil || r.code != 200 || len(e.Errors) != 1 || e.Errors[0].Type != "RATE_LIMITED" ||
		!strings.HasPrefix(e.Errors[0].Message, "API rate limit exceeded for user ID") {
		t.Fatalf("%d %s", r.code, r.body)
	}
	if s.PrimaryErrors() != 1 || s.Used("t", ghsim.GraphQL) != 51 || s.Used("t", ghsim.Core) != 0 {
		t.Fatal("counters")
	}
	// A cheap query still fits (1 point, the minimum).
	if r := do(t, s, "POST", "/graphql", "t", `{"query":"{ viewer { login } }"}`); r.header.Get("X-Ratelimit-Used") != "52" {
		t.Fatalf("%v", r.header)
	}
	if r := do(t, s, "POST", "/graphql", "t", `not json`); r.code != 400 {
		t.Fatalf("bad body: %d", r.code)
	}
}

func TestQueryCost(t *testing.T) {
	for _, c := range []struct {
		q    string
		vars map[string]any
		want int64
	}{
		{`{ viewer { login } }`, nil, 1},
		{`query { viewer { repositories(first: 50) { edges { node { name issues(first: 10) { totalCount } } } } } }`, nil, 1}, // 1+50 = 51 requests -> 0.51 -> 1
		{`query($n: Int!) { viewer { repositories(first: $n) { nodes { issues(last: 100) { nodes { labels(first: 100) { nodes { id } } } } } } } }`,
			map[string]any{"n": float64(100)}, 101}, // 1 + 100 + 10,000 = 10,101
		{`# comment { {
		  query { search(query: "a { b", type: ISSUE, first: 100) { nodes { __typename } } }`, nil, 1},
		{`{ a(first: 100) { b(first: 100) { c(first: 100) { d(first: 100) { id } } } } }`, nil, 10101}, // 1+100+10^4+10^6 = 1,010,101
		{`}}}{{{ (((`, nil, 1},
		{``, nil, 1},
	} {
		if got := ghsim.QueryCost(c.q, c.vars); got != c.want {
			t.Errorf("QueryCost(%q) = %d, want %d", c.q, got, c.want)
		}
	}
}

func FuzzQueryCost(f *testing.F) {
	f.Add(`query { viewer { repositories(first: 100) { nodes { id } } } }`)
	f.Add(`"""x""" { a(first: $v) { b } }`)
	f.Fuzz(func(t *testing.T, q string) {
		if c := ghsim.QueryCost(q, map[string]any{"v": float64(3)}); c < 1 {
			t.Fatalf("cost %d", c)
		}
	})
}

func TestHandler(t *testing.T) {
	h := ghsim.NewHandler(ghsim.WithUser("u", 7, "t"))
	if h.URL() != "" || h.Host() != "" {
		t.Fatal("an unstarted server has no URL")
	}
	h.Close()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("DELETE", "/repos/a/b", nil)
	req.Header.Set("Authorization", "token t")
	h.ServeHTTP(rec, req)
	if rec.Code != 204 || rec.Header().Get("X-Ratelimit-Used") != "1" || h.Used("t", ghsim.Core) != 1 {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
}

// Many clients of one user at once: the server never serves more than the
// user's limit, and its counters agree.
func TestConcurrentTokensOfOneUser(t *testing.T) {
	clk := testkit.NewClock(t0)
	s := ghsim.New(ghsim.WithClock(clk.Now), ghsim.WithLimit(ghsim.Core, 100), ghsim.WithSecondaryLimits(0, 0),
		ghsim.WithUser("team", 9, "a", "b", "c", "d"))
	defer s.Close()
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := string(rune('a' + i%4))
			for range 20 {
				req, _ := http.NewRequest("GET", s.URL()+"/user", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					ok.Add(1)
				case 403:
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 100 || refused.Load() != 60 || s.Served() != 100 || s.PrimaryErrors() != 60 || s.Used("c", ghsim.Core) != 100 {
		t.Fatalf("ok %d refused %d served %d errors %d used %d", ok.Load(), refused.Load(), s.Served(), s.PrimaryErrors(), s.Used("c", ghsim.Core))
	}
}

// Secondary points by verb: GET, HEAD, OPTIONS 1; POST, PATCH, PUT,
// DELETE 5. A GraphQL cost of one's own replaces the formula.
func TestSecondaryPointsByVerbAndGraphQLCost(t *testing.T) {
	for _, c := range []struct {
		verb   string
		points int64
	}{{"GET", 1}, {"HEAD", 1}, {"OPTIONS", 1}, {"POST", 5}, {"PATCH", 5}, {"PUT", 5}, {"DELETE", 5}} {
		clk := testkit.NewClock(t0)
		s := ghsim.New(ghsim.WithClock(clk.Now), ghsim.WithSecondaryLimits(10, 0))
		n := int64(0)
		for do(t, s, c.verb, "/repos/a/b/x", "t", "").code < 400 {
			n++
		}
		s.Close()
		if n != 10/c.points {
			t.Errorf("%s: %d requests fit 10 points, want %d", c.verb, n, 10/c.points)
		}
	}
	s := ghsim.New(ghsim.WithGraphQLCost(func(q string, v map[string]any) int64 { return int64(len(q)) }))
	defer s.Close()
	if r := do(t, s, "POST", "/graphql", "t", `{"query":"{ a }"}`); r.header.Get("X-Ratelimit-Used") != "5" {
		t.Fatalf("%v", r.header)
	}
}
