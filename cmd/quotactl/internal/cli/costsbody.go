package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/view"
)

// bodyEstimateJSON is costs estimate --body --json.
type bodyEstimateJSON struct {
	Table        string           `json:"table"`
	API          string           `json:"api"`
	Method       string           `json:"method"`
	Format       string           `json:"format"`
	Model        string           `json:"model,omitempty"`
	InputTokens  int64            `json:"input_tokens"`
	OutputTokens int64            `json:"output_tokens"`
	Units        map[string]int64 `json:"units"`
	MicroDollars *int64           `json:"micro_dollars,omitempty"`
	PriceSource  string           `json:"price_source,omitempty"`
}

// costsEstimateBodyRun prices one request body with the table (costs
// estimate --body).
func costsEstimateBodyRun(opts *costsEstimateOptions) error {
	if opts.API == "" && opts.Table == "" {
		return usageErrorf("--body needs a table: give the API (openai, anthropic, shopify-admin) or --table")
	}
	name, tb, err := loadTable(opts.API, opts.Table)
	if err != nil {
		return err
	}
	if opts.API != "" && tb.API != opts.API {
		return usageErrorf("table %s is for API %q, not %q", name, tb.API, opts.API)
	}
	body, err := readBodyFile(opts.Body, opts.io.In)
	if err != nil {
		return err
	}
	m, err := bodyMethod(tb, name, opts.Method, body)
	if err != nil {
		return err
	}
	req, err := bodyRequest(tb, m, body)
	if err != nil {
		return err
	}
	est, err := tb.EstimateRequest(req)
	if err != nil {
		if errors.Is(err, costs.ErrUnbounded) || errors.Is(err, costs.ErrBadBody) || errors.Is(err, costs.ErrBodyTooLarge) {
			return usageErrorf("--body %s: %v", opts.Body, err)
		}
		return err
	}
	out := bodyEstimateJSON{Table: name, API: tb.API, Method: m.Name, Format: string(m.Body.Format), Units: est.Charge.Units}
	if t := est.Tokens; t != nil {
		out.Model, out.InputTokens, out.OutputTokens = t.Model, t.Input, t.Output
		if err := opts.spendBound(&out, tb, *t); err != nil {
			return err
		}
	}
	if opts.json {
		return opts.printJSON(out)
	}
	return printBodyEstimate(opts, tb, out)
}

func readBodyFile(path string, stdin io.Reader) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, usageErrorf("--body: %v", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, costs.MaxBodyBytes+1))
	if err != nil {
		return nil, usageErrorf("--body %s: %v", path, err)
	}
	if len(data) > costs.MaxBodyBytes {
		return nil, usageErrorf("--body %s: %v: more than %d bytes", path, costs.ErrBodyTooLarge, costs.MaxBodyBytes)
	}
	return data, nil
}

// bodyMethod picks the method the body is sent to: --method, the table's
// only body-priced method, or the one whose format the body's fields name.
func bodyMethod(tb *costs.Table, name, method string, body []byte) (costs.Method, error) {
	var priced []costs.Method
	for _, m := range tb.Methods() {
		if m.Body != nil {
			priced = append(priced, m)
		}
	}
	names := func() string {
		var s []string
		for _, m := range priced {
			s = append(s, m.Name)
		}
		return strings.Join(s, ", ")
	}
	if method != "" {
		m, ok := tb.Method(method)
		if !ok || m.Body == nil {
			return costs.Method{}, usageErrorf("table %s has no method %q priced by its body (those it has: %s)", name, method, names())
		}
		return m, nil
	}
	switch len(priced) {
	case 0:
		return costs.Method{}, usageErrorf("table %s prices no method by its body: --body needs a table such as openai or anthropic", name)
	case 1:
		return priced[0], nil
	}
	var want []costs.BodyFormat
	switch has := func(f string) bool { return bytes.Contains(body, []byte(`"`+f+`"`)) }; {
	case has("messages"):
		want = []costs.BodyFormat{costs.OpenAIChat, costs.AnthropicMessages}
	case has("max_output_tokens") || has("instructions"):
		want = []costs.BodyFormat{costs.OpenAIResponses}
	case has("input"):
		want = []costs.BodyFormat{costs.OpenAIEmbeddings, costs.OpenAIResponses}
	case has("query"):
		want = []costs.BodyFormat{costs.ShopifyGraphQL}
	}
	for _, f := range want {
		if i := slices.IndexFunc(priced, func(m costs.Method) bool { return m.Body.Format == f }); i >= 0 {
			return priced[i], nil
		}
	}
	return costs.Method{}, usageErrorf("cannot tell which method of table %s the body is for: give --method (one of: %s)", name, names())
}

// bodyRequest builds the request the body would be sent in: the method's
// first route, to the table's first host.
func bodyRequest(tb *costs.Table, m costs.Method, body []byte) (*http.Request, error) {
	verb, target, _ := strings.Cut(m.Routes[0], " ")
	target, _, _ = strings.Cut(target, "?")
	var segs []string
	for _, s := range strings.Split(target, "/") {
		if strings.HasPrefix(s, "{") {
			s = "x"
		}
		segs = append(segs, s)
	}
	host := "localhost"
	if hs := tb.Hosts(); len(hs) > 0 {
		host = hs[0]
	}
	req, err := http.NewRequest(verb, "https://"+host+strings.Join(segs, "/"), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("costs estimate: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// spendBound prices the request's bound with --prices (default: the price
// table of the table's spend budget, else the built-in price table named
// like the API, when there is one).
func (opts *costsEstimateOptions) spendBound(out *bodyEstimateJSON, tb *costs.Table, t costs.TokenEstimate) error {
	var p *costs.Prices
	var err error
	api := tb.API
	_, declared, spends := tb.Spend()
	switch {
	case opts.Prices == "" && spends:
		p = declared
	case opts.Prices != "" && slices.Contains(costs.BuiltinPriceNames(), opts.Prices):
		p, err = costs.BuiltinPrices(opts.Prices)
	case opts.Prices != "":
		if p, err = costs.LoadPrices(opts.Prices); err != nil {
			return usageErrorf("--prices %s: %v", opts.Prices, err)
		}
	case slices.Contains(costs.BuiltinPriceNames(), api):
		p, err = costs.BuiltinPrices(api)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	pr, ok := p.Lookup(t.Model)
	if !ok {
		out.PriceSource = fmt.Sprintf("no price for model %q in the %s price table", t.Model, p.Provider)
		return nil
	}
	n, err := pr.MaxCost(t)
	if err != nil {
		return err
	}
	out.MicroDollars, out.PriceSource = &n, pr.Source
	return nil
}

func printBodyEstimate(opts *costsEstimateOptions, tb *costs.Table, out bodyEstimateJSON) error {
	w := opts.io.Out
	if opts.io.TTY {
		model := ""
		if out.Model != "" {
			model = ", model " + out.Model
		}
		fmt.Fprintf(w, "Request body %s: %s %s (%s%s), cost table %s\n", opts.Body, out.API, out.Method, out.Format, model, out.Table)
	}
	unit := map[string]string{}
	for _, b := range tb.Budgets {
		unit[b.Name] = b.Unit
	}
	t := &table{header: []string{"BUDGET", "UNITS"}}
	for _, b := range slices.Sorted(maps.Keys(out.Units)) {
		t.add(b, view.Amount(out.Units[b], unit[b])) // "116 tokens"; a spend budget in dollars
	}
	if err := t.print(w, opts.io.TTY); err != nil {
		return err
	}
	if out.Format != string(costs.ShopifyGraphQL) {
		fmt.Fprintf(w, "input tokens (bound): %d\noutput tokens (ceiling): %d\n", out.InputTokens, out.OutputTokens)
	}
	switch {
	case out.MicroDollars != nil:
		fmt.Fprintf(w, "spend (bound): %d micro-dollars ($%s)\n", *out.MicroDollars, dollars(*out.MicroDollars))
		if opts.io.TTY {
			fmt.Fprintf(w, "price: %s\n", out.PriceSource)
		}
	case out.PriceSource != "":
		fmt.Fprintf(w, "spend: unknown (%s)\n", out.PriceSource)
	}
	return nil
}

// dollars writes micro-dollars as dollars with six decimals.
func dollars(micro int64) string {
	return fmt.Sprintf("%d.%06d", micro/1_000_000, micro%1_000_000)
}
