package costs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"

	"github.com/quotactl/quotactl/quota"
)

// BodyPricing prices a method whose cost is known only from its body:
// before the call, an upper bound read from the request (an LLM request's
// prompt and output ceiling; a GraphQL query's estimated cost), and after
// it, the actual read from the response (the usage object, the stream's
// usage events, Shopify's actualQueryCost). In a table file:
//
//	chat.completions:
//	  routes: [POST /v1/chat/completions]
//	  cost: {requests: 1}           # fixed units, as for any method
//	  body: {format: openai-chat, input: [tokens], output: [tokens]}
//	graphql:
//	  routes: [POST /admin/api/2025-10/graphql.json]
//	  cost: {points: 100}           # the estimate of a query's cost
//	  body: {format: shopify-graphql, query_cost: [points]}
type BodyPricing struct {
	// Format is the API's body format, e.g. "openai-chat".
	Format BodyFormat `json:"format"`
	// Input names the budgets charged the prompt's tokens (an LLM format).
	Input []string `json:"input,omitempty"`
	// Output names the budgets charged the output tokens (an LLM format).
	// A budget in both Input and Output is charged their sum.
	Output []string `json:"output,omitempty"`
	// QueryCost names the budgets charged a GraphQL query's calculated
	// cost (shopify-graphql). The method's Cost gives each one's estimate,
	// which the caller may replace per request (WithQueryCost).
	QueryCost []string `json:"query_cost,omitempty"`
}

func (b *BodyPricing) clone() *BodyPricing {
	if b == nil {
		return nil
	}
	return &BodyPricing{Format: b.Format, Input: cloneStrs(b.Input), Output: cloneStrs(b.Output), QueryCost: cloneStrs(b.QueryCost)}
}

// budgets returns every budget the body prices, sorted, without repeats.
func (b *BodyPricing) budgets() []string {
	all := slices.Concat(b.Input, b.Output, b.QueryCost)
	slices.Sort(all)
	return slices.Compact(all)
}

// checkBody checks a method's body pricing; field is "methods[NAME].body".
func (t *Table) checkBody(field string, m Method) error {
	b := m.Body
	if b == nil {
		return nil
	}
	if m.Free {
		return specErrorf(field, "a free method is not priced by its body: drop body or free")
	}
	if !slices.Contains(BodyFormats, b.Format) {
		return specErrorf(field+".format", "unknown format %q (known: %s)", b.Format, formatList())
	}
	lists := []struct {
		name string
		v    []string
	}{{"input", b.Input}, {"output", b.Output}, {"query_cost", b.QueryCost}}
	for _, l := range lists {
		for i, name := range l.v {
			f := fmt.Sprintf("%s.%s[%d]", field, l.name, i)
			if _, ok := t.budgets[name]; !ok {
				return specErrorf(f, "unknown budget %q (budgets: %s)", name, t.budgetNames())
			}
			if slices.Index(l.v, name) != i {
				return specErrorf(f, "budget %q listed twice", name)
			}
		}
	}
	if b.Format == ShopifyGraphQL {
		switch {
		case len(b.Input)+len(b.Output) > 0:
			return specErrorf(field, "format %s has no tokens: name its budgets in query_cost", b.Format)
		case len(b.QueryCost) == 0:
			return specErrorf(field+".query_cost", "no budgets: name those the query cost is charged to, e.g. [points]")
		}
		for _, name := range b.QueryCost {
			if _, ok := m.Cost[name]; !ok {
				return specErrorf(field+".query_cost", "budget %q has no estimate: give it in the method's cost, e.g. cost: {%s: 100}", name, name)
			}
		}
		return nil
	}
	switch {
	case len(b.QueryCost) > 0:
		return specErrorf(field+".query_cost", "format %s is priced in tokens: use input and output", b.Format)
	case len(b.Input)+len(b.Output) == 0:
		return specErrorf(field, "no budgets: name those the tokens are charged to in input and output, e.g. input: [tokens]")
	}
	for _, name := range b.budgets() {
		if _, fixed := m.Cost[name]; fixed {
			return specErrorf(field, "budget %q is priced both by the method's cost and by its body: name it in one", name)
		}
	}
	return nil
}

// body reads a method's body pricing.
func (d *specDecoder) body(n *node, field string) (*BodyPricing, error) {
	b := &BodyPricing{}
	err := d.fields(n, field, []string{"format", "input", "output", "query_cost"}, func(key string, v *node, f string) error {
		var err error
		switch key {
		case "format":
			var s string
			s, err = d.str(v, f)
			b.Format = BodyFormat(s)
		case "input":
			b.Input, err = d.list(v, f, "leave input out to charge no budget the prompt")
		case "output":
			b.Output, err = d.list(v, f, "leave output out to charge no budget the output")
		case "query_cost":
			b.QueryCost, err = d.list(v, f, "name the budgets the query cost is charged to")
		}
		return err
	})
	if err == nil && b.Format == "" {
		err = d.errf(n, field+".format", "missing format (known: %s)", formatList())
	}
	return b, err
}

// RequestEstimate is what a request may cost, found by
// Table.EstimateRequest before it is sent.
type RequestEstimate struct {
	// Charge is what to take before sending: the method's fixed units plus
	// the body's bounds, per budget.
	Charge quota.Charge
	// Body is the method's body pricing (nil: priced by its route alone).
	Body *BodyPricing
	// Tokens bounds an LLM request (nil for other formats).
	Tokens *TokenEstimate
	// MicroDollars is an upper bound of what the call costs, when the
	// table has a spend budget (Table.WithSpend); else 0.
	MicroDollars int64
}

// Excess returns, per budget, what actual charges beyond the estimate:
// the units a settle cannot take back and a second charge must count.
// Empty when actual is within the estimate.
func (e RequestEstimate) Excess(actual map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for b, n := range actual {
		if over := n - e.Charge.Units[b]; over > 0 {
			out[b] = over
		}
	}
	return out
}

type queryCostKey struct{}

// WithQueryCost returns a context that makes Table.EstimateRequest price a
// GraphQL request at units instead of the table's estimate: the caller's
// own estimate of the query's cost (for Shopify, the requestedQueryCost an
// earlier run of the same query reported). units must be > 0.
func WithQueryCost(ctx context.Context, units int64) context.Context {
	return context.WithValue(ctx, queryCostKey{}, units)
}

// EstimateRequest prices req, reading its body when its method is priced
// by it (Method.Body): the charge to take before sending, never below
// what the upstream bills or counts against its limits (see
// EstimateTokens for the bound of an LLM request). It reads the body
// whole, at most MaxBodyBytes, and restores it (ReadRequestBody), so the
// request can still be sent. A method priced by its route alone gets the
// charge Price gives. The errors are Price's, ErrBodyTooLarge,
// EstimateTokens's, and ErrUnknownModel when the table has a spend budget
// and no price for the request's model.
func (t *Table) EstimateRequest(req *http.Request) (RequestEstimate, error) {
	ch, r, err := t.price(req)
	if err != nil {
		return RequestEstimate{}, err
	}
	if r == nil || r.m.Body == nil {
		return RequestEstimate{Charge: ch}, nil
	}
	b := r.m.Body
	est := RequestEstimate{Body: b.clone(), Charge: quota.Charge{Method: ch.Method, Units: maps.Clone(ch.Units)}}
	if b.Format == ShopifyGraphQL {
		if n, ok := req.Context().Value(queryCostKey{}).(int64); ok {
			if n <= 0 {
				return RequestEstimate{}, fmt.Errorf("%w: costs: %s: query cost estimate %d: must be > 0", quota.ErrInvalid, ch.Method, n)
			}
			for _, name := range b.QueryCost {
				est.Charge.Units[name] = n
			}
		}
		return est, nil
	}
	body, err := ReadRequestBody(req, MaxBodyBytes)
	if err != nil {
		return RequestEstimate{}, err
	}
	tok, err := EstimateTokens(b.Format, body)
	if err != nil {
		return RequestEstimate{}, fmt.Errorf("%s: %w", ch.Method, err)
	}
	est.Tokens = &tok
	for _, name := range b.Input {
		est.Charge.Units[name] += tok.Input
	}
	for _, name := range b.Output {
		est.Charge.Units[name] += tok.Output
	}
	if t.spend != "" {
		pr, ok := t.prices.Lookup(tok.Model)
		if !ok {
			return RequestEstimate{}, fmt.Errorf("%s: %w", ch.Method, t.prices.unknown(tok.Model))
		}
		if est.MicroDollars, err = pr.MaxCost(tok); err != nil {
			return RequestEstimate{}, err
		}
		est.Charge.Units[t.spend] = max(est.MicroDollars, 1)
	}
	for name, n := range est.Charge.Units {
		if n <= 0 {
			delete(est.Charge.Units, name) // a budget charged nothing (an embedding's output)
		}
	}
	return est, nil
}

// ActualUnits returns what a call estimated at est really cost per budget,
// from the usage its response reported: the fixed units as charged, the
// input budgets the prompt tokens the provider's input limit counts
// (Usage.LimitedInputTokens), the output budgets the output tokens, the
// query-cost budgets Shopify's actualQueryCost (0 for a THROTTLED
// response: nothing ran), the spend budget the usage's price in
// micro-dollars. Budgets est does not charge are left out. Settle the
// reservation to the result; what it has above est is Excess.
func (t *Table) ActualUnits(est RequestEstimate, u Usage) (map[string]int64, error) {
	out := maps.Clone(est.Charge.Units)
	if out == nil {
		out = map[string]int64{}
	}
	b := est.Body
	if b == nil {
		return out, nil
	}
	if u.Format != b.Format {
		return nil, fmt.Errorf("%w: costs: usage of format %q for a method of format %q", quota.ErrInvalid, u.Format, b.Format)
	}
	for _, name := range b.budgets() {
		out[name] = 0
	}
	for _, name := range b.QueryCost {
		if !u.Throttled {
			out[name] = u.QueryCost
		}
	}
	for _, name := range b.Input {
		out[name] += u.LimitedInputTokens()
	}
	for _, name := range b.Output {
		out[name] += u.OutputTokens
	}
	if t.spend != "" && b.Format.IsLLM() {
		model := ""
		if est.Tokens != nil {
			model = est.Tokens.Model
		}
		n, err := t.prices.Cost(model, u)
		if err != nil {
			return nil, err
		}
		out[t.spend] = n
	}
	return out, nil
}

// WithSpend returns a copy of the table with a budget counted in
// micro-dollars, e.g. {Name: "spend", Limit: 500_000_000, Window:
// quota.Daily(loc)} for $500 a day: every method priced by an LLM body
// format charges it, before the call the price of the request's bound
// (Price.MaxCost), after it the price of its usage (Price.Cost), in
// prices. The budget is added to the table's budgets, so the Limiter built
// from them has it; the table's Spec does not carry it. b's Unit is
// quota.UnitUSDMicro (set when empty). It replaces a spend budget the
// table declares (Spec.Spend).
func (t *Table) WithSpend(b quota.Budget, prices *Prices) (*Table, error) {
	if prices == nil {
		return nil, fmt.Errorf("%w: costs: WithSpend: nil price table", quota.ErrInvalid)
	}
	if b.Unit == "" {
		b.Unit = quota.UnitUSDMicro
	} else if b.Unit != quota.UnitUSDMicro {
		return nil, fmt.Errorf("%w: costs: WithSpend: budget %q has unit %q: a spend budget counts %s", quota.ErrInvalid, b.Name, b.Unit, quota.UnitUSDMicro)
	}
	spec := t.Spec()
	spec.Spend = nil
	spec.Budgets = append(spec.Budgets, b)
	nt, err := New(spec)
	if err != nil {
		return nil, err
	}
	nt.spend, nt.prices = b.Name, prices
	return nt, nil
}

// Spend returns the table's spend budget and price table (see WithSpend),
// and whether it has one.
func (t *Table) Spend() (budget string, prices *Prices, ok bool) {
	return t.spend, t.prices, t.spend != ""
}

// ReadRequestBody returns req's body, at most limit bytes, and leaves the
// request ready to send: when req.GetBody is set it reads a copy from it
// and leaves req.Body alone; otherwise it reads req.Body and replaces it
// (and sets GetBody) with readers of the same bytes. A body longer than
// limit is an error wrapping ErrBodyTooLarge, and req.Body still yields
// every byte.
func ReadRequestBody(req *http.Request, limit int64) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	if req.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrBodyTooLarge, req.ContentLength, limit)
	}
	if req.GetBody != nil {
		rc, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("costs: reading the request body: %w", err)
		}
		defer rc.Close()
		data, err := io.ReadAll(io.LimitReader(rc, limit+1))
		if err != nil {
			return nil, fmt.Errorf("costs: reading the request body: %w", err)
		}
		if int64(len(data)) > limit {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
		}
		return data, nil
	}
	orig := req.Body
	data, err := io.ReadAll(io.LimitReader(orig, limit+1))
	if err != nil || int64(len(data)) > limit {
		// Give the request back whole: what was read, then the rest.
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(data), orig), orig}
		if err != nil {
			return nil, fmt.Errorf("costs: reading the request body: %w", err)
		}
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
	}
	if err := orig.Close(); err != nil {
		return nil, fmt.Errorf("costs: closing the request body: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(data))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	req.ContentLength = int64(len(data))
	return data, nil
}

// errNoBody is returned by BodyFormatOf for a request the table does not
// price by its body.
var errNoBody = errors.New("costs: the request's method is not priced by its body")

// BodyFormatOf returns the body format of the method req calls (Method.Body),
// for reading its response; an error when the method has none.
func (t *Table) BodyFormatOf(req *http.Request) (BodyFormat, error) {
	if !t.pricesHost(req) {
		return "", errNoBody
	}
	r := t.router.match(req.Method, req.URL.Path, req.URL.RawQuery)
	if r == nil || r.m.Body == nil {
		return "", errNoBody
	}
	return r.m.Body.Format, nil
}

var _ quota.BodyPricer = (*Table)(nil)

// EstimateCall implements quota.BodyPricer: the charge EstimateRequest gives,
// and for a method priced by its body the reader of its actual cost from
// the response (a UsageScanner; ActualUnits), which a quota.Transport
// settles the charge to. A Shopify GraphQL call also has its successful
// responses peeked, for THROTTLED errors (HTTP 200) and throttleStatus
// reports.
func (t *Table) EstimateCall(req *http.Request) (quota.Estimate, error) {
	est, err := t.EstimateRequest(req)
	if err != nil || est.Body == nil {
		return quota.Estimate{Charge: est.Charge}, err
	}
	return quota.Estimate{
		Charge: est.Charge,
		Peek:   est.Body.Format == ShopifyGraphQL,
		Actual: func(resp *http.Response) quota.Actual {
			return &actualCost{t: t, est: est, scan: NewUsageScanner(est.Body.Format, resp.Header.Get("Content-Type"))}
		},
	}, nil
}

// actualCost reads a call's actual cost from its response body.
type actualCost struct {
	t    *Table
	est  RequestEstimate
	scan *UsageScanner
}

func (a *actualCost) Write(p []byte) (int, error) { return a.scan.Write(p) }

// Units returns the call's cost per budget once the body said its usage.
func (a *actualCost) Units() (map[string]int64, error) {
	u, err := a.scan.Usage()
	if err != nil {
		return nil, err
	}
	return a.t.ActualUnits(a.est, u)
}
