package dashboard

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/quota"
)

// chargeEnrich adds to w's store an enrichment job's OpenAI budgets, from
// the cost table file with a spend section that the costs tests load
// (requests and tokens a minute, $500 a month), and charges them one call:
// 1,234 tokens and $12.34.
func chargeEnrich(t testing.TB, w *world) {
	t.Helper()
	table, err := costs.Load("../costs/testdata/spend/enrich.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l, err := quota.New(w.store, table.API, table.Budgets, quota.WithClock(w.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	job := quota.Credential{Secret: "sk-dashboard-enrich", Label: "enrich"}
	if _, err := l.Take(context.Background(), job, quota.Charge{Method: "chat.completions", Units: map[string]int64{"requests": 1, "tokens": 1234, "spend": 12_340_000}}); err != nil {
		t.Fatal(err)
	}
}

// TestPageShowsUnits: the page shows tokens as tokens and a spend budget
// as dollars, in the budget rows and the charts, and /api/status names
// each budget's unit; budgets in the default unit keep bare numbers.
func TestPageShowsUnits(t *testing.T) {
	w := seed(t)
	chargeEnrich(t, w)
	srv := serve(t, w)
	code, page := get(t, srv, "/")
	if code != 200 {
		t.Fatalf("GET / = %d", code)
	}
	for _, want := range []string{
		`<span data-field="used">1,234 tokens</span>`,
		`<span data-field="limit">30,000 tokens</span>`,
		`<td class="n" data-field="remaining">28,766 tokens</td>`,
		`<span data-field="used">$12.34</span>`,
		`<span data-field="limit">$500.00</span>`,
		`<td class="n" data-field="remaining">$487.66</td>`,
		`<span data-field="used">1 request</span>`,
		`1,234 tokens of 30,000 tokens (4%)`,
		`$12.34 of $500.00 (2%)`,
		`<span data-field="used">9,700</span>`, // youtube's units: bare numbers
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	_, body := get(t, srv, "/api/status")
	var rows []view.Status
	if err := json.Unmarshal([]byte(body), &rows); err != nil {
		t.Fatal(err)
	}
	units := map[string]string{}
	for _, r := range rows {
		units[r.API+"/"+r.Budget] = r.Unit
	}
	for b, want := range map[string]string{"openai/tokens": "tokens", "openai/spend": quota.UnitUSDMicro, "youtube/units": quota.DefaultUnit} {
		if units[b] != want {
			t.Errorf("/api/status: %s has unit %q, want %q", b, units[b], want)
		}
	}
}
