package costs_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/openaisim"
	"github.com/quotactl/quotactl/quota"
)

// Meter an LLM call through a plain http.Client: OpenAI's per-minute
// request and token budgets and a monthly dollar budget, one charge. The
// Transport takes the estimate before sending (the prompt's bound plus
// max_tokens, and its price) and settles it to the usage the response
// reports once the body is read.
func ExampleTable_EstimateCall() {
	sim := openaisim.New(openaisim.WithProject("proj_enrich", "sk-enrich")) // a simulated OpenAI API
	defer sim.Close()

	table, _ := costs.Builtin("openai")
	table, _ = table.WithHosts(sim.Host())
	prices, _ := costs.BuiltinPrices("openai")
	la, _ := time.LoadLocation("America/Los_Angeles")
	month := quota.Budget{Name: "spend", Limit: 500_000_000, Window: quota.Monthly(la)} // $500, in micro-dollars
	table, _ = table.WithSpend(month, prices)

	lim, _ := quota.New(quota.NewMemoryStore(), table.API, table.Budgets)
	cred := quota.Credential{Secret: "sk-enrich", Owner: "proj_enrich"}
	client := &http.Client{Transport: quota.NewTransport(lim, table, quota.WithCredential(cred))}

	body := `{"model": "gpt-4.1-mini", "max_tokens": 200,
	  "messages": [{"role": "user", "content": "Summarize order 1042 in one line."}]}`
	req, _ := http.NewRequest("POST", sim.URL()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-enrich")
	est, _ := table.EstimateRequest(req)
	fmt.Println("estimate:", est.Charge.Units)

	resp, err := client.Do(req)
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body) // read to its end: the charge settles to the usage
	resp.Body.Close()

	st, _ := lim.Status(context.Background(), cred)
	for _, u := range st {
		fmt.Printf("%s: %d of %d\n", u.Budget, u.Used, u.Limit)
	}
	b := sim.Billed("proj_enrich")
	fmt.Println("billed:", b.LimitedInputTokens()+b.OutputTokens, "tokens,", sim.Dollars("proj_enrich"), "micro-dollars")
	// Output:
	// estimate: map[requests:1 spend:355 tokens:286]
	// requests: 1 of 500
	// tokens: 54 of 30000
	// spend: 60 of 500000000
	// billed: 54 tokens, 60 micro-dollars
}
