package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCostsEstimateBody(t *testing.T) {
	e := newEnv(t)
	chat := writeFile(t, "chat.json", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Label this video"}],"max_completion_tokens":50}`)
	// 46 bytes of messages JSON + 4 + 16 = 66 input tokens; 66*0.15 + 50*0.60 = 39.9 -> 40 micro-dollars.
	var got bodyEstimateJSON
	got = bodyEstimateJSON{}
	decode(t, e.ok("--json", "costs", "estimate", "--table", "openai", "--body", chat), &got)
	if got.Method != "chat.completions" || got.Format != "openai-chat" || got.InputTokens != 66 || got.OutputTokens != 50 ||
		got.Units["tokens"] != 116 || got.Units["requests"] != 1 || got.MicroDollars == nil || *got.MicroDollars != 40 || !strings.Contains(got.PriceSource, "2026-11-28") {
		t.Fatalf("estimate %+v", got)
	}
	out := e.ok("costs", "estimate", "openai", "--body", chat)
	for _, want := range []string{"tokens\t116 tokens", "requests\t1 request", "input tokens (bound): 66", "spend (bound): 40 micro-dollars ($0.000040)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	// A table file with a spend section: the spend budget is charged the
	// bound's price, in dollars, from the table's own price table.
	enrich := "../../../../costs/testdata/spend/enrich.yaml"
	got = bodyEstimateJSON{}
	decode(t, e.ok("--json", "costs", "estimate", "--table", enrich, "--body", chat), &got)
	if got.Units["spend"] != 40 || got.Units["tokens"] != 116 || got.MicroDollars == nil || *got.MicroDollars != 40 {
		t.Fatalf("estimate with the table's spend budget: %+v", got)
	}
	out = e.ok("costs", "estimate", "--table", enrich, "--body", chat)
	for _, want := range []string{"spend\t$0.00004\n", "tokens\t116 tokens", "spend (bound): 40 micro-dollars ($0.000040)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	// The body's fields pick the method; --method names it.
	emb := writeFile(t, "emb.json", `{"model":"text-embedding-3-small","input":"abc"}`)
	got = bodyEstimateJSON{}
	decode(t, e.ok("--json", "costs", "estimate", "--table", "openai", "--body", emb), &got)
	if got.Method != "embeddings.create" || got.Units["tokens"] != 4 || *got.MicroDollars != 1 {
		t.Fatalf("embeddings %+v", got)
	}
	resp := writeFile(t, "resp.json", `{"model":"gpt-4.1","input":"abc","max_output_tokens":10}`)
	got = bodyEstimateJSON{}
	decode(t, e.ok("--json", "costs", "estimate", "--table", "openai", "--body", resp, "--method", "responses.create"), &got)
	if got.Method != "responses.create" || got.OutputTokens != 10 {
		t.Fatalf("responses %+v", got)
	}
	ant := writeFile(t, "ant.json", `{"model":"claude-sonnet-4-20250514","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
	got = bodyEstimateJSON{}
	decode(t, e.ok("--json", "costs", "estimate", "--table", "anthropic", "--body", ant), &got)
	if got.Units["output_tokens"] != 100 || got.Units["input_tokens"] != got.InputTokens || got.MicroDollars == nil {
		t.Fatalf("anthropic %+v", got)
	}
	gql := writeFile(t, "q.json", `{"query":"{ shop { name } }"}`)
	got = bodyEstimateJSON{}
	decode(t, e.ok("--json", "costs", "estimate", "--table", "shopify-admin", "--body", gql), &got)
	if got.Units["points"] != 1000 || got.MicroDollars != nil {
		t.Fatalf("shopify %+v", got)
	}

	img := writeFile(t, "img.json", `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}],"max_tokens":5}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"costs", "estimate", "--table", "openai", "--body", img}, `"image_url" part`},
		{[]string{"costs", "estimate", "--table", "openai", "--body", filepath.Join(t.TempDir(), "none.json")}, "no such file"},
		{[]string{"costs", "estimate", "--body", chat}, "--body needs a table"},
		{[]string{"costs", "estimate", "--table", "youtube", "--body", chat}, "prices no method by its body"},
		{[]string{"costs", "estimate", "--table", "openai", "--body", chat, "--method", "nope"}, `no method "nope" priced by its body`},
		{[]string{"costs", "estimate", "--table", "openai", "--body", writeFile(t, "x.json", `{"model":"m"}`)}, "cannot tell which method"},
		{[]string{"costs", "estimate", "anthropic", "--table", "openai", "--body", chat}, `is for API "openai", not "anthropic"`},
	} {
		r := e.run(c.args...)
		if r.code != ExitUsage || !strings.Contains(r.errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d saying %q", c.args, r.code, r.errOut, ExitUsage, c.want)
		}
	}
}
