package costs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/anthropicsim"
	"github.com/quotactl/quotactl/internal/openaisim"
	"github.com/quotactl/quotactl/internal/shopifysim"
	"github.com/quotactl/quotactl/quota"
)

func TestEstimateRequestRestoresBody(t *testing.T) {
	tb := builtin(t, "openai")
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`
	for _, getBody := range []bool{true, false} {
		req, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", strings.NewReader(body))
		if !getBody {
			req.GetBody = nil
			req.Body = io.NopCloser(strings.NewReader(body)) // a body of unknown kind
		}
		est, err := tb.EstimateRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(len(`[{"role":"user","content":"hi"}]`)) + costs.MessageOverhead + costs.RequestOverhead + 10
		if est.Charge.Method != "chat.completions" || est.Charge.Units["requests"] != 1 || est.Charge.Units["tokens"] != want {
			t.Fatalf("charge %+v, want tokens %d", est.Charge, want)
		}
		for range 2 {
			b, _ := io.ReadAll(req.Body)
			if string(b) != body {
				t.Fatalf("getBody %v: body after estimate %q", getBody, b)
			}
			if req.GetBody == nil {
				t.Fatal("no GetBody")
			}
			rc, _ := req.GetBody()
			req.Body = rc
		}
	}
	// Too large: refused with a clear error, and the body still whole.
	big := bytes.Repeat([]byte("x"), 100)
	req, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", nil)
	req.Body = io.NopCloser(bytes.NewReader(big))
	if _, err := costs.ReadRequestBody(req, 50); !errors.Is(err, costs.ErrBodyTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	if b, _ := io.ReadAll(req.Body); !bytes.Equal(b, big) {
		t.Fatalf("body after a refusal: %d bytes", len(b))
	}
	req, _ = http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", bytes.NewReader(big))
	if _, err := costs.ReadRequestBody(req, 50); !errors.Is(err, costs.ErrBodyTooLarge) || !strings.Contains(err.Error(), "100 bytes") {
		t.Fatalf("too large by Content-Length: %v", err)
	}
	// An unbounded body is refused, naming the method.
	req, _ = http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"x"}]}`))
	if _, err := tb.EstimateRequest(req); !errors.Is(err, costs.ErrUnbounded) || !strings.HasPrefix(err.Error(), "chat.completions: ") {
		t.Fatalf("unbounded: %v", err)
	}
	// A foreign host is Price's error.
	req, _ = http.NewRequest("POST", "https://evil.example/v1/chat/completions", strings.NewReader(body))
	if _, err := tb.EstimateRequest(req); !errors.Is(err, quota.ErrForeignHost) {
		t.Fatalf("foreign host: %v", err)
	}
}

// send estimates req with tb, sends it with http.DefaultClient, and
// returns the estimate and the actual units from the response.
func send(t *testing.T, tb *costs.Table, req *http.Request) (costs.RequestEstimate, map[string]int64, costs.Usage) {
	t.Helper()
	est, err := tb.EstimateRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	format, err := tb.BodyFormatOf(req)
	if err != nil {
		t.Fatal(err)
	}
	var u costs.Usage
	var uerr error
	body := costs.NewUsageReader(resp.Body, format, resp.Header.Get("Content-Type"), func(got costs.Usage, err error) { u, uerr = got, err })
	io.Copy(io.Discard, body)
	body.Close()
	if resp.StatusCode != 200 || uerr != nil {
		t.Fatalf("%d: %v", resp.StatusCode, uerr)
	}
	actual, err := tb.ActualUnits(est, u)
	if err != nil {
		t.Fatal(err)
	}
	return est, actual, u
}

// Against the simulators, the actual units of N calls add up to exactly
// what the simulator billed, and each estimate is at or above its actual.
func TestActualUnitsMatchSimulators(t *testing.T) {
	day := quota.Daily(time.UTC) // Monthly is being added in parallel (issue 24)
	oprices, _ := costs.BuiltinPrices("openai")
	osim := openaisim.New(openaisim.WithLimits(1000, 10_000_000))
	defer osim.Close()
	otb, err := builtin(t, "openai").WithHosts(osim.Host())
	if err != nil {
		t.Fatal(err)
	}
	if otb, err = otb.WithSpend(quota.Budget{Name: "spend", Limit: 500_000_000, Window: day}, oprices); err != nil {
		t.Fatal(err)
	}
	var sum = map[string]int64{}
	for i, body := range []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"one"}],"max_tokens":100}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"two"}],"max_tokens":3,"n":2}`,
		`{"model":"gpt-4.1","messages":[{"role":"user","content":"stream"}],"max_completion_tokens":40,"stream":true,"stream_options":{"include_usage":true}}`,
	} {
		req, _ := http.NewRequest("POST", osim.URL()+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-1")
		est, actual, _ := send(t, otb, req)
		if len(est.Excess(actual)) != 0 {
			t.Errorf("call %d: actual %v above estimate %v", i, actual, est.Charge.Units)
		}
		for b, n := range actual {
			sum[b] += n
		}
	}
	billed := osim.Billed("sk-1")
	if sum["requests"] != 3 || sum["tokens"] != billed.PromptTokens()+billed.OutputTokens || sum["spend"] != osim.Dollars("sk-1") {
		t.Fatalf("summed %v; simulator billed %+v and %d micro-dollars", sum, billed, osim.Dollars("sk-1"))
	}

	asim := anthropicsim.New()
	defer asim.Close()
	atb, _ := builtin(t, "anthropic").WithHosts(asim.Host())
	req, _ := http.NewRequest("POST", asim.URL()+"/v1/messages", strings.NewReader(`{"model":"claude-3-5-haiku","max_tokens":30,"messages":[{"role":"user","content":"hi"}],"stream":true}`))
	req.Header.Set("x-api-key", "ak")
	est, actual, _ := send(t, atb, req)
	if b := asim.Billed("ak"); actual["input_tokens"] != b.InputTokens || actual["output_tokens"] != b.OutputTokens || actual["requests"] != 1 || len(est.Excess(actual)) > 0 {
		t.Fatalf("anthropic actual %v est %v billed %+v", actual, est.Charge.Units, b)
	}

	// An upstream billing hidden tokens: the excess is reported.
	hsim := openaisim.New(openaisim.WithPromptOverhead(5000))
	defer hsim.Close()
	htb, _ := builtin(t, "openai").WithHosts(hsim.Host())
	req, _ = http.NewRequest("POST", hsim.URL()+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}],"max_tokens":5}`))
	req.Header.Set("Authorization", "Bearer k")
	est, actual, _ = send(t, htb, req)
	if ex := est.Excess(actual); ex["tokens"] != actual["tokens"]-est.Charge.Units["tokens"] || ex["tokens"] <= 0 {
		t.Fatalf("excess %v (actual %v, estimate %v)", ex, actual, est.Charge.Units)
	}
}

func TestShopifyQueryCost(t *testing.T) {
	sim := shopifysim.New()
	defer sim.Close()
	tb, _ := builtin(t, "shopify-admin").WithHosts(sim.Host())
	q := `{"query":"{ products(first: 10) { edges { node { id } } } }"}`
	req, _ := http.NewRequest("POST", sim.URL()+"/admin/api/2025-10/graphql.json", strings.NewReader(q))
	req.Header.Set("X-Shopify-Access-Token", "shpat")
	est, actual, u := send(t, tb, req)
	if est.Charge.Units["points"] != 1000 || actual["points"] != 7 || u.RequestedQueryCost != 12 || sim.Charged("shpat") != 7 {
		t.Fatalf("estimate %v actual %v usage %+v", est.Charge.Units, actual, u)
	}
	req, _ = http.NewRequestWithContext(costs.WithQueryCost(context.Background(), 12), "POST", sim.URL()+"/admin/api/2025-10/graphql.json", strings.NewReader(q))
	if est, _ := tb.EstimateRequest(req); est.Charge.Units["points"] != 12 {
		t.Fatalf("caller's estimate: %v", est.Charge.Units)
	}
	req, _ = http.NewRequestWithContext(costs.WithQueryCost(context.Background(), 0), "POST", sim.URL()+"/admin/api/2025-10/graphql.json", strings.NewReader(q))
	if _, err := tb.EstimateRequest(req); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("zero estimate: %v", err)
	}
	// THROTTLED: nothing ran, nothing to keep.
	thr, _ := costs.ReadUsage(costs.ShopifyGraphQL, []byte(throttled))
	if a, _ := tb.ActualUnits(est, thr); a["points"] != 0 {
		t.Fatalf("throttled actual %v", a)
	}
	if _, err := tb.ActualUnits(est, costs.Usage{Format: costs.OpenAIChat}); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("wrong format: %v", err)
	}
}

func TestWithSpendUnknownModel(t *testing.T) {
	p, _ := costs.BuiltinPrices("openai")
	tb, err := builtin(t, "openai").WithSpend(quota.Budget{Name: "spend", Limit: 1_000_000, Window: quota.Daily(time.UTC)}, p)
	if err != nil {
		t.Fatal(err)
	}
	if name, pr, ok := tb.Spend(); !ok || name != "spend" || pr != p || tb.Budgets[len(tb.Budgets)-1].Name != "spend" {
		t.Fatalf("Spend() = %s %v %v; budgets %v", name, pr, ok, tb.Budgets)
	}
	req, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", strings.NewReader(`{"model":"gpt-99","messages":[{"role":"user","content":"x"}],"max_tokens":5}`))
	if _, err := tb.EstimateRequest(req); !errors.Is(err, costs.ErrUnknownModel) {
		t.Fatalf("unknown model: %v", err)
	}
	if _, err := builtin(t, "openai").WithSpend(quota.Budget{Name: "tokens", Limit: 1, Window: quota.Daily(time.UTC)}, p); err == nil {
		t.Fatal("a spend budget named like an existing one: no error")
	}
	if _, err := builtin(t, "openai").WithSpend(quota.Budget{Name: "spend", Limit: 1, Window: quota.Daily(time.UTC)}, nil); err == nil {
		t.Fatal("nil prices: no error")
	}
}

func TestBodySpecErrors(t *testing.T) {
	head := "api: x\nbudgets:\n  - {name: requests, limit: 10, window: sliding:1m}\n  - {name: tokens, limit: 1000, window: sliding:1m}\nmethods:\n  chat:\n    routes: [POST /v1/chat]\n"
	for _, c := range []struct{ tail, want string }{
		{"    cost: {requests: 1}\n    body: {format: openai-chat, input: [tokenz]}\n", `t.yaml:9: methods[chat].body.input[0]: unknown budget "tokenz"`},
		{"    cost: {requests: 1}\n    body: {format: gemini}\n", `methods[chat].body.format: unknown format "gemini"`},
		{"    cost: {requests: 1}\n    body: {input: [tokens]}\n", "missing format"},
		{"    cost: {requests: 1}\n    body: {format: openai-chat}\n", "no budgets"},
		{"    cost: {requests: 1, tokens: 5}\n    body: {format: openai-chat, input: [tokens]}\n", `budget "tokens" is priced both`},
		{"    cost: {requests: 1}\n    body: {format: shopify-graphql, query_cost: [tokens]}\n", `budget "tokens" has no estimate`},
		{"    cost: {requests: 1}\n    body: {format: openai-chat, query_cost: [tokens]}\n", "priced in tokens"},
		{"    cost: {requests: 1}\n    body: {format: openai-chat, input: [tokens, tokens]}\n", "listed twice"},
		{"    free: true\n    body: {format: openai-chat, input: [tokens]}\n", "a free method is not priced by its body"},
		{"    cost: {requests: 1}\n    body: {format: openai-chat, input: []}\n", "empty list"},
		{"    cost: {requests: 1}\n    body: {format: openai-chat, input: [tokens], extra: 1}\n", `unknown field "extra"`},
	} {
		_, err := costs.Parse("t.yaml", []byte(head+c.tail))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.tail, err, c.want)
		}
	}
	tb, err := costs.Parse("t.yaml", []byte(head+"    cost: {requests: 1}\n    body: {format: openai-chat, input: [tokens], output: [tokens]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := tb.Method("chat")
	if m.Body == nil || m.Body.Format != costs.OpenAIChat {
		t.Fatalf("method %+v", m)
	}
}

func TestLLMProfiles(t *testing.T) {
	for _, c := range []struct {
		name, host string
		budgets    []string
		methods    map[string]costs.BodyFormat
	}{
		{"openai", "api.openai.com", []string{"requests", "tokens"}, map[string]costs.BodyFormat{"chat.completions": costs.OpenAIChat, "responses.create": costs.OpenAIResponses, "embeddings.create": costs.OpenAIEmbeddings}},
		{"anthropic", "api.anthropic.com", []string{"requests", "input_tokens", "output_tokens"}, map[string]costs.BodyFormat{"messages.create": costs.AnthropicMessages}},
		{"shopify-admin", "", []string{"points"}, map[string]costs.BodyFormat{"graphql": costs.ShopifyGraphQL}},
	} {
		tb := builtin(t, c.name)
		if hs := tb.Hosts(); c.host != "" && (len(hs) != 1 || hs[0] != c.host) || c.host == "" && len(hs) != 0 {
			t.Errorf("%s: hosts %v", c.name, hs)
		}
		var names []string
		for _, b := range tb.Budgets {
			names = append(names, b.Name)
		}
		if strings.Join(names, ",") != strings.Join(c.budgets, ",") {
			t.Errorf("%s: budgets %v", c.name, names)
		}
		for m, f := range c.methods {
			if got, ok := tb.Method(m); !ok || got.Body == nil || got.Body.Format != f {
				t.Errorf("%s: %s: %+v", c.name, m, got)
			}
		}
		// The table as JSON loads back the same.
		data, err := json.Marshal(tb.Spec())
		if err != nil {
			t.Fatal(err)
		}
		back, err := costs.Parse(c.name+".json", data)
		if err != nil || !reflect.DeepEqual(back.Spec(), tb.Spec()) {
			t.Errorf("%s: JSON round trip: %v", c.name, err)
		}
	}
}
