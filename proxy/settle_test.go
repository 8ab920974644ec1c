package proxy_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/openaisim"
	"github.com/quotactl/quotactl/proxy"
)

// TestProxySettlesLLMCalls: a job in any language calling OpenAI through
// the proxy is charged each call's estimate and settled to the usage the
// answer reports, streamed or not, as the proxy copies it to the job: the
// store counts the tokens the simulator billed.
func TestProxySettlesLLMCalls(t *testing.T) {
	const key = "sk-proxy-held"
	sim := openaisim.New(openaisim.WithProject("team", key), openaisim.WithClock(func() time.Time { return t0 }))
	defer sim.Close()
	table, err := costs.Builtin("openai")
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, table, sim.URL(), func(c *proxy.Config) { c.Credential = key })
	for i := range 6 {
		stream := i%2 == 1
		body := fmt.Sprintf(`{"model":"gpt-4.1-mini","max_tokens":250,"stream":%t,"stream_options":{"include_usage":%t},
			"messages":[{"role":"user","content":"Summarize order %d."}]}`, stream, stream, i)
		r := do(t, http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(body), "Content-Type", "application/json")
		if r.status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
	e.limiter.Flush(t.Context())
	b := sim.Billed("team")
	if got, want := used(t, e.limiter, "team", "tokens"), b.LimitedInputTokens()+b.OutputTokens; got != want || want == 0 {
		t.Fatalf("the store counts %d tokens; the simulator billed %d", got, want)
	}
}
