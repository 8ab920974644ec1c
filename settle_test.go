package quotactl_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/anthropicsim"
	"github.com/quotactl/quotactl/internal/openaisim"
	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/shopifysim"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storeurl"
)

// Estimate, then settle, against the Anthropic and Shopify simulators
// (examples/enrich holds OpenAI's): on an SQLite file and on Redis, the
// store counts what the upstream billed.

// settleStores opens an SQLite file and a Redis store for t, by name.
func settleStores(t *testing.T) map[string]quota.Store {
	_, addr := redistest.Shared(t)
	out := map[string]quota.Store{}
	for name, u := range map[string]string{
		"sqlite": storeurl.SQLiteURL(filepath.Join(t.TempDir(), "quota.db")),
		"redis":  "redis://" + addr + "/0?prefix=" + url.QueryEscape(redistest.Prefix(t)),
	} {
		st, err := storeurl.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		out[name] = st
	}
	return out
}

// meteredClient returns a client metering the built-in table api for the
// simulator at host with cred, on st, at the fixed instant t0.
func meteredClient(t *testing.T, st quota.Store, api, host string, cred quota.Credential, obs quota.Observer) (*http.Client, *quota.Limiter) {
	t.Helper()
	table, err := costs.Builtin(api)
	if err != nil {
		t.Fatal(err)
	}
	if table, err = table.WithHosts(host); err != nil {
		t.Fatal(err)
	}
	opts := []quota.Option{quota.WithClock(fixedClock)}
	if obs != nil {
		opts = append(opts, quota.WithObserver(obs))
	}
	lim, err := quota.New(st, table.API, table.Budgets, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: quota.NewTransport(lim, table, quota.WithCredential(cred))}, lim
}

// usedOf returns what the store counts of each budget for cred.
func usedOf(t *testing.T, lim *quota.Limiter, cred quota.Credential) map[string]int64 {
	t.Helper()
	lim.Flush(t.Context())
	st, err := lim.Status(t.Context(), cred)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, u := range st {
		out[u.Budget] = u.Used
	}
	return out
}

// TestAnthropicSettles: Messages calls, streamed and not, settle each
// budget (input and output tokens) to what the simulator billed; a
// stream abandoned after message_start keeps its estimate.
func TestAnthropicSettles(t *testing.T) {
	for name, st := range settleStores(t) {
		t.Run(name, func(t *testing.T) {
			sim := anthropicsim.New(anthropicsim.WithOrganization("org", "sk-ant"), anthropicsim.WithClock(fixedClock))
			defer sim.Close()
			cred := quota.Credential{Secret: "sk-ant", Owner: "org"}
			client, lim := meteredClient(t, st, "anthropic", sim.Host(), cred, nil)
			send := func(stream bool) *http.Response {
				body, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 400, "stream": stream,
					"messages": []map[string]string{{"role": "user", "content": "Summarize order 1042 in one line."}}})
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, sim.URL()+"/v1/messages", bytes.NewReader(body))
				req.Header.Set("x-api-key", "sk-ant")
				req.Header.Set("anthropic-version", "2023-06-01")
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("messages: %v %v", resp, err)
				}
				return resp
			}
			for i := range 12 {
				resp := send(i%2 == 1)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			b := sim.Billed("org")
			got := usedOf(t, lim, cred)
			if got["input_tokens"] != b.LimitedInputTokens() || got["output_tokens"] != b.OutputTokens || got["requests"] != 12 {
				t.Fatalf("the store counts %v; the simulator billed input %d, output %d in 12 requests", got, b.LimitedInputTokens(), b.OutputTokens)
			}
			resp := send(true)
			bufio.NewReader(resp.Body).ReadString('\n')
			resp.Body.Close()
			after := usedOf(t, lim, cred)
			if after["output_tokens"] != got["output_tokens"]+400 {
				t.Fatalf("after an abandoned stream: output tokens %d; want %d + the max_tokens 400 kept", after["output_tokens"], got["output_tokens"])
			}
		})
	}
}

const shopQuery = `{ products(first: 10) { edges { node { id title } } } }`

// graphql sends shopQuery to the simulator through client with token,
// estimated at requested (0: the table's estimate).
func graphql(t *testing.T, client *http.Client, base, token string, requested int64) (*http.Response, error) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": shopQuery})
	ctx := t.Context()
	if requested > 0 {
		ctx = costs.WithQueryCost(ctx, requested)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/admin/api/2025-10/graphql.json", bytes.NewReader(body))
	req.Header.Set("X-Shopify-Access-Token", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err == nil {
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
	}
	return resp, err
}

// TestShopifySettlesToActualCost: queries estimated at their requested
// cost settle to actualQueryCost: the store counts what Shopify charged.
func TestShopifySettlesToActualCost(t *testing.T) {
	for name, st := range settleStores(t) {
		t.Run(name, func(t *testing.T) {
			sim := shopifysim.New(shopifysim.WithShop("shop", "shpat"), shopifysim.WithClock(fixedClock))
			defer sim.Close()
			cred := quota.Credential{Secret: "shpat"}
			client, lim := meteredClient(t, st, "shopify-admin", sim.Host(), cred, nil)
			for range 10 {
				if _, err := graphql(t, client, sim.URL(), "shpat", 12); err != nil {
					t.Fatal(err)
				}
			}
			if got := usedOf(t, lim, cred)["points"]; got != sim.Charged("shop") || got == 0 || got >= 120 {
				t.Fatalf("the store counts %d points; Shopify charged %d (below the 120 requested)", got, sim.Charged("shop"))
			}
		})
	}
}

// TestShopifyThrottledStops: another app drained the shop's bucket; the
// metered job's query comes back THROTTLED with HTTP 200, which the
// Transport turns into ErrExhausted (refunded, the budget marked spent),
// and the next query is refused locally, never sent.
func TestShopifyThrottledStops(t *testing.T) {
	for name, st := range settleStores(t) {
		t.Run(name, func(t *testing.T) {
			sim, client := sharedShop(t, st, 1995)
			_, err := graphql(t, client, sim.URL(), "shpat", 12)
			var ex *quota.ExhaustedError
			if !errors.As(err, &ex) || ex.Budget != "points" || ex.RetryAfter <= 0 || ex.RetryAfter > 20*time.Second {
				t.Fatalf("query on a drained bucket = %v; want ErrExhausted on points, retry within the bucket's 20 s", err)
			}
			if sim.Throttled() != 1 {
				t.Fatalf("THROTTLED answers %d; want 1", sim.Throttled())
			}
			sent := sim.Requests()
			if _, err := graphql(t, client, sim.URL(), "shpat", 12); !errors.Is(err, quota.ErrExhausted) || sim.Requests() != sent {
				t.Fatalf("the next query = %v, %d requests sent; want a local refusal", err, sim.Requests()-sent)
			}
		})
	}
}

// TestShopifyReportsKeepInStep: another app spends most of the bucket;
// the job learns it from throttleStatus (a true-up) and stops on a local
// refusal, never drawing a THROTTLED.
func TestShopifyReportsKeepInStep(t *testing.T) {
	for name, st := range settleStores(t) {
		t.Run(name, func(t *testing.T) {
			sim, client := sharedShop(t, st, 1500)
			calls := 0
			for ; calls < 200; calls++ {
				_, err := graphql(t, client, sim.URL(), "shpat", 12)
				if errors.Is(err, quota.ErrExhausted) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if sim.Throttled() != 0 || calls == 200 || calls == 0 {
				t.Fatalf("%d calls, %d THROTTLED; want a local stop and none", calls, sim.Throttled())
			}
		})
	}
}

// sharedShop starts a shop whose bucket another app (token "other",
// unmetered) has spent points of, and returns it with the metered job's
// client (token "shpat"); the shop closes with the test.
func sharedShop(t *testing.T, st quota.Store, points int64) (*shopifysim.Server, *http.Client) {
	t.Helper()
	sim := shopifysim.New(shopifysim.WithShop("shop", "shpat", "other"), shopifysim.WithClock(fixedClock), shopifysim.WithItems(250))
	t.Cleanup(sim.Close)
	spendOther(t, sim, points)
	client, _ := meteredClient(t, st, "shopify-admin", sim.Host(), quota.Credential{Secret: "shpat"}, nil)
	return sim, client
}

// spendOther spends points of the shop's bucket with the "other" token,
// unmetered, in queries of at most 251 points (items: 250).
func spendOther(t *testing.T, sim *shopifysim.Server, points int64) {
	t.Helper()
	for points > 0 {
		c := min(points, 251)
		body, _ := json.Marshal(map[string]any{"query": fmt.Sprintf("{ products(first: %d) { nodes { id } } }", c-2)})
		req, _ := http.NewRequest(http.MethodPost, sim.URL()+"/admin/api/2025-10/graphql.json", bytes.NewReader(body))
		req.Header.Set("X-Shopify-Access-Token", "other")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		points -= c
	}
	if sim.Throttled() != 0 {
		t.Fatal("the other app was throttled")
	}
}

// TestOpenAIRoutesSettle: Responses (streamed and not) and Embeddings
// settle to the tokens the simulator billed, as Chat Completions do
// (examples/enrich).
func TestOpenAIRoutesSettle(t *testing.T) {
	for name, st := range settleStores(t) {
		t.Run(name, func(t *testing.T) {
			sim := openaisim.New(openaisim.WithProject("proj", "sk-proj"), openaisim.WithClock(fixedClock))
			defer sim.Close()
			cred := quota.Credential{Secret: "sk-proj", Owner: "proj"}
			client, lim := meteredClient(t, st, "openai", sim.Host(), cred, nil)
			send := func(path string, body map[string]any) {
				b, _ := json.Marshal(body)
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, sim.URL()+path, bytes.NewReader(b))
				req.Header.Set("Authorization", "Bearer sk-proj")
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %v %v", path, resp, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			for i := range 4 {
				send("/v1/responses", map[string]any{"model": "gpt-4.1-mini", "input": fmt.Sprintf("Summarize order %d.", i),
					"max_output_tokens": 300, "stream": i%2 == 1})
				send("/v1/embeddings", map[string]any{"model": "text-embedding-3-small", "input": fmt.Sprintf("order %d, 3 items", i)})
			}
			b := sim.Billed("proj")
			if got := usedOf(t, lim, cred); got["tokens"] != b.LimitedInputTokens()+b.OutputTokens || got["requests"] != 8 || got["tokens"] == 0 {
				t.Fatalf("the store counts %v; the simulator billed %d tokens in 8 requests", got, b.LimitedInputTokens()+b.OutputTokens)
			}
		})
	}
}
