package costs_test

import (
	"errors"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/quota"
)

func TestPriceCostExact(t *testing.T) {
	p := costs.Price{Model: "m", Input: 150000, CachedInput: 75000, CacheWrite: 187500, Output: 600000}
	for _, c := range []struct {
		u    costs.Usage
		want int64
	}{
		{costs.Usage{}, 0},
		{costs.Usage{InputTokens: 1}, 1},                                            // 0.15 µ$ rounds up to 1
		{costs.Usage{InputTokens: 1_000_000}, 150000},                               // exactly $0.15
		{costs.Usage{InputTokens: 1_000_000, OutputTokens: 1}, 150001},              // 150000.6
		{costs.Usage{InputTokens: 20, CachedInputTokens: 20, OutputTokens: 10}, 11}, // 3 + 1.5 + 6 = 10.5
		{costs.Usage{CacheWriteTokens: 8}, 2},                                       // 1.5
	} {
		got, err := p.Cost(c.u)
		if err != nil || got != c.want {
			t.Errorf("%+v: %d, %v; want %d", c.u, got, err, c.want)
		}
	}
	// The bound prices the input at the dearest input price.
	if got, _ := p.MaxCost(costs.TokenEstimate{Input: 1_000_000, Output: 1_000_000}); got != 187500+600000 {
		t.Errorf("MaxCost %d", got)
	}
	// Large counts: exact in 128 bits, an error past an int64.
	if got, err := (costs.Price{Output: 100_000_000_000}).Cost(costs.Usage{OutputTokens: 1 << 40}); err != nil || got != (1<<40)*100_000 {
		t.Errorf("large: %d %v", got, err)
	}
	if _, err := (costs.Price{Output: 1 << 62}).Cost(costs.Usage{OutputTokens: 1 << 62}); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("overflow: %v", err)
	}
	if _, err := p.Cost(costs.Usage{OutputTokens: -1}); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("negative: %v", err)
	}
}

// Cost is ceil(sum / 1e6), checked against math/big over random usages.
func TestPriceCostMatchesBig(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		p := costs.Price{Input: r.Int64N(1e11), CachedInput: r.Int64N(1e11), CacheWrite: r.Int64N(1e11), Output: r.Int64N(1e11)}
		u := costs.Usage{InputTokens: r.Int64N(1 << 40), CachedInputTokens: r.Int64N(1 << 30), CacheWriteTokens: r.Int64N(1 << 20), OutputTokens: r.Int64N(1 << 40)}
		sum := new(big.Int)
		for _, tp := range [][2]int64{{u.InputTokens, p.Input}, {u.CachedInputTokens, p.CachedInput}, {u.CacheWriteTokens, p.CacheWrite}, {u.OutputTokens, p.Output}} {
			sum.Add(sum, new(big.Int).Mul(big.NewInt(tp[0]), big.NewInt(tp[1])))
		}
		q, m := new(big.Int).QuoRem(sum, big.NewInt(1_000_000), new(big.Int))
		if m.Sign() > 0 {
			q.Add(q, big.NewInt(1))
		}
		got, err := p.Cost(u)
		if !q.IsInt64() {
			if err == nil {
				t.Fatalf("%+v %+v: %d, want an overflow error", p, u, got)
			}
			continue
		}
		if err != nil || got != q.Int64() {
			t.Fatalf("%+v %+v: %d, %v; want %s", p, u, got, err, q)
		}
	}
}

func TestBuiltinPrices(t *testing.T) {
	for _, name := range []string{"openai", "anthropic"} {
		p, err := costs.BuiltinPrices(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Models() {
			if !strings.Contains(m.Source, "2026-") && !strings.Contains(m.Source, "2024-") {
				t.Errorf("%s %s: source %q has no date", name, m.Model, m.Source)
			}
			if m.Input <= 0 || m.CachedInput > m.Input {
				t.Errorf("%s %s: %+v", name, m.Model, m)
			}
		}
	}
	p, _ := costs.BuiltinPrices("anthropic")
	if pr, ok := p.Lookup("claude-sonnet-4-20250514"); !ok || pr.Model != "claude-sonnet-4" || pr.Output != 15_000_000 {
		t.Errorf("dated snapshot: %+v %v", pr, ok)
	}
	o, _ := costs.BuiltinPrices("openai")
	if pr, ok := o.Lookup("gpt-4o-mini-2024-07-18"); !ok || pr.Model != "gpt-4o-mini" {
		t.Errorf("gpt-4o-mini snapshot -> %+v", pr)
	}
	if _, ok := o.Lookup("gpt-4"); ok {
		t.Error("gpt-4 priced: want no price (no listed name is its prefix)")
	}
	if _, err := o.Cost("nope", costs.Usage{InputTokens: 1}); !errors.Is(err, costs.ErrUnknownModel) {
		t.Errorf("unknown model: %v", err)
	}
	if _, err := costs.BuiltinPrices("../x"); err == nil {
		t.Error("BuiltinPrices(../x): no error")
	}
}

func TestParsePricesErrors(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{"provider: x\nmodels:\n  m: {input: 1, output: 2}\n", "p.yaml:3: models[m].source: missing source"},
		{"provider: x\nmodels:\n  m:\n    input: 1\n    output: -2\n    source: s\n", "p.yaml:5: models[m].output: price -2"},
		{"provider: x\nmodels:\n  m: {input: 1, source: s}\n", "p.yaml:3: models[m].output: missing output price"},
		{"provider: x\nmodels:\n  m: {input: 1, output: 1, source: s, extra: 3}\n", `unknown field "extra"`},
		{"models:\n  m: {input: 1, output: 1, source: s}\n", "provider: missing"},
		{"provider: x\nmodels: {}\n", "no models"},
		{"provider: x\nmodels:\n  m: {input: \"1\", output: 1, source: s}\n", `want an integer, got "1"`},
		{"provider: [x\n", "bad YAML"},
	} {
		_, err := costs.ParsePrices("p.yaml", []byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("%q: %v, want %q", c.data, err, c.want)
		}
	}
	p, err := costs.ParsePrices("p.json", []byte(`{"provider":"x","models":{"m":{"input":5,"output":7,"source":"s"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if pr, _ := p.Lookup("m"); pr.CachedInput != 5 || pr.CacheWrite != 5 {
		t.Errorf("defaults: %+v", pr)
	}
}
