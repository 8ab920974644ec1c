package costs_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/ghsim"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
)

func TestGitHubBudgets(t *testing.T) {
	tb := builtin(t, "github")
	want := map[string]struct {
		limit  int64
		window string
	}{
		"core": {5000, "sliding:1h0m0s"}, "search": {30, "sliding:1m0s"}, "code_search": {10, "sliding:1m0s"},
		"graphql": {5000, "sliding:1h0m0s"}, "secondary": {900, "sliding:1m0s"}, "graphql_secondary": {2000, "sliding:1m0s"},
	}
	if len(tb.Budgets) != len(want) || tb.API != "github" || tb.OwnerKind() != "user" || !slices.Equal(tb.Hosts(), []string{"api.github.com"}) {
		t.Fatalf("api %q owner %q hosts %v budgets %+v", tb.API, tb.OwnerKind(), tb.Hosts(), tb.Budgets)
	}
	for _, b := range tb.Budgets {
		if w, ok := want[b.Name]; !ok || b.Limit != w.limit || b.Window.String() != w.window {
			t.Errorf("budget %s: %d %s, want %+v", b.Name, b.Limit, b.Window, w)
		}
	}
}

// Representative requests: GETs cost 1 of their resource and 1 secondary
// point, writes 1 and 5; search and code search their own resources;
// GET /rate_limit only a secondary point; GraphQL 1 point and 5 secondary.
func TestGitHubPricing(t *testing.T) {
	tb := builtin(t, "github")
	for _, c := range []struct {
		verb, url, method string
		units             map[string]int64
	}{
		{"GET", "https://api.github.com/repos/octo/hello/issues?state=open&per_page=100", "issues/list-for-repo", map[string]int64{"core": 1, "secondary": 1}},
		{"POST", "https://api.github.com/repos/octo/hello/issues", "issues/create", map[string]int64{"core": 1, "secondary": 5}},
		{"PATCH", "https://api.github.com/repos/octo/hello/pulls/7", "pulls/update", map[string]int64{"core": 1, "secondary": 5}},
		{"PUT", "https://api.github.com/repos/octo/hello/pulls/7/merge", "pulls/merge", map[string]int64{"core": 1, "secondary": 5}},
		{"GET", "https://api.github.com/repos/octo/hello/contents/docs/a/b.md", "repos/get-content", map[string]int64{"core": 1, "secondary": 1}},
		{"GET", "https://api.github.com/search/code?q=addClass+repo:jquery/jquery", "search/code", map[string]int64{"code_search": 1, "secondary": 1}},
		{"GET", "https://api.github.com/search/issues?q=is:open", "search/issues-and-pull-requests", map[string]int64{"search": 1, "secondary": 1}},
		{"GET", "https://api.github.com/search/something-new?q=x", "search/other", map[string]int64{"search": 1, "secondary": 1}},
		{"GET", "https://api.github.com/rate_limit", "rate-limit/get", map[string]int64{"secondary": 1}},
		{"POST", "https://api.github.com/graphql", "graphql", map[string]int64{"graphql": 1, "graphql_secondary": 5}},
		// Endpoints the table does not name: priced by verb.
		{"GET", "https://api.github.com/orgs/octo/teams/core/members", "rest.read", map[string]int64{"core": 1, "secondary": 1}},
		{"HEAD", "https://api.github.com/repos/octo/hello/git/refs/heads/main", "rest.read", map[string]int64{"core": 1, "secondary": 1}},
		{"DELETE", "https://api.github.com/repos/octo/hello/git/refs/heads/topic", "rest.write", map[string]int64{"core": 1, "secondary": 5}},
		{"POST", "https://api.github.com/repos/octo/hello/dispatches", "rest.write", map[string]int64{"core": 1, "secondary": 5}},
		{"PUT", "https://API.GitHub.com:443/user/starred/octo/hello", "rest.write", map[string]int64{"core": 1, "secondary": 5}},
	} {
		req, _ := http.NewRequest(c.verb, c.url, nil)
		ch, err := tb.Price(req)
		if err != nil || !reflect.DeepEqual(ch.Units, c.units) || (c.method != "rest.read" && c.method != "rest.write" && ch.Method != c.method) {
			t.Errorf("Price(%s %s) = %+v, %v; want %s %v", c.verb, c.url, ch, err, c.method, c.units)
		}
		if name, _ := tb.Resolve(c.verb, req.URL.Path); name != c.method {
			t.Errorf("Resolve(%s %s) = %q, want %s", c.verb, req.URL.Path, name, c.method)
		}
	}
	for _, u := range []string{"https://github.com/octo/hello", "https://uploads.github.com/repos/o/r/releases/1/assets", "https://api.github.com.evil.example/user"} {
		req, _ := http.NewRequest("GET", u, nil)
		if _, err := tb.Price(req); !errors.Is(err, quota.ErrForeignHost) {
			t.Errorf("Price(%s) err = %v, want ErrForeignHost", u, err)
		}
	}
}

// ghResponse sends one request to the simulator and returns the response
// with its body read.
func ghResponse(t *testing.T, s *ghsim.Server, method, path, tok, body string) (*http.Request, *http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, s.URL()+path, rd)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	// Classify the request as sent to api.github.com.
	out, _ := http.NewRequest(method, "https://api.github.com"+path, nil)
	return out, resp, b
}

// The table reads the simulator's errors as GitHub documents them.
func TestGitHubClassifiesSimulatorErrors(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	tb := builtin(t, "github")
	for _, status := range []int{403, 429} {
		s := ghsim.New(ghsim.WithClock(clk.Now), ghsim.WithLimit(ghsim.Core, 1), ghsim.WithLimit(ghsim.Search, 1), ghsim.WithLimit(ghsim.CodeSearch, 1),
			ghsim.WithPrimaryStatus(status))
		defer s.Close()
		reset := clk.Now().Add(time.Hour)
		for _, c := range []struct {
			path, budget string
			until        time.Time
		}{
			{"/repos/o/r/issues", "core", reset},
			{"/search/issues?q=x", "search", clk.Now().Add(time.Minute)},
			{"/search/code?q=x", "code_search", clk.Now().Add(time.Minute)},
		} {
			ghResponse(t, s, "GET", c.path, "tok", "")
			req, resp, body := ghResponse(t, s, "GET", c.path, "tok", "")
			if resp.StatusCode != status {
				t.Fatalf("%s: %d, want %d", c.path, resp.StatusCode, status)
			}
			v := tb.Classify(req, resp, body)
			if !slices.Equal(v.Exhausted, []string{c.budget}) || v.Transient || !v.Until.Equal(c.until) || v.Reason != "x-ratelimit-remaining: 0" {
				t.Errorf("%d %s: verdict %+v, want %s spent until %v", status, c.path, v, c.budget, c.until)
			}
		}
		// The same refusal with x-ratelimit-remaining dropped, or rewritten
		// (a proxy in front): its message says it.
		for _, rem := range []string{"", "12"} {
			req, resp, body := ghResponse(t, s, "GET", "/repos/o/r/issues", "tok", "")
			if rem == "" {
				resp.Header.Del("X-Ratelimit-Remaining")
			} else {
				resp.Header.Set("X-Ratelimit-Remaining", rem)
			}
			v := tb.Classify(req, resp, body)
			if !slices.Equal(v.Exhausted, []string{"core"}) || v.Transient || !v.Until.Equal(reset) || v.Reason != "api rate limit exceeded" {
				t.Errorf("%d with x-ratelimit-remaining %q: verdict %+v, want core spent until %v", status, rem, v, reset)
			}
		}
		// The secondary limit: one POST (5 points) fills the endpoint's 5.
		s2 := ghsim.New(ghsim.WithClock(clk.Now), ghsim.WithSecondaryStatus(status), ghsim.WithSecondaryLimits(5, 0))
		defer s2.Close()
		ghResponse(t, s2, "POST", "/repos/o/r2/issues", "tok", "{}")
		req, resp, body := ghResponse(t, s2, "POST", "/repos/o/r2/issues", "tok", "{}")
		v := tb.Classify(req, resp, body)
		if resp.StatusCode != status || resp.Header.Get("Retry-After") != "60" || !v.Transient || len(v.Exhausted) != 0 || v.Reason != "secondary rate limit" {
			t.Errorf("%d secondary: %d %v, verdict %+v, want transient", status, resp.StatusCode, resp.Header, v)
		}
	}
	// A GraphQL refusal is a 200 (no verdict; the reports read it); an
	// ordinary 403 or 404 says nothing of quota.
	s := ghsim.New(ghsim.WithClock(clk.Now), ghsim.WithLimit(ghsim.GraphQL, 1))
	defer s.Close()
	ghResponse(t, s, "POST", "/graphql", "tok", `{"query":"{ viewer { login } }"}`)
	req, resp, body := ghResponse(t, s, "POST", "/graphql", "tok", `{"query":"{ viewer { login } }"}`)
	if v := tb.Classify(req, resp, body); resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Remaining") != "0" || !reflect.DeepEqual(v, quota.Verdict{}) {
		t.Fatalf("graphql refusal: %d, verdict %+v", resp.StatusCode, v)
	}
	for _, code := range []int{403, 404} {
		h := http.Header{"X-Ratelimit-Remaining": {"4999"}}
		r, _ := http.NewRequest("GET", "https://api.github.com/repos/o/private", nil)
		if v := tb.Classify(r, &http.Response{StatusCode: code, Header: h}, []byte(`{"message":"Resource not accessible by integration"}`)); !reflect.DeepEqual(v, quota.Verdict{}) {
			t.Fatalf("%d: verdict %+v, want none", code, v)
		}
	}
}

// The real Transport against the simulator: another client of the same
// user spends the core quota the meter does not see; the upstream's 403
// marks core spent until x-ratelimit-reset (not a whole hour from now), in
// the store, and the meter then refuses locally without sending.
func TestGitHubTransportAgainstSimulator(t *testing.T) {
	start := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	clk := testkit.NewClock(start)
	s := ghsim.New(ghsim.WithClock(clk.Now), ghsim.WithUser("alice", 42, "pat", "ci-token"), ghsim.WithLimit(ghsim.Core, 50))
	defer s.Close()
	table, err := builtin(t, "github").WithHosts(s.Host())
	if err != nil {
		t.Fatal(err)
	}
	store := quota.NewMemoryStore()
	lim, err := quota.New(store, table.API, table.Budgets, quota.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	tr := quota.NewTransport(lim, table, quota.WithOwnerFunc(func(*http.Request) string { return "alice" }), quota.WithRetryClock(clk, clk.NewTimer),
		quota.WithTransportLogger(slog.New(slog.NewTextHandler(logs, nil))))
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()
	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequest("GET", s.URL()+path, nil)
		req.Header.Set("Authorization", "Bearer pat")
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	if resp, err := get("/repos/o/r/issues"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first call: %v %v", resp, err)
	}
	// The first call opened GitHub's window at start: it resets at start+1h.
	clk.Add(20 * time.Minute)
	if !s.Spend("ci-token", ghsim.Core, 49) { // CI, unmetered, spends the rest
		t.Fatal("Spend")
	}
	_, err = get("/repos/o/r/pulls")
	var ex *quota.ExhaustedError
	if !errors.Is(err, quota.ErrExhausted) || !errors.As(err, &ex) || ex.Budget != "core" || !ex.ExhaustedUntil.Equal(start.Add(time.Hour)) {
		t.Fatalf("err = %v (%+v), want core spent until GitHub's reset %v", err, ex, start.Add(time.Hour))
	}
	if !strings.Contains(logs.String(), "until=2026-11-28T10:00:00.000Z") || strings.Contains(logs.String(), "pat") {
		t.Fatalf("logs: %s", logs)
	}
	sent := s.Requests()
	if _, err := get("/user"); !errors.Is(err, quota.ErrExhausted) || s.Requests() != sent {
		t.Fatalf("after the 403: err = %v, %d requests sent, want refused locally", err, s.Requests()-sent)
	}
	// Search is another resource: still open.
	req, _ := http.NewRequest("GET", s.URL()+"/search/issues?q=x", nil)
	req.Header.Set("Authorization", "Bearer pat")
	if resp, err := client.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("search: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// At GitHub's reset the mark ends and the call goes through.
	clk.Set(start.Add(time.Hour))
	if resp, err := get("/user"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the reset: %v %v", resp, err)
	}
	if s.PrimaryErrors() != 1 {
		t.Fatalf("primary errors %d, want exactly the one that taught the meter", s.PrimaryErrors())
	}
	us, err := lim.Status(context.Background(), quota.Credential{Secret: "pat", Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if u.Budget == "core" && !u.ExhaustedUntil.IsZero() && u.ExhaustedUntil.After(clk.Now()) {
			t.Fatalf("core still marked spent: %+v", u)
		}
	}
}

func TestRateLimitHeadersProfile(t *testing.T) {
	tb := builtin(t, "ratelimit-headers")
	if tb.API != "ratelimit-headers" || len(tb.Budgets) != 1 || tb.Budgets[0].Name != "requests" || tb.Hosts() != nil {
		t.Fatalf("%+v hosts %v", tb.Budgets, tb.Hosts())
	}
	for _, c := range []struct{ verb, url string }{{"GET", "https://api.example.com/"}, {"DELETE", "https://x.example/a/b/c?d=e"}, {"PATCH", "http://127.0.0.1:9/v1"}} {
		req, _ := http.NewRequest(c.verb, c.url, nil)
		if ch, err := tb.Price(req); err != nil || !reflect.DeepEqual(ch.Units, map[string]int64{"requests": 1}) {
			t.Errorf("Price(%s %s) = %+v, %v", c.verb, c.url, ch, err)
		}
	}
	req := httptest.NewRequest("GET", "https://api.example.com/v1/things", nil)
	v := tb.Classify(req, &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"10"}}}, nil)
	if !slices.Equal(v.Exhausted, []string{"requests"}) {
		t.Fatalf("429: %+v", v)
	}
}

// headers, messages and reset_header, in a table of one's own.
func TestClassifyHeadersMessagesReset(t *testing.T) {
	tb := parse(t, "t.yaml", `api: demo
budgets: [{name: units, limit: 10, window: "sliding:1h"}]
methods: {items.list: {routes: [GET /v1/items], cost: {units: 1}}}
responses:
  - {status: 403, headers: {X-Left: " 0 "}, exhaust: "*", reset_header: x-reset}
  - {status: 403, messages: [Slow Down], retry: true}
`)
	req, _ := http.NewRequest("GET", "https://x.example/v1/items", nil)
	at := func(h http.Header, body string) quota.Verdict {
		return tb.Classify(req, &http.Response{StatusCode: 403, Header: h}, []byte(body))
	}
	for _, c := range []struct {
		reset string
		until time.Time
	}{
		{"1795860000", time.Unix(1795860000, 0)},
		{" 1795860000 ", time.Unix(1795860000, 0)},
		{"", time.Time{}}, {"soon", time.Time{}}, {"-5", time.Time{}}, {"0", time.Time{}}, {"9999999999999", time.Time{}}, {"1.5", time.Time{}},
	} {
		v := at(http.Header{"X-Left": {"0"}, "X-Reset": {c.reset}}, "")
		if !slices.Equal(v.Exhausted, []string{"units"}) || !v.Until.Equal(c.until) || v.Reason != "x-left: 0" {
			t.Errorf("reset %q: %+v, want until %v", c.reset, v, c.until)
		}
	}
	if v := at(http.Header{"X-Left": {"1"}}, ""); len(v.Exhausted) != 0 {
		t.Errorf("X-Left 1: %+v", v)
	}
	for _, body := range []string{
		`{"message":"Please SLOW DOWN."}`,
		`{"error":{"code":403,"message":"slow down, friend","errors":[{"reason":"x"}]}}`,
		`{"error":{"code":403,"errors":[{"message":"you must slow down","reason":"x"}]}}`,
		`{"error":"denied","message":"slow down"}`,
	} {
		if v := at(nil, body); !v.Transient {
			t.Errorf("%s: %+v, want transient", body, v)
		}
	}
	for _, body := range []string{``, `slow down`, `{"message":"go faster"}`, `{"message":["slow down"]}`} {
		if v := at(nil, body); !reflect.DeepEqual(v, quota.Verdict{}) {
			t.Errorf("%q: %+v, want none", body, v)
		}
	}
}

// Classify reads any response without panicking, and never marks a budget
// spent without GitHub's signal.
func FuzzGitHubClassify(f *testing.F) {
	f.Add(403, "0", "1795860000", `{"message":"API rate limit exceeded for user ID 1."}`, "/repos/o/r")
	f.Add(429, "5", "", `{"message":"You have exceeded a secondary rate limit."}`, "/search/code")
	f.Add(403, "0", "99999999999999999999", `{"error":{"errors":[{"message":"x"}]}}`, "/graphql")
	f.Add(500, "", "-1", `[`, "/")
	tb, err := costs.Builtin("github")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, status int, remaining, reset, body, path string) {
		req, err := http.NewRequest("GET", "https://api.github.com/", nil)
		if err != nil {
			t.Skip()
		}
		req.URL.Path = path
		h := http.Header{"X-Ratelimit-Remaining": {remaining}, "X-Ratelimit-Reset": {reset}}
		v := tb.Classify(req, &http.Response{StatusCode: status, Header: h}, []byte(body))
		if len(v.Exhausted) > 0 && strings.TrimSpace(remaining) != "0" {
			t.Fatalf("exhausted %v with x-ratelimit-remaining %q", v.Exhausted, remaining)
		}
		if !v.Until.IsZero() && v.Until.Unix() <= 0 {
			t.Fatalf("until %v", v.Until)
		}
	})
}
