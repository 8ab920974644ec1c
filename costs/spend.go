package costs

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/quotactl/quotactl/quota"
)

// Spend is a budget counted in money that a cost table declares (Spec.Spend),
// as Table.WithSpend adds one in Go: every method priced by an LLM body
// format charges it the price of the call in micro-dollars. In a file:
//
//	spend:
//	  budget: {name: spend, limit_usd: 500, window: "monthly:America/Los_Angeles"}
//	  prices: openai               # a built-in price table, or a file
//
// limit_usd is the limit in US dollars (at most 6 decimals); limit, in
// micro-dollars, is the form a Spec marshals to. The budget's unit is
// quota.UnitUSDMicro.
type Spend struct {
	// Budget is the spend budget. Its Limit is in micro-dollars ($500 is
	// 500_000_000); its Unit is quota.UnitUSDMicro (set when empty, and no
	// other).
	Budget quota.Budget `json:"budget"`
	// Prices names the price table: a built-in one ("openai", "anthropic";
	// see BuiltinPrices), else a price file (see LoadPrices), relative to
	// the table file's directory when the table is read from a file
	// (Load, Parse), else to the working directory. A table read from a
	// file gives the path as it opened it (Table.Spec).
	Prices string `json:"prices"`
}

// spend reads a table's spend section.
func (d *specDecoder) spend(n *node, field string) (*Spend, error) {
	var s Spend
	var hasBudget, hasPrices bool
	err := d.fields(n, field, []string{"budget", "prices"}, func(key string, v *node, f string) error {
		var err error
		switch key {
		case "budget":
			hasBudget = true
			s.Budget, err = d.spendBudget(v, f)
		case "prices":
			hasPrices = true
			if s.Prices, err = d.str(v, f); err == nil && strings.TrimSpace(s.Prices) == "" {
				err = d.errf(v, f, "empty: name a built-in price table (%s) or a price file", strings.Join(BuiltinPriceNames(), ", "))
			}
		}
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case !hasBudget:
		return nil, d.errf(n, field+".budget", "missing: declare the budget, e.g. {name: spend, limit_usd: 500, window: \"monthly:UTC\"}")
	case !hasPrices:
		return nil, d.errf(n, field+".prices", "missing: name a built-in price table (%s) or a price file", strings.Join(BuiltinPriceNames(), ", "))
	}
	return &s, nil
}

// spendBudget reads the spend section's budget: a budget whose limit is
// limit_usd dollars, or limit micro-dollars.
func (d *specDecoder) spendBudget(n *node, field string) (quota.Budget, error) {
	var b quota.Budget
	var limits []string
	var hasWindow bool
	err := d.fields(n, field, []string{"name", "limit_usd", "limit", "window", "unit"}, func(key string, v *node, f string) error {
		var err error
		switch key {
		case "name":
			b.Name, err = d.str(v, f)
		case "limit_usd":
			limits = append(limits, key)
			b.Limit, err = d.usd(v, f)
		case "limit":
			limits = append(limits, key)
			b.Limit, err = d.int(v, f)
		case "window":
			hasWindow = true
			b.Window, err = d.window(v, f)
		case "unit":
			if b.Unit, err = d.str(v, f); err == nil && b.Unit != quota.UnitUSDMicro {
				err = d.errf(v, f, "unit %q: a spend budget counts micro-dollars (%s); leave unit out", b.Unit, quota.UnitUSDMicro)
			}
		}
		return err
	})
	switch {
	case err != nil:
		return b, err
	case b.Name == "":
		return b, d.errf(n, field+".name", "missing budget name, e.g. name: spend")
	case len(limits) == 0:
		return b, d.errf(n, field+".limit_usd", "missing limit for budget %q: the dollars the window may spend, e.g. limit_usd: 500", b.Name)
	case len(limits) > 1:
		return b, d.errf(n, field+".limit", "both limit_usd and limit: give one (limit_usd in dollars, limit in micro-dollars)")
	case !hasWindow:
		return b, d.errf(n, field+".window", "missing window for budget %q, e.g. monthly:America/Los_Angeles, daily:UTC or sliding:24h", b.Name)
	}
	return b, nil
}

// usd reads an amount of US dollars, "500" or "12.345678", as
// micro-dollars.
func (d *specDecoder) usd(n *node, field string) (int64, error) {
	bad := func() (int64, error) {
		return 0, d.errf(n, field, "want dollars such as 500 or 12.50 (at most 6 decimals), got %s", n.describe())
	}
	if n.kind != scalarNode {
		return bad()
	}
	whole, frac, _ := strings.Cut(strings.ReplaceAll(n.text, "_", ""), ".")
	if whole == "" || len(frac) > 6 || strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return bad()
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > quota.MaxLimit/1_000_000 {
		return 0, d.errf(n, field, "%s dollars: more than a budget holds (%d micro-dollars)", n.text, int64(quota.MaxLimit))
	}
	f, _ := strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	return w*1_000_000 + f, nil
}

// declareSpend adds the spend budget s declares to t (the table without it),
// with the price table it names, price files relative to dir.
func (t *Table) declareSpend(s Spend, dir string) (*Table, error) {
	b := s.Budget
	if b.Unit == "" {
		b.Unit = quota.UnitUSDMicro
	}
	if b.Unit != quota.UnitUSDMicro {
		return nil, specErrorf("spend.budget.unit", "unit %q: a spend budget counts micro-dollars (%s)", b.Unit, quota.UnitUSDMicro)
	}
	if err := b.Validate(); err != nil {
		return nil, specErrorf("spend.budget", "%s", trimInvalid(err))
	}
	if slices.ContainsFunc(t.Budgets, func(x quota.Budget) bool { return x.Name == b.Name }) {
		return nil, specErrorf("spend.budget.name", "budget %q is declared in budgets too: give the spend budget a name of its own", b.Name)
	}
	prices, path, err := spendPrices(s.Prices, dir)
	if err != nil {
		return nil, err
	}
	base := t.spec.Budgets
	nt, err := t.WithSpend(b, prices)
	if err != nil {
		return nil, err
	}
	// The Spec says it as the file does: the spend section, apart from
	// budgets, its price file as opened.
	nt.spec.Budgets = slices.Clone(base)
	nt.spec.Spend = &Spend{Budget: b, Prices: path}
	return nt, nil
}

// spendPrices returns the price table name names: a built-in one, else the
// file at name (relative to dir), and how it was found.
func spendPrices(name, dir string) (*Prices, string, error) {
	if slices.Contains(BuiltinPriceNames(), name) {
		p, err := BuiltinPrices(name)
		return p, name, err
	}
	path := name
	if dir != "" && !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	p, err := LoadPrices(path)
	if err != nil {
		return nil, "", specErrorf("spend.prices", "%q is no built-in price table (%s), and as a file: %v",
			name, strings.Join(BuiltinPriceNames(), ", "), strings.TrimPrefix(err.Error(), "costs: "))
	}
	return p, path, nil
}
