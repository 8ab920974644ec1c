package costs_test

import (
	"errors"
	"maps"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/quota"
)

func spec() costs.Spec {
	return costs.Spec{
		API: "demo",
		Budgets: []quota.Budget{
			{Name: "units", Limit: 1000, Window: quota.Sliding(24 * time.Hour)},
			{Name: "search", Limit: 10, Window: quota.Sliding(time.Hour)},
		},
		Methods: []costs.Method{
			{Name: "items.list", Routes: []string{"GET /v1/items"}, Cost: map[string]int64{"units": 1}},
			{Name: "items.get", Routes: []string{"GET /v1/items/{id}"}, Cost: map[string]int64{"units": 2}},
			{Name: "items.export", Routes: []string{"GET /v1/items/export"}, Cost: map[string]int64{"units": 20}},
			{Name: "items.search", Routes: []string{"GET /v1/items/search"}, Cost: map[string]int64{"search": 1, "units": 5}},
			{Name: "files.get", Routes: []string{"GET /v1/files/{path...}"}, Cost: map[string]int64{"units": 3}},
			{Name: "files.upload", Routes: []string{"POST /v1/files", "PUT /v1/files?uploadType=resumable"}, Cost: map[string]int64{"units": 50}},
			{Name: "files.chunk", Routes: []string{"PUT /v1/files?upload_id", "PUT /v1/files?uploadType=resumable&upload_id"}, Free: true},
			{Name: "ping", Routes: []string{"* /v1/ping"}, Cost: map[string]int64{"units": 1}},
			{Name: "items.sub", Routes: []string{"GET /v1/{kind}/{id}/sub"}, Cost: map[string]int64{"units": 4}},
		},
	}
}

func mustNew(t *testing.T, s costs.Spec) *costs.Table {
	t.Helper()
	tb, err := costs.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestResolve(t *testing.T) {
	tb := mustNew(t, spec())
	for _, c := range []struct{ verb, target, want string }{
		{"GET", "/v1/items", "items.list"},
		{"GET", "/v1/items/", "items.list"},
		{"GET", "/v1/items?page=2", "items.list"},
		{"GET", "/v1/items/42", "items.get"},
		{"GET", "/v1/items/export", "items.export"}, // literal beats {id}
		{"GET", "/v1/items/search?q=x", "items.search"},
		{"GET", "/v1/files/a", "files.get"},
		{"GET", "/v1/files/a/b/c.txt", "files.get"},
		{"POST", "/v1/files", "files.upload"},
		{"PUT", "/v1/files?uploadType=resumable", "files.upload"},
		{"PUT", "/v1/files?uploadType=resumable&upload_id=9", "files.chunk"}, // conditions first
		{"PUT", "/v1/files?upload_id=", "files.chunk"},
		{"PUT", "/v1/files?upload%5Fid=1", "files.chunk"}, // escaped name
		{"PUT", "/v1/files?uploadType=resumable%20", ""},
		{"PUT", "/v1/files", ""},
		{"DELETE", "/v1/ping", "ping"},
		{"GET", "/v1/ping/", "ping"},
		{"GET", "/v1/items/42/sub", "items.sub"},
		{"GET", "/v1/files", ""},
		{"GET", "/v1/items/42/other", ""},
		{"GET", "/v1", ""},
		{"GET", "/", ""},
		{"get", "/v1/items", ""},
	} {
		got, ok := tb.Resolve(c.verb, c.target)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("Resolve(%s, %s) = %q, %v; want %q", c.verb, c.target, got, ok, c.want)
		}
	}
}

func TestPrice(t *testing.T) {
	tb := mustNew(t, spec())
	req := func(verb, target string) *http.Request {
		r, err := http.NewRequest(verb, "https://api.example.com"+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ch, err := tb.Price(req("GET", "/v1/items/search?q=a"))
	if err != nil || ch.Method != "items.search" || !maps.Equal(ch.Units, map[string]int64{"search": 1, "units": 5}) {
		t.Fatalf("Price = %+v, %v", ch, err)
	}
	ch, err = tb.Price(req("PUT", "/v1/files?upload_id=1"))
	if err != nil || ch.Method != "files.chunk" || len(ch.Units) != 0 {
		t.Fatalf("free method: %+v, %v", ch, err)
	}
	_, err = tb.Price(req("GET", "/v2/unknown?key=SECRET"))
	if !errors.Is(err, costs.ErrUnknownMethod) || !strings.Contains(err.Error(), "GET /v2/unknown") || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("unknown route: %v", err)
	}
	// With a default, unknown routes cost the default, never nothing.
	s := spec()
	s.Default = map[string]int64{"units": 7}
	tb = mustNew(t, s)
	ch, err = tb.Price(req("GET", "/v2/unknown"))
	if err != nil || ch.Method != "GET /v2/unknown" || ch.Units["units"] != 7 {
		t.Fatalf("default: %+v, %v", ch, err)
	}
	if d, ok := tb.Default(); !ok || d.Units["units"] != 7 {
		t.Fatalf("Default() = %v, %v", d, ok)
	}
}

func TestChargeAndEstimate(t *testing.T) {
	tb := mustNew(t, spec())
	ch, err := tb.Charge("items.get")
	if err != nil || ch.Method != "items.get" || ch.Units["units"] != 2 {
		t.Fatalf("Charge = %+v, %v", ch, err)
	}
	ch.Units["units"] = 999 // a copy: the table is unchanged
	if ch2, _ := tb.Charge("items.get"); ch2.Units["units"] != 2 {
		t.Fatal("Charge returned the table's own map")
	}
	if _, err := tb.Charge("items.delete"); !errors.Is(err, costs.ErrUnknownMethod) || !strings.Contains(err.Error(), `"items.delete"`) {
		t.Fatalf("unknown method: %v", err)
	}
	est, err := tb.Estimate(map[string]int64{"items.list": 100, "items.search": 8, "files.chunk": 40, "items.get": 0})
	if err != nil || !maps.Equal(est, map[string]int64{"units": 140, "search": 8}) {
		t.Fatalf("Estimate = %v, %v", est, err)
	}
	if _, err := tb.Estimate(map[string]int64{"items.list": -1}); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("negative count: %v", err)
	}
	if _, err := tb.Estimate(map[string]int64{"nope": 1}); !errors.Is(err, costs.ErrUnknownMethod) {
		t.Fatalf("unknown method: %v", err)
	}
	// A count whose cost overflows int64 must not wrap to a negative cost
	// that fits in any budget.
	for _, counts := range []map[string]int64{
		{"items.list": math.MaxInt64, "items.get": 1},
		{"items.get": math.MaxInt64/2 + 1},
		{"items.list": math.MaxInt64 - 5, "items.get": 3},
	} {
		if est, err := tb.Estimate(counts); !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), `budget "units"`) {
			t.Fatalf("Estimate(%v) = %v, %v; want an error naming the budget", counts, est, err)
		}
	}
	m, ok := tb.Method("files.chunk")
	if !ok || !m.Free || m.Charge().Method != "files.chunk" {
		t.Fatalf("Method = %+v, %v", m, ok)
	}
	ms := tb.Methods()
	for i := 1; i < len(ms); i++ {
		if ms[i-1].Name >= ms[i].Name {
			t.Fatalf("Methods not sorted: %s, %s", ms[i-1].Name, ms[i].Name)
		}
	}
	ms[0].Routes[0] = "changed"
	if tb.Methods()[0].Routes[0] == "changed" {
		t.Fatal("Methods returned the table's own slices")
	}
	sp := tb.Spec()
	if sp.API != "demo" || len(sp.Methods) != len(ms) || len(sp.Budgets) != 2 {
		t.Fatalf("Spec = %+v", sp)
	}
}

func TestNewRejects(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*costs.Spec)
		field string
		msg   string
	}{
		{"bad api", func(s *costs.Spec) { s.API = "my api" }, "api", "only letters"},
		{"no budgets", func(s *costs.Spec) { s.Budgets = nil }, "budgets", "no budgets"},
		{"zero limit", func(s *costs.Spec) { s.Budgets[1].Limit = 0 }, "budgets[1]", "limit is 0"},
		{"no window", func(s *costs.Spec) { s.Budgets[0].Window = quota.Window{} }, "budgets[0]", "zero window"},
		{"duplicate budget", func(s *costs.Spec) { s.Budgets[1].Name = "units" }, "budgets[1].name", "duplicate budget"},
		{"no methods", func(s *costs.Spec) { s.Methods = nil }, "methods", "no methods"},
		{"empty name", func(s *costs.Spec) { s.Methods[2].Name = "" }, "methods[2].name", "empty method name"},
		{"space in name", func(s *costs.Spec) { s.Methods[2].Name = "items list" }, "methods[2].name", "no spaces"},
		{"duplicate method", func(s *costs.Spec) { s.Methods[1].Name = "items.list" }, "methods[items.list]", "duplicate method"},
		{"no cost", func(s *costs.Spec) { s.Methods[0].Cost = nil }, "methods[items.list].cost", "no cost"},
		{"free with cost", func(s *costs.Spec) { s.Methods[0].Free = true }, "methods[items.list].cost", "free method has no cost"},
		{"unknown budget", func(s *costs.Spec) { s.Methods[0].Cost = map[string]int64{"unit": 1} }, "methods[items.list].cost.unit", `unknown budget "unit" (budgets: units, search)`},
		{"zero cost", func(s *costs.Spec) { s.Methods[0].Cost = map[string]int64{"units": 0} }, "methods[items.list].cost.units", "must be > 0"},
		{"cost over limit", func(s *costs.Spec) { s.Methods[0].Cost = map[string]int64{"search": 11} }, "methods[items.list].cost.search", "could never be paid"},
		{"no routes", func(s *costs.Spec) { s.Methods[0].Routes = nil }, "methods[items.list].routes", "no routes"},
		{"route without verb", func(s *costs.Spec) { s.Methods[0].Routes = []string{"/v1/items"} }, "methods[items.list].routes[0]", "want \"VERB /path\""},
		{"lower-case verb", func(s *costs.Spec) { s.Methods[0].Routes = []string{"get /v1/items"} }, "methods[items.list].routes[0]", `HTTP method "get" is not one of GET`},
		{"unknown verb", func(s *costs.Spec) { s.Methods[0].Routes = []string{"FETCH /v1/items"} }, "methods[items.list].routes[0]", `HTTP method "FETCH" is not one of`},
		{"relative path", func(s *costs.Spec) { s.Methods[0].Routes = []string{"GET v1/items"} }, "methods[items.list].routes[0]", "must start with /"},
		{"empty segment", func(s *costs.Spec) { s.Methods[0].Routes = []string{"GET /v1//items"} }, "methods[items.list].routes[0]", "empty segment"},
		{"partial wildcard", func(s *costs.Spec) { s.Methods[0].Routes = []string{"GET /v1/x{id}"} }, "methods[items.list].routes[0]", "whole segment"},
		{"rest not last", func(s *costs.Spec) { s.Methods[0].Routes = []string{"GET /v1/{p...}/x"} }, "methods[items.list].routes[0]", "last segment"},
		{"unnamed wildcard", func(s *costs.Spec) { s.Methods[0].Routes = []string{"GET /v1/{}"} }, "methods[items.list].routes[0]", "needs a name"},
		{"empty condition", func(s *costs.Spec) { s.Methods[0].Routes = []string{"GET /v1/items?a&&b"} }, "methods[items.list].routes[0]", "empty query condition"},
		{"duplicate route", func(s *costs.Spec) { s.Methods[0].Routes = []string{"GET /v1/items/{other}"} }, "methods[items.get].routes[0]", "also a route of items.list"},
		{"duplicate route with conditions", func(s *costs.Spec) { s.Methods[7].Routes = []string{"PUT /v1/files?upload_id"} }, "methods[ping].routes[0]", "also a route of files.chunk"},
		{"default unknown budget", func(s *costs.Spec) { s.Default = map[string]int64{"x": 1} }, "default.x", "unknown budget"},
		{"rule status", func(s *costs.Spec) { s.Responses = []costs.Rule{{Status: 42, Retry: true}} }, "responses[0].status", "400 to 599"},
		{"rule informational status", func(s *costs.Spec) { s.Responses = []costs.Rule{{Status: 100, Retry: true}} }, "responses[0].status", "status 100: want an HTTP error status, 400 to 599"},
		{"rule success status", func(s *costs.Spec) { s.Responses = []costs.Rule{{Status: 200, Retry: true}} }, "responses[0].status", "400 to 599"},
		{"rule hold without for", func(s *costs.Spec) { s.Responses = []costs.Rule{{Status: 400, Hold: []string{"items.list"}}} }, "responses[0].for", "hold needs for"},
		{"rule for without hold", func(s *costs.Spec) { s.Responses = []costs.Rule{{Status: 400, Retry: true, For: time.Hour}} }, "responses[0].for", "hold only"},
		{"rule hold and exhaust", func(s *costs.Spec) {
			s.Responses = []costs.Rule{{Status: 400, Hold: []string{"items.list"}, For: time.Hour, Exhaust: []string{"search"}}}
		}, "responses[0]", "exactly one"},
		{"rule hold budget", func(s *costs.Spec) {
			s.Responses = []costs.Rule{{Status: 400, Hold: []string{"serch"}, For: time.Hour}}
		}, "responses[0].hold[0]", "not a method"},
		{"rule empty limit", func(s *costs.Spec) { s.Responses = []costs.Rule{{Status: 429, Retry: true, Limits: []string{" "}}} }, "responses[0].limits[0]", "empty limit"},
		{"bad owner", func(s *costs.Spec) { s.Owner = "cloud project" }, "owner", "only letters"},
		{"rule both", func(s *costs.Spec) {
			s.Responses = []costs.Rule{{Status: 403, Retry: true, Exhaust: []string{"units"}}}
		}, "responses[0]", "exactly one"},
		{"rule neither", func(s *costs.Spec) { s.Responses = []costs.Rule{{Status: 403}} }, "responses[0]", "exactly one"},
		{"rule budget", func(s *costs.Spec) { s.Responses = []costs.Rule{{Status: 403, Exhaust: []string{"unit"}}} }, "responses[0].exhaust[0]", "unknown budget"},
		{"rule reason", func(s *costs.Spec) { s.Responses = []costs.Rule{{Status: 403, Retry: true, Reasons: []string{""}}} }, "responses[0].reasons[0]", "empty reason"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := spec()
			c.edit(&s)
			_, err := costs.New(s)
			var se *costs.SpecError
			if !errors.As(err, &se) || !errors.Is(err, quota.ErrInvalid) {
				t.Fatalf("err = %v, want a *SpecError", err)
			}
			if se.Field != c.field || !strings.Contains(se.Msg, c.msg) {
				t.Fatalf("err = %q (field %q), want field %q and %q", err, se.Field, c.field, c.msg)
			}
		})
	}
}

func TestSpecErrorText(t *testing.T) {
	for _, c := range []struct {
		e    costs.SpecError
		want string
	}{
		{costs.SpecError{File: "t.yaml", Line: 3, Field: "api", Msg: "bad"}, "costs: t.yaml:3: api: bad"},
		{costs.SpecError{File: "t.yaml", Msg: "bad"}, "costs: t.yaml: bad"},
		{costs.SpecError{Line: 7, Msg: "bad"}, "costs: line 7: bad"},
		{costs.SpecError{Field: "methods", Msg: "no methods"}, "costs: methods: no methods"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}

func TestClassifyCustomRules(t *testing.T) {
	s := spec()
	s.Responses = []costs.Rule{
		{Status: 429, Exhaust: []string{"*"}},
		{Status: 403, Reasons: []string{"quota"}, Exhaust: []string{"search"}},
	}
	tb := mustNew(t, s)
	req, _ := http.NewRequest("GET", "https://x/v1/items/search", nil)
	v := tb.Classify(req, &http.Response{StatusCode: 429}, nil)
	if len(v.Exhausted) != 2 || v.Exhausted[0] != "units" || v.Exhausted[1] != "search" {
		t.Fatalf("429: %+v", v)
	}
	v = tb.Classify(req, &http.Response{StatusCode: 403}, []byte(`{"error":{"errors":[{"reason":"quota"}]}}`))
	if len(v.Exhausted) != 1 || v.Exhausted[0] != "search" || v.Reason != "quota" {
		t.Fatalf("403: %+v", v)
	}
	req, _ = http.NewRequest("GET", "https://x/v1/items", nil)
	if v := tb.Classify(req, &http.Response{StatusCode: 403}, []byte(`{"error":{"errors":[{"reason":"quota"}]}}`)); len(v.Exhausted) != 0 {
		t.Fatalf("items.list does not charge search: %+v", v)
	}
}
