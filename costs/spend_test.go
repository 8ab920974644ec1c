package costs_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/quota"
)

// TestSpendSection: a table file declares a spend budget and its price
// table (built in, or a file beside it); the table has the budget, in
// micro-dollars, and prices a request's bound in it, as WithSpend does in
// Go; its Spec marshals to JSON and loads back.
func TestSpendSection(t *testing.T) {
	tb, err := costs.Load("testdata/spend/enrich.yaml")
	if err != nil {
		t.Fatal(err)
	}
	la, _ := time.LoadLocation("America/Los_Angeles")
	want := quota.Budget{Name: "spend", Limit: 500_000_000, Window: quota.Monthly(la), Unit: quota.UnitUSDMicro}
	if n := len(tb.Budgets); n != 3 || tb.Budgets[2].Name != want.Name || tb.Budgets[2].Limit != want.Limit ||
		tb.Budgets[2].Window.String() != want.Window.String() || tb.Budgets[2].Unit != want.Unit {
		t.Fatalf("budgets %v; want requests, tokens and %v", tb.Budgets, want)
	}
	if tb.Budgets[1].Unit != "tokens" || tb.Budgets[0].Unit != "requests" {
		t.Errorf("units of the declared budgets: %v", tb.Budgets)
	}
	name, prices, ok := tb.Spend()
	if !ok || name != "spend" || prices.Provider != "openai" {
		t.Fatalf("Spend() = %q, %v, %v", name, prices, ok)
	}
	req, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`))
	est, err := tb.EstimateRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := prices.Lookup("gpt-4o-mini")
	bound, _ := p.MaxCost(*est.Tokens)
	if got := est.Charge.Units["spend"]; got != bound || got <= 0 {
		t.Errorf("spend estimate %d micro-dollars; want the bound's price %d", got, bound)
	}

	// The Spec says it as the file does, and round-trips through JSON.
	spec := tb.Spec()
	if spec.Spend == nil || spec.Spend.Prices != "openai" || spec.Spend.Budget.Limit != 500_000_000 || len(spec.Budgets) != 2 {
		t.Fatalf("Spec: spend %+v, budgets %v", spec.Spend, spec.Budgets)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	back, err := costs.Parse("spec.json", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if !reflect.DeepEqual(back.Spec(), spec) || !reflect.DeepEqual(back.Budgets, tb.Budgets) {
		t.Errorf("JSON round trip differs:\n%+v\n%+v", back.Spec(), spec)
	}

	// A price file beside the table: relative to the table's directory.
	own, err := costs.Load(filepath.Join("testdata", "spend", "own-prices.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if name, prices, ok := own.Spend(); !ok || name != "spend" || prices.Source != "tests" || own.Budgets[2].Limit != 12_500_000 {
		t.Fatalf("own prices: %q %+v %v; budgets %v", name, prices, ok, own.Budgets)
	}
	if got := own.Spec().Spend.Prices; got != filepath.Join("testdata", "spend", "prices", "mini.yaml") {
		t.Errorf("Spec's price file %q: want the path as opened", got)
	}
	// Other hosts keep the spend budget.
	moved, err := own.WithHosts("localhost:8080")
	if err != nil {
		t.Fatal(err)
	}
	if name, _, ok := moved.Spend(); !ok || name != "spend" || len(moved.Budgets) != 3 {
		t.Errorf("WithHosts lost the spend budget: %v", moved.Budgets)
	}
	// WithSpend in Go replaces the file's.
	other, err := tb.WithSpend(quota.Budget{Name: "daily_spend", Limit: 1_000_000, Window: quota.Daily(time.UTC)}, prices)
	if err != nil {
		t.Fatal(err)
	}
	if name, _, _ := other.Spend(); name != "daily_spend" || len(other.Budgets) != 3 || other.Budgets[2].Unit != quota.UnitUSDMicro {
		t.Errorf("WithSpend over a declared spend: %q, %v", name, other.Budgets)
	}
}

// TestSpendSectionErrors: a bad spend section is an error naming the file,
// line and field.
func TestSpendSectionErrors(t *testing.T) {
	const head = "api: openai\nbudgets:\n  - {name: requests, limit: 500, window: \"sliding:1m\"}\n  - {name: tokens, limit: 30000, window: \"sliding:1m\", unit: tokens}\n"
	const methods = "methods:\n  chat: {routes: [POST /v1/chat/completions], cost: {requests: 1}, body: {format: openai-chat, input: [tokens], output: [tokens]}}\n"
	for _, c := range []struct{ spend, want string }{
		{"spend: openai\n", "t.yaml:5: spend: want a mapping"},
		{"spend: {prices: openai}\n", "t.yaml:5: spend.budget: missing"},
		{"spend: {budget: {name: spend, limit_usd: 5, window: daily:UTC}}\n", "t.yaml:5: spend.prices: missing"},
		{"spend: {budget: {name: spend, limit_usd: 5, window: daily:UTC}, prices: \"\"}\n", "t.yaml:5: spend.prices: empty"},
		{"spend: {budget: {name: spend, limit_usd: 5, window: daily:UTC}, prices: gemini}\n", `t.yaml:5: spend.prices: "gemini" is no built-in price table (anthropic, openai)`},
		{"spend: {budget: {name: spend, window: daily:UTC}, prices: openai}\n", "t.yaml:5: spend.budget.limit_usd: missing limit"},
		{"spend: {budget: {name: spend, limit_usd: 5, limit: 5000000, window: daily:UTC}, prices: openai}\n", "t.yaml:5: spend.budget.limit: both limit_usd and limit"},
		{"spend: {budget: {name: spend, limit_usd: five, window: daily:UTC}, prices: openai}\n", `t.yaml:5: spend.budget.limit_usd: want dollars such as 500 or 12.50 (at most 6 decimals), got "five"`},
		{"spend: {budget: {name: spend, limit_usd: 0.0000001, window: daily:UTC}, prices: openai}\n", "spend.budget.limit_usd: want dollars"},
		{"spend: {budget: {name: spend, limit_usd: -5, window: daily:UTC}, prices: openai}\n", "spend.budget.limit_usd: want dollars"},
		{"spend: {budget: {name: spend, limit_usd: 0, window: daily:UTC}, prices: openai}\n", "t.yaml:5: spend.budget: budget \"spend\": limit is 0, must be > 0"},
		{"spend: {budget: {name: spend, limit_usd: 99999999999, window: daily:UTC}, prices: openai}\n", "spend.budget.limit_usd: 99999999999 dollars: more than a budget holds"},
		{"spend: {budget: {name: spend, limit_usd: 5}, prices: openai}\n", "t.yaml:5: spend.budget.window: missing window"},
		{"spend: {budget: {name: spend, limit_usd: 5, window: weekly}, prices: openai}\n", "t.yaml:5: spend.budget.window: "},
		{"spend: {budget: {limit_usd: 5, window: daily:UTC}, prices: openai}\n", "t.yaml:5: spend.budget.name: missing budget name"},
		{"spend: {budget: {name: tokens, limit_usd: 5, window: daily:UTC}, prices: openai}\n", `t.yaml:5: spend.budget.name: budget "tokens" is declared in budgets too`},
		{"spend: {budget: {name: spend, limit_usd: 5, window: daily:UTC, unit: tokens}, prices: openai}\n", `t.yaml:5: spend.budget.unit: unit "tokens": a spend budget counts micro-dollars (usd-micro)`},
		{"spend: {budget: {name: spend, limit_usd: 5, window: daily:UTC, cap: 3}, prices: openai}\n", `t.yaml:5: spend.budget.cap: unknown field "cap"`},
		{"spend: {budget: {name: spend, limit_usd: 5, window: daily:UTC}, prices: openai, model: x}\n", `t.yaml:5: spend.model: unknown field "model"`},
	} {
		_, err := costs.Parse("t.yaml", []byte(head+c.spend+methods))
		var se *costs.SpecError
		if !errors.As(err, &se) || !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want a SpecError containing %q", c.spend, err, c.want)
		}
	}
}

// TestBudgetUnit: a budget declares its unit in a file; a bad one is an
// error naming the field; the built-in profiles declare theirs.
func TestBudgetUnit(t *testing.T) {
	tb := parse(t, "t.yaml", strings.Replace(goodYAML, "    window: daily:UTC\n", "    window: daily:UTC\n    unit: requests\n", 1))
	if tb.Budgets[0].Unit != "requests" || tb.Budgets[1].Unit != "" || tb.Budgets[1].UnitOf() != quota.DefaultUnit {
		t.Errorf("units %v", tb.Budgets)
	}
	for _, c := range []struct{ unit, want string }{
		{"    unit: \"\"\n", `t.yaml:8: budgets[0].unit: empty unit name`},
		{"    unit: US dollars\n", `t.yaml:8: budgets[0].unit: unit name "US dollars": only letters`},
		{"    unit: [tokens]\n", `t.yaml:8: budgets[0].unit: want a string, got a list`},
	} {
		_, err := costs.Parse("t.yaml", []byte(strings.Replace(goodYAML, "    window: daily:UTC\n", "    window: daily:UTC\n"+c.unit, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want %q", c.unit, err, c.want)
		}
	}
	for name, want := range map[string]map[string]string{
		"openai":        {"requests": "requests", "tokens": "tokens"},
		"anthropic":     {"requests": "requests", "input_tokens": "tokens", "output_tokens": "tokens"},
		"shopify-admin": {"points": "points"},
		"github":        {"core": "requests", "graphql": "points"},
		"youtube":       {"units": "units", "search": "units"},
	} {
		got := map[string]string{}
		for _, b := range builtin(t, name).Budgets {
			got[b.Name] = b.Unit
		}
		for b, u := range want {
			if got[b] != u {
				t.Errorf("profile %s: budget %s has unit %q, want %q", name, b, got[b], u)
			}
		}
	}
}
