package costs_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
)

const reportsBase = `api: demo
budgets: [{name: core, limit: 5000, window: "sliding:1h"}, {name: search, limit: 30, window: "sliding:1m"}]
methods: {items.list: {routes: [GET /v1/items], cost: {core: 1}}}
`

// TestReportsSection: a reports: section is checked at load, with the line
// and field of what is wrong, and read from responses into quota.Reports.
func TestReportsSection(t *testing.T) {
	for _, c := range []struct{ tail, want string }{
		{"reports: [{format: smoke, budgets: {core: core}}]\n", `t.yaml:4: reports[0].format: "smoke" is not one of github, ietf`},
		{"reports: [{format: github, budgets: {core: units}}]\n", `reports[0].budgets.core: unknown budget "units"`},
		{"reports: [{format: github}]\n", "name the budgets it reports on"},
		{"reports: [{format: github, default: nope}]\n", `reports[0].default: unknown budget "nope"`},
		{"reports: {format: github}\n", "want a list of reports"},
		{"reports: [{format: github, budgets: [core]}]\n", "want a mapping of upstream scopes to budgets"},
		{"reports: [{format: github, budgets: {core: core}, color: red}]\n", `unknown field "color"`},
	} {
		_, err := costs.Parse("t.yaml", []byte(reportsBase+c.tail))
		var se *costs.SpecError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want a SpecError containing %q", c.tail, err, c.want)
		}
	}
	tb, err := costs.Parse("t.yaml", []byte(reportsBase+"reports: [{format: github, budgets: {core: core, search: search}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	resp := &http.Response{StatusCode: 200, Header: http.Header{}}
	resp.Header.Set("X-Ratelimit-Resource", "search")
	resp.Header.Set("X-Ratelimit-Limit", "30")
	resp.Header.Set("X-Ratelimit-Used", "12")
	resp.Header.Set("X-Ratelimit-Remaining", "18")
	resp.Header.Set("X-Ratelimit-Reset", strconv.FormatInt(now.Add(40*time.Second).Unix(), 10))
	rs, ignored := tb.Reports(nil, resp, nil, now)
	if len(ignored) != 0 || len(rs) != 1 || rs[0].Budget != "search" || rs[0].Used != 12 || rs[0].Limit != 30 || !rs[0].Reset.Equal(now.Add(40*time.Second)) {
		t.Fatalf("%+v %v", rs, ignored)
	}
	resp.Header.Set("X-Ratelimit-Resource", "graphql") // a scope the table does not map
	if rs, _ := tb.Reports(nil, resp, nil, now); len(rs) != 0 {
		t.Fatalf("unmapped scope read: %+v", rs)
	}
	resp.Header.Set("X-Ratelimit-Used", "many")
	if _, ignored := tb.Reports(nil, resp, nil, now); len(ignored) != 1 || !strings.Contains(ignored[0], "x-ratelimit-used") {
		t.Fatalf("ignored %v", ignored)
	}
	plain, _ := costs.Parse("t.yaml", []byte(reportsBase))
	if rs, ig := plain.Reports(nil, resp, nil, now); rs != nil || ig != nil {
		t.Fatal("a table without reports read some")
	}
}
