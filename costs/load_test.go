package costs_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/quota"
)

const goodYAML = `# a small table
api: demo
source: tests
budgets:
  - name: units
    limit: 1_000
    window: daily:UTC
  - {name: search, limit: 10, window: "sliding:1h"}
default: {units: 2}
methods:
  items.list:
    routes: [GET /v1/items]
    cost: {units: 1}
  items.search:
    routes: GET /v1/search
    cost: {search: 1, units: 5}
    note: priced by hand
  items.chunk: {routes: ["PUT /v1/items?upload_id"], free: true}
responses:
  - {status: 403, reasons: [quotaExceeded], exhaust: "*"}
  - {status: 429, exhaust: [search]}
  - {status: 403, reasons: [userRateLimitExceeded], retry: true}
`

const goodJSON = `{
  "api": "demo",
  "source": "tests",
  "budgets": [
    {"name": "units", "limit": 1000, "window": "daily:UTC"},
    {"name": "search", "limit": 10, "window": "sliding:1h"}
  ],
  "default": {"units": 2},
  "methods": {
    "items.list": {"routes": ["GET /v1/items"], "cost": {"units": 1}},
    "items.search": {"routes": "GET /v1/search", "cost": {"search": 1, "units": 5}, "note": "priced by hand"},
    "items.chunk": {"routes": ["PUT /v1/items?upload_id"], "free": true}
  },
  "responses": [
    {"status": 403, "reasons": ["quotaExceeded"], "exhaust": "*"},
    {"status": 429, "exhaust": ["search"]},
    {"status": 403, "reasons": ["userRateLimitExceeded"], "retry": true}
  ]
}`

func parse(t *testing.T, name, data string) *costs.Table {
	t.Helper()
	tb, err := costs.Parse(name, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestParseYAMLAndJSONAgree(t *testing.T) {
	y := parse(t, "t.yaml", goodYAML)
	j := parse(t, "t.json", goodJSON)
	if !reflect.DeepEqual(y.Spec(), j.Spec()) {
		t.Fatalf("YAML and JSON differ:\n%+v\n%+v", y.Spec(), j.Spec())
	}
	// Format by content when the name says nothing.
	if !reflect.DeepEqual(parse(t, "table", goodJSON).Spec(), y.Spec()) || !reflect.DeepEqual(parse(t, "table", goodYAML).Spec(), y.Spec()) {
		t.Fatal("content sniffing differs")
	}
	if name, ok := y.Resolve("GET", "/v1/search"); !ok || name != "items.search" {
		t.Fatalf("resolve: %q %v", name, ok)
	}
	if y.Budgets[0].Limit != 1000 || y.Budgets[1].Window.Duration().Hours() != 1 {
		t.Fatalf("budgets %v", y.Budgets)
	}
	m, _ := y.Method("items.search")
	if m.Note != "priced by hand" {
		t.Fatalf("note %q", m.Note)
	}
}

// A table's Spec, marshalled to JSON (methods as a list), parses back to
// the same table: what `quotactl costs show --json` prints can be edited and
// loaded.
func TestSpecJSONRoundTrip(t *testing.T) {
	for _, tb := range []*costs.Table{parse(t, "t.yaml", goodYAML), builtin(t, "youtube"), builtin(t, "youtube-legacy"), builtin(t, "github"), builtin(t, "ratelimit-headers")} {
		data, err := json.MarshalIndent(tb.Spec(), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		back, err := costs.Parse("spec.json", data)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tb.API, err, data)
		}
		if !reflect.DeepEqual(back.Spec(), tb.Spec()) {
			t.Fatalf("%s: round trip differs", tb.API)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "demo.yml")
	if err := os.WriteFile(p, []byte(goodYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	tb, err := costs.Load(p)
	if err != nil || tb.API != "demo" {
		t.Fatalf("Load = %v, %v", tb, err)
	}
	if _, err := costs.Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\n  \"api\": \"demo\",\n  \"budgets\": 3\n}"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = costs.Load(bad)
	if err == nil || !strings.HasPrefix(err.Error(), "costs: "+bad+":3: budgets: ") {
		t.Fatalf("bad file: %v", err)
	}
}

func TestParseErrorsNameLineAndField(t *testing.T) {
	// Each case edits one line of goodYAML or goodJSON.
	cases := []struct {
		name, file, old, new string
		line                 int
		field, msg           string
	}{
		{"yaml unknown field", "t.yaml", "    limit: 1_000", "    limt: 1_000", 6, "budgets[0].limt", `unknown field "limt"`},
		{"yaml bad limit", "t.yaml", "    limit: 1_000", "    limit: lots", 6, "budgets[0].limit", `want an integer, got "lots"`},
		{"yaml quoted limit", "t.yaml", "    limit: 1_000", `    limit: "1000"`, 6, "budgets[0].limit", `want an integer, got "1000"`},
		{"yaml bad window", "t.yaml", "    window: daily:UTC", "    window: daily:Mars/Base", 7, "budgets[0].window", `unknown time zone "Mars/Base"`},
		{"yaml missing window", "t.yaml", "    window: daily:UTC\n", "", 5, "budgets[0].window", "missing window"},
		{"yaml bad monthly window", "t.yaml", "    window: daily:UTC", "    window: monthly:Mars/Base", 7, "budgets[0].window", `unknown time zone "Mars/Base"`},
		{"yaml monthly window without zone", "t.yaml", "    window: daily:UTC", `    window: "monthly:"`, 7, "budgets[0].window", "monthly needs a zone"},
		{"yaml unknown budget", "t.yaml", "    cost: {units: 1}", "    cost: {unit: 1}", 13, "methods[items.list].cost.unit", `unknown budget "unit" (budgets: units, search)`},
		{"yaml negative cost", "t.yaml", "    cost: {units: 1}", "    cost: {units: -1}", 13, "methods[items.list].cost.units", "must be > 0"},
		{"yaml cost over limit", "t.yaml", "    cost: {search: 1, units: 5}", "    cost: {search: 11, units: 5}", 16, "methods[items.search].cost.search", "could never be paid"},
		{"yaml bad route", "t.yaml", "    routes: [GET /v1/items]", "    routes: [GET v1/items]", 12, "methods[items.list].routes[0]", "must start with /"},
		{"yaml duplicate route", "t.yaml", "    routes: GET /v1/search", "    routes: GET /v1/items", 15, "methods[items.search].routes[0]", "also a route of items.list"},
		{"yaml duplicate method", "t.yaml", "  items.chunk:", "  items.list:", 18, "methods[items.list]", "duplicate method (first on line 11)"},
		{"yaml routes type", "t.yaml", "    routes: [GET /v1/items]", "    routes: {GET: /v1/items}", 12, "methods[items.list].routes", "want a list of strings"},
		{"yaml free type", "t.yaml", "free: true}", "free: yes}", 18, "methods[items.chunk].free", "want true or false"},
		{"yaml rule both", "t.yaml", `exhaust: [search]}`, `exhaust: [search], retry: true}`, 21, "responses[1]", "exactly one"},
		{"yaml rule budget", "t.yaml", `exhaust: [search]}`, `exhaust: [serch]}`, 21, "responses[1].exhaust[0]", `unknown budget "serch"`},
		{"yaml syntax", "t.yaml", "    cost: {units: 1}", "    cost: {units: 1", 0, "", "bad YAML"},
		{"yaml tab", "t.yaml", "api: demo", "api: demo\n\tsource: x", 0, "", "bad YAML"},
		{"yaml missing api", "t.yaml", "api: demo\n", "", 2, "api", "missing"},
		{"yaml top-level list", "t.yaml", goodYAML, "- 1\n- 2\n", 1, "", "want a mapping"},
		{"yaml empty", "t.yaml", goodYAML, "", 1, "", "empty file"},
		{"yaml two documents", "t.yaml", "api: demo\n", "api: demo\n---\napi: x\n", 0, "", "more than one YAML document"},
		{"yaml alias", "t.yaml", "default: {units: 2}", "default: &d {units: 2}\nx: *d", 0, "", ""},
		{"json unknown field", "t.json", `"source": "tests",`, `"sauce": "tests",`, 3, "sauce", `unknown field "sauce"`},
		{"json bad limit", "t.json", `"limit": 10,`, `"limit": 10.5,`, 6, "budgets[1].limit", "want an integer, got 10.5"},
		{"json unknown budget", "t.json", `"cost": {"units": 1}}`, `"cost": {"unit": 1}}`, 10, "methods[items.list].cost.unit", `unknown budget "unit"`},
		{"json duplicate key", "t.json", `"default": {"units": 2},`, `"default": {"units": 2}, "api": "x",`, 8, "api", "duplicate field (first on line 2)"},
		{"json bad route", "t.json", `"routes": "GET /v1/search"`, `"routes": "GET /v1/search?"`, 11, "methods[items.search].routes[0]", "empty query"},
		{"json syntax", "t.json", `"default": {"units": 2},`, `"default": {"units": 2},,`, 8, "", "bad JSON"},
		{"json truncated", "t.json", goodJSON, goodJSON[:40], 4, "", "unexpected end of file"},
		{"json trailing", "t.json", goodJSON, goodJSON + "\n{}", 20, "", "data after"},
		{"json status type", "t.json", `{"status": 429,`, `{"status": "429",`, 16, "responses[1].status", "want an integer"},
		{"json rule status", "t.json", `{"status": 429,`, `{"status": 4290,`, 16, "responses[1].status", "400 to 599"},
		{"json rule status 100", "t.json", `{"status": 429,`, `{"status": 100,`, 16, "responses[1].status", "status 100: want an HTTP error status"},
		{"yaml rule status 100", "t.yaml", "{status: 429,", "{status: 100,", 21, "responses[1].status", "status 100: want an HTTP error status"},
		{"yaml FETCH route", "t.yaml", "    routes: [GET /v1/items]", "    routes: [FETCH /v1/items]", 12, "methods[items.list].routes[0]", `HTTP method "FETCH" is not one of GET, HEAD, POST`},
		{"json FETCH route", "t.json", `"routes": "GET /v1/search"`, `"routes": "FETCH /v1/search"`, 11, "methods[items.search].routes[0]", `HTTP method "FETCH"`},
		{"yaml empty reasons", "t.yaml", "{status: 403, reasons: [quotaExceeded]", "{status: 403, reasons: []", 20, "responses[0].reasons", "empty list: leave reasons out"},
		{"yaml empty exhaust", "t.yaml", "reasons: [userRateLimitExceeded], retry: true}", "reasons: [userRateLimitExceeded], exhaust: [], retry: true}", 22, "responses[2].exhaust", "empty list"},
		{"yaml bad for", "t.yaml", "reasons: [userRateLimitExceeded], retry: true}", "reasons: [userRateLimitExceeded], hold: [items.list], for: a day}", 22, "responses[2].for", "want a duration"},
		{"yaml headers type", "t.yaml", "{status: 429, exhaust: [search]}", "{status: 429, headers: [x-a], exhaust: [search]}", 21, "responses[1].headers", "want a mapping of header names to values"},
		{"yaml headers empty", "t.yaml", "{status: 429, exhaust: [search]}", "{status: 429, headers: {}, exhaust: [search]}", 21, "responses[1].headers", "empty mapping"},
		{"yaml header name", "t.yaml", "{status: 429, exhaust: [search]}", `{status: 429, headers: {"x ratelimit": "0"}, exhaust: [search]}`, 21, "responses[1].headers.x ratelimit", "is not a header field name"},
		{"yaml header value", "t.yaml", "{status: 429, exhaust: [search]}", `{status: 429, headers: {x-a: " "}, exhaust: [search]}`, 21, "responses[1].headers.x-a", "empty value"},
		{"yaml header case", "t.yaml", "{status: 429, exhaust: [search]}", `{status: 429, headers: {x-a: "0", X-A: "1"}, exhaust: [search]}`, 21, "responses[1].headers.x-a", "header names ignore case"},
		{"yaml empty messages", "t.yaml", "{status: 429, exhaust: [search]}", "{status: 429, messages: [], exhaust: [search]}", 21, "responses[1].messages", "empty list: leave messages out"},
		{"yaml blank message", "t.yaml", "{status: 429, exhaust: [search]}", `{status: 429, messages: [" "], exhaust: [search]}`, 21, "responses[1].messages[0]", "empty message"},
		{"yaml reset_header on retry", "t.yaml", "reasons: [userRateLimitExceeded], retry: true}", "reasons: [userRateLimitExceeded], retry: true, reset_header: x-reset}", 22, "responses[2].reset_header", "applies to exhaust only"},
		{"yaml reset_header name", "t.yaml", "{status: 429, exhaust: [search]}", `{status: 429, exhaust: [search], reset_header: "x:reset"}`, 21, "responses[1].reset_header", "is not a header field name"},
		{"yaml hold no for", "t.yaml", "reasons: [userRateLimitExceeded], retry: true}", "reasons: [userRateLimitExceeded], hold: [items.list]}", 22, "responses[2].for", "hold needs for"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := goodYAML
			if strings.HasSuffix(c.file, ".json") {
				src = goodJSON
			}
			if !strings.Contains(src, c.old) {
				t.Fatalf("test bug: %q not in the file", c.old)
			}
			data := strings.Replace(src, c.old, c.new, 1)
			_, err := costs.Parse(c.file, []byte(data))
			var se *costs.SpecError
			if !errors.As(err, &se) || !errors.Is(err, quota.ErrInvalid) {
				t.Fatalf("err = %v, want a *SpecError\n%s", err, data)
			}
			if se.File != c.file || (c.line != 0 && se.Line != c.line) || se.Field != c.field || !strings.Contains(se.Msg, c.msg) {
				t.Fatalf("err = %q\n  (file %q line %d field %q)\nwant line %d field %q msg %q", err, se.File, se.Line, se.Field, c.line, c.field, c.msg)
			}
		})
	}
}

func TestParseMethodList(t *testing.T) {
	data := `{"api": "demo", "budgets": [{"name": "units", "limit": 5, "window": "24h"}],
"methods": [
  {"name": "a.list", "routes": ["GET /a"], "cost": {"units": 1}},
  {"name": "a.get", "routes": ["GET /a/{id}"], "cost": {"units": 9}}
]}`
	_, err := costs.Parse("t.json", []byte(data))
	var se *costs.SpecError
	if !errors.As(err, &se) || se.Line != 4 || se.Field != "methods[a.get].cost.units" {
		t.Fatalf("err = %v (%+v)", err, se)
	}
	_, err = costs.Parse("t.json", []byte(strings.Replace(data, `"a.get"`, `"a.list"`, 1)))
	if !errors.As(err, &se) || se.Line != 4 || !strings.Contains(se.Msg, "duplicate method") {
		t.Fatalf("err = %v", err)
	}
	_, err = costs.Parse("t.json", []byte(strings.Replace(data, `"name": "a.get", `, ``, 1)))
	if !errors.As(err, &se) || se.Line != 4 || se.Field != "methods[1].name" {
		t.Fatalf("err = %v (%+v)", err, se)
	}
}

// TestMonthlyBudgetTable: a table may bill by the calendar month, in YAML
// and JSON alike, and a monthly budget round-trips through its Spec.
func TestMonthlyBudgetTable(t *testing.T) {
	y := parse(t, "t.yaml", strings.Replace(goodYAML, "window: daily:UTC", "window: monthly:Europe/Paris", 1))
	j := parse(t, "t.json", strings.Replace(goodJSON, `"window": "daily:UTC"`, `"window": "monthly:Europe/Paris"`, 1))
	if !reflect.DeepEqual(y.Spec(), j.Spec()) {
		t.Fatalf("YAML and JSON differ:\n%+v\n%+v", y.Spec(), j.Spec())
	}
	w := y.Budgets[0].Window
	if !w.IsMonthly() || w.String() != "monthly:Europe/Paris" {
		t.Fatalf("window %v, want monthly:Europe/Paris", w)
	}
	b, err := json.Marshal(y.Spec())
	if err != nil {
		t.Fatal(err)
	}
	back := parse(t, "back.json", string(b))
	if !reflect.DeepEqual(back.Spec(), y.Spec()) || back.Budgets[0].Window.String() != "monthly:Europe/Paris" {
		t.Fatalf("round trip through JSON: %s", b)
	}
}
