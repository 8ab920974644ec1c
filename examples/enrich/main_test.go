package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/openaisim"
	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storeurl"
)

func TestMain(m *testing.M) {
	testkit.RunChild(map[string]func(string) int{"main": testkit.MainRole(main)})
	redistest.Main(m)
}

// stores are the stores the tests run on: an SQLite file and Redis.
func stores(t *testing.T) map[string]string {
	_, addr := redistest.Shared(t)
	return map[string]string{
		"sqlite": storeurl.SQLiteURL(filepath.Join(t.TempDir(), "quota.db")),
		"redis":  "redis://" + addr + "/0?prefix=" + url.QueryEscape(redistest.Prefix(t)),
	}
}

// fixed is a clock that never moves: nothing leaves a window, in the
// meter or the simulator, so the counts are totals.
func fixed() time.Time { return time.Date(2026, 11, 28, 9, 30, 0, 0, time.UTC) }

// TestSettleExact: after 40 calls, half of them streamed, the store counts
// exactly the tokens and the dollars the simulator billed (every estimate
// settled to its usage), on an SQLite file and on Redis; no 429.
func TestSettleExact(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			sim := openaisim.New(openaisim.WithProject(project, apiKey), openaisim.WithClock(fixed))
			defer sim.Close()
			res, err := enrich(t.Context(), config{store: store, upstream: sim.URL(), records: 40, usd: 500, clock: fixed})
			if err != nil {
				t.Fatal(err)
			}
			b := sim.Billed(project)
			if res.calls != 40 || res.streamed != 20 || res.limited != 0 || res.refusal != nil {
				t.Fatalf("run %+v; want 40 calls, 20 streamed, no 429, no refusal", res)
			}
			if want := b.LimitedInputTokens() + b.OutputTokens; res.tokens != want || want == 0 {
				t.Errorf("the store counts %d tokens; the simulator billed %d", res.tokens, want)
			}
			if want := sim.Dollars(project); res.spend != want || want == 0 {
				t.Errorf("the store counts %d micro-dollars; the simulator billed %d", res.spend, want)
			}
		})
	}
}

// chat sends one chat completion through client and returns the response.
func chat(t *testing.T, client *http.Client, upstream string, stream bool, maxTokens int) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"model":          model,
		"messages":       []map[string]string{{"role": "user", "content": "Tell me about the order."}},
		"max_tokens":     maxTokens,
		"stream":         stream,
		"stream_options": map[string]bool{"include_usage": stream},
	})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, upstream+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s", resp.Status)
	}
	return resp
}

// counted returns the store's tokens and spend for the project.
func counted(t *testing.T, lim *quota.Limiter) (tokens, spend int64) {
	t.Helper()
	lim.Flush(t.Context())
	st, err := lim.Status(t.Context(), quota.Credential{Secret: apiKey, Owner: project})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range st {
		switch u.Budget {
		case "tokens":
			tokens = u.Used
		case "spend":
			spend = u.Used
		}
	}
	return tokens, spend
}

// TestStreamSettlesAtItsEnd: a streamed answer holds its estimate while it
// streams and settles to its usage once read; one abandoned half way keeps
// its estimate, though the simulator billed less.
func TestStreamSettlesAtItsEnd(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			sim := openaisim.New(openaisim.WithProject(project, apiKey), openaisim.WithClock(fixed))
			defer sim.Close()
			st, err := storeurl.Open(t.Context(), store)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			client, lim, err := meter(t.Context(), config{upstream: sim.URL(), usd: 500, clock: fixed}, st, http.DefaultTransport)
			if err != nil {
				t.Fatal(err)
			}
			resp := chat(t, client, sim.URL(), true, 300)
			held, _ := counted(t, lim)
			if held < 300 {
				t.Fatalf("while streaming: the store counts %d tokens; want the estimate (at least max_tokens 300)", held)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			b := sim.Billed(project)
			billed := b.LimitedInputTokens() + b.OutputTokens
			if got, _ := counted(t, lim); got != billed || got >= held {
				t.Fatalf("after the stream: the store counts %d tokens; want the billed %d (below the estimate %d)", got, billed, held)
			}

			resp = chat(t, client, sim.URL(), true, 300)
			r := bufio.NewReader(resp.Body)
			r.ReadString('\n') // the first event, then the caller gives up
			resp.Body.Close()
			b = sim.Billed(project)
			got, _ := counted(t, lim)
			if want := billed + held; got != want {
				t.Fatalf("after an abandoned stream: the store counts %d tokens; want %d (the first call's billed %d + this one's estimate %d)", got, want, billed, held)
			}
			if got < b.LimitedInputTokens()+b.OutputTokens {
				t.Fatalf("the store counts %d tokens, below the %d billed", got, b.LimitedInputTokens()+b.OutputTokens)
			}
		})
	}
}

// TestExcessCounted: a provider that bills a hidden prompt (an injected
// system prompt) bills more than any bound read from the body: each excess
// is counted on top, so the store never counts less than was billed.
func TestExcessCounted(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			sim := openaisim.New(openaisim.WithProject(project, apiKey), openaisim.WithClock(fixed), openaisim.WithPromptOverhead(600))
			defer sim.Close()
			var mu sync.Mutex
			var excess int64
			res, err := enrich(t.Context(), config{store: store, upstream: sim.URL(), records: 10, usd: 500, clock: fixed,
				observer: quota.ObserverFunc(func(e quota.Event) {
					if e.Kind == quota.EventSettle && e.Outcome == quota.OutcomeExcess && e.Budget == "tokens" {
						mu.Lock()
						excess += e.Units
						mu.Unlock()
					}
				})})
			if err != nil {
				t.Fatal(err)
			}
			b := sim.Billed(project)
			billed := b.LimitedInputTokens() + b.OutputTokens
			mu.Lock()
			defer mu.Unlock()
			if excess == 0 {
				t.Fatal("no excess recorded, though every call cost more than its bound")
			}
			if res.tokens < billed {
				t.Fatalf("the store counts %d tokens, below the %d billed", res.tokens, billed)
			}
			if res.spend < sim.Dollars(project) {
				t.Fatalf("the store counts %d micro-dollars, below the %d billed", res.spend, sim.Dollars(project))
			}
		})
	}
}

var summary = regexp.MustCompile(`enriched (\d+) records .*; 429s received: (\d+)\n(?s:.*)stopped: budget "(\w+)" spent`)

// TestProcessesShareTPM: 8 processes enrich records for one project until
// its tokens per minute are spent, on one store: none draws a 429 from
// the simulator, each stops on a local refusal, and the store counts
// exactly the dollars billed.
func TestProcessesShareTPM(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			sim := openaisim.New(openaisim.WithProject(project, apiKey), openaisim.WithLimits(500, 6000))
			defer sim.Close()
			var cmds []*bytes.Buffer
			var wait []func() error
			for i := range 8 {
				flags, _ := json.Marshal([]string{"--store", store, "--upstream", sim.URL(), "--records", "0", "--first", fmt.Sprint(i * 1000)})
				cmd := testkit.Child(t, "main", string(flags))
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds, wait = append(cmds, &out), append(wait, cmd.Wait)
			}
			calls := 0
			for i, w := range wait {
				if err := w(); err != nil {
					t.Fatalf("process %d: %v\n%s", i, err, cmds[i])
				}
				m := summary.FindStringSubmatch(cmds[i].String())
				if m == nil || m[2] != "0" || m[3] != "tokens" {
					t.Fatalf("process %d: want a summary with no 429 and a stop on tokens:\n%s", i, cmds[i])
				}
				var n int
				fmt.Sscan(m[1], &n)
				calls += n
			}
			if sim.RateLimited() != 0 || int64(calls) != sim.Requests() {
				t.Fatalf("simulator: %d 429s, %d requests; want none and the %d calls made", sim.RateLimited(), sim.Requests(), calls)
			}
			st, err := storeurl.Open(t.Context(), store)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			_, lim, err := meter(t.Context(), config{upstream: sim.URL(), usd: 500}, st, http.DefaultTransport)
			if err != nil {
				t.Fatal(err)
			}
			if _, spend := counted(t, lim); spend != sim.Dollars(project) {
				t.Fatalf("the store counts %d micro-dollars; the simulator billed %d", spend, sim.Dollars(project))
			}
			if calls < 8 {
				t.Fatalf("%d calls in all; want each process to make some", calls)
			}
		})
	}
}
