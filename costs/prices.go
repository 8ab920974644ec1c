package costs

import (
	"embed"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"strings"

	"github.com/quotactl/quotactl/quota"
)

// Price is what one model's tokens cost, in micro-dollars (millionths of a
// US dollar) per million tokens: $0.15 per million tokens is 150000.
type Price struct {
	// Model is the model's name as the provider's API takes it, e.g.
	// "gpt-4o-mini". It also prices the model's dated snapshots
	// ("gpt-4o-mini-2024-07-18", see Prices.Lookup).
	Model string `json:"model"`
	// Input is the price of uncached prompt tokens.
	Input int64 `json:"input"`
	// CachedInput is the price of prompt tokens read from the provider's
	// cache. Unset in a file: the input price.
	CachedInput int64 `json:"cached_input"`
	// CacheWrite is the price of prompt tokens written to the cache
	// (Anthropic's 5-minute cache writes). Unset in a file: the input
	// price.
	CacheWrite int64 `json:"cache_write"`
	// Output is the price of output tokens (reasoning tokens included).
	Output int64 `json:"output"`
	// Source says where the prices come from: a URL and the date read.
	Source string `json:"source"`
}

// maxPrice bounds a price: $100,000 per million tokens, far above any.
const maxPrice = 100_000_000_000

// Cost returns what u costs at p, in micro-dollars, rounded up: the sum
// of tokens times price over the four kinds of tokens, divided by a
// million once, so that the result is exact to the micro-dollar and never
// below the provider's bill. It is an error wrapping quota.ErrInvalid when
// the cost does not fit in an int64.
func (p Price) Cost(u Usage) (int64, error) {
	return microDollars(p.Model, [][2]int64{
		{u.InputTokens, p.Input}, {u.CachedInputTokens, p.CachedInput},
		{u.CacheWriteTokens, p.CacheWrite}, {u.OutputTokens, p.Output},
	})
}

// MaxCost returns an upper bound of what a request estimated at e costs
// at p: its input bound at the highest input price (a prompt may be
// written to the cache, which costs more than reading it), its output
// ceiling at the output price.
func (p Price) MaxCost(e TokenEstimate) (int64, error) {
	return microDollars(p.Model, [][2]int64{
		{e.Input, max(p.Input, p.CachedInput, p.CacheWrite)}, {e.Output, p.Output},
	})
}

// microDollars returns ceil(sum(tokens*price) / 1e6) in 128-bit integer
// arithmetic.
func microDollars(model string, terms [][2]int64) (int64, error) {
	var hi, lo uint64
	for _, t := range terms {
		if t[0] < 0 || t[1] < 0 {
			return 0, fmt.Errorf("%w: costs: %s: negative tokens or price", quota.ErrInvalid, model)
		}
		h, l := bits.Mul64(uint64(t[0]), uint64(t[1]))
		var c uint64
		lo, c = bits.Add64(lo, l, 0)
		hi, _ = bits.Add64(hi, h, c)
	}
	const million = 1_000_000
	if hi >= million { // the quotient would not fit in 64 bits
		return 0, fmt.Errorf("%w: costs: %s: the cost does not fit in an int64 of micro-dollars", quota.ErrInvalid, model)
	}
	q, r := bits.Div64(hi, lo, million)
	if r > 0 {
		q++
	}
	if q > math.MaxInt64 {
		return 0, fmt.Errorf("%w: costs: %s: the cost does not fit in an int64 of micro-dollars", quota.ErrInvalid, model)
	}
	return int64(q), nil
}

// Prices is a provider's price table: per model, what its tokens cost.
// It is immutable and safe for concurrent use.
type Prices struct {
	// Provider names the provider, e.g. "openai".
	Provider string
	// Source says where the prices come from.
	Source string
	models map[string]Price
}

// Lookup returns the price of model: the model the table lists by that
// name, else the one whose name followed by '-' is the longest prefix of
// model (a dated snapshot, "claude-sonnet-4-20250514", is priced as
// "claude-sonnet-4").
func (p *Prices) Lookup(model string) (Price, bool) {
	if pr, ok := p.models[model]; ok {
		return pr, true
	}
	best := ""
	for name := range p.models {
		if strings.HasPrefix(model, name+"-") && len(name) > len(best) {
			best = name
		}
	}
	if best == "" {
		return Price{}, false
	}
	return p.models[best], true
}

// Models returns the table's prices, sorted by model.
func (p *Prices) Models() []Price {
	out := make([]Price, 0, len(p.models))
	for _, pr := range p.models {
		out = append(out, pr)
	}
	slices.SortFunc(out, func(a, b Price) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// Cost prices a usage with the price of its model (u.Model, else model).
// A model the table does not list is an error wrapping ErrUnknownModel.
func (p *Prices) Cost(model string, u Usage) (int64, error) {
	if u.Model != "" {
		model = u.Model
	}
	pr, ok := p.Lookup(model)
	if !ok {
		return 0, p.unknown(model)
	}
	return pr.Cost(u)
}

func (p *Prices) unknown(model string) error {
	return fmt.Errorf("%w: %q has no price in the %s price table", ErrUnknownModel, model, p.Provider)
}

// ErrUnknownModel is wrapped when a price table lists no price for a
// model: a spend budget cannot price a call it has no price for.
var ErrUnknownModel = errors.New("costs: unknown model")

//go:embed prices/*.yaml
var priceFiles embed.FS

// BuiltinPrices returns the named built-in price table: "openai" or
// "anthropic" (prices/*.yaml in the package source, with the source and
// date of every price).
func BuiltinPrices(name string) (*Prices, error) {
	data, err := priceFiles.ReadFile("prices/" + name + ".yaml")
	if err != nil || strings.ContainsAny(name, "/\\.") {
		return nil, fmt.Errorf("%w: costs: no built-in price table %q (built-in: %s)", quota.ErrInvalid, name, strings.Join(BuiltinPriceNames(), ", "))
	}
	return ParsePrices("prices/"+name+".yaml", data)
}

// BuiltinPriceNames returns the names of the built-in price tables.
func BuiltinPriceNames() []string {
	entries, _ := priceFiles.ReadDir("prices")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	return names
}

// LoadPrices reads a price table from a YAML or JSON file:
//
//	provider: openai
//	source: https://platform.openai.com/docs/pricing
//	models:
//	  gpt-4o-mini:                 # micro-dollars per million tokens
//	    input: 150000              # $0.15
//	    cached_input: 75000        # optional; default: input
//	    cache_write: 150000        # optional; default: input
//	    output: 600000
//	    source: https://platform.openai.com/docs/pricing (read 2026-11-28)
//
// Every model needs input, output and a source. A bad file is a *SpecError
// naming the file, line and field.
func LoadPrices(path string) (*Prices, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("costs: %w", err)
	}
	return ParsePrices(path, data)
}

// ParsePrices reads a price table from data (see LoadPrices); name is the
// file name used in errors, its extension picks the format.
func ParsePrices(name string, data []byte) (*Prices, error) {
	var root *node
	var err error
	if isJSON(name, data) {
		root, err = parseJSON(data)
	} else {
		root, err = parseYAML(data)
	}
	if err == nil {
		var p *Prices
		if p, err = decodePrices(&specDecoder{lines: lineMap{}}, root); err == nil {
			return p, nil
		}
	}
	var se *SpecError
	if errors.As(err, &se) {
		se.File = name
	}
	return nil, err
}

func decodePrices(d *specDecoder, root *node) (*Prices, error) {
	p := &Prices{models: map[string]Price{}}
	var sawModels bool
	err := d.fields(root, "", []string{"provider", "source", "models"}, func(key string, v *node, f string) error {
		var err error
		switch key {
		case "provider":
			p.Provider, err = d.str(v, f)
		case "source":
			p.Source, err = d.str(v, f)
		case "models":
			sawModels = true
			err = d.priceModels(p, v, f)
		}
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case p.Provider == "":
		return nil, d.errf(root, "provider", "missing: name the provider, e.g. provider: openai")
	case !sawModels || len(p.models) == 0:
		return nil, d.errf(root, "models", "no models: price at least one")
	}
	return p, nil
}

func (d *specDecoder) priceModels(p *Prices, n *node, field string) error {
	if n.kind != mapNode {
		return d.errf(n, field, "want a mapping of model names to prices, got %s", n.describe())
	}
	for i, k := range n.keys {
		f := field + "[" + k.text + "]"
		if strings.TrimSpace(k.text) == "" || strings.ContainsAny(k.text, " \t") {
			return d.errf(k, f, "model name %q: want a name without spaces", k.text)
		}
		if _, dup := p.models[k.text]; dup {
			return d.errf(k, f, "duplicate model")
		}
		pr := Price{Model: k.text, CachedInput: -1, CacheWrite: -1, Input: -1, Output: -1}
		v := n.items[i]
		err := d.fields(v, f, []string{"input", "cached_input", "cache_write", "output", "source"}, func(key string, v *node, f string) error {
			if key == "source" {
				var err error
				pr.Source, err = d.str(v, f)
				return err
			}
			x, err := d.int(v, f)
			if err != nil {
				return err
			}
			if x < 0 || x > maxPrice {
				return d.errf(v, f, "price %d: want 0 to %d micro-dollars per million tokens", x, int64(maxPrice))
			}
			switch key {
			case "input":
				pr.Input = x
			case "cached_input":
				pr.CachedInput = x
			case "cache_write":
				pr.CacheWrite = x
			case "output":
				pr.Output = x
			}
			return nil
		})
		switch {
		case err != nil:
			return err
		case pr.Input < 0:
			return d.errf(v, f+".input", "missing input price (micro-dollars per million tokens)")
		case pr.Output < 0:
			return d.errf(v, f+".output", "missing output price (micro-dollars per million tokens)")
		case strings.TrimSpace(pr.Source) == "":
			return d.errf(v, f+".source", "missing source: say where the prices come from (a URL and the date read)")
		}
		if pr.CachedInput < 0 {
			pr.CachedInput = pr.Input
		}
		if pr.CacheWrite < 0 {
			pr.CacheWrite = pr.Input
		}
		p.models[k.text] = pr
	}
	return nil
}
