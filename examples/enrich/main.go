// Command enrich enriches records with an LLM through quotactl's metered
// client: OpenAI's per-minute request and token limits, learned from the
// upstream, and a monthly dollar budget priced from a dated price table,
// all paid in one atomic charge per call, through a plain http.Client.
//
//	go run ./examples/enrich
//
// Each call is charged its estimate before it is sent (the prompt's bound
// plus max_tokens, and their price) and settled to the usage the response
// reports once its body is read: a JSON body's usage object, a stream's
// final usage chunk. The job stops cleanly when a budget is spent, without
// drawing a 429. It starts a simulated OpenAI API in process
// (internal/openaisim) unless --upstream names one, and meters it with the
// built-in "openai" cost table and price table in the store --store names.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/openaisim"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storeurl"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.store, "store", "memory:", "quota store URL")
	flag.StringVar(&cfg.upstream, "upstream", "", "a running OpenAI API (or simulator) to use instead of starting one")
	flag.IntVar(&cfg.records, "records", 40, "records to enrich (0: until a budget is spent)")
	flag.Float64Var(&cfg.usd, "monthly-usd", 500, "the job's dollar budget for the month")
	flag.Int64Var(&cfg.tpm, "tpm", 30000, "the simulated project's tokens per minute")
	flag.IntVar(&cfg.first, "first", 0, "the first record's number")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "enrich:", err)
		os.Exit(1)
	}
}

const (
	apiKey  = "sk-enrich"
	project = "proj_enrich"
	model   = "gpt-4.1-mini"
)

type config struct {
	store, upstream string
	records         int
	usd             float64
	tpm             int64
	first           int              // the first record's number (processes of a fleet take their own)
	clock           func() time.Time // the meter's and simulator's clock (nil: the host's)
	observer        quota.Observer   // the meter's events (nil: none)
}

// result is what a run did, for the summary and the tests.
type result struct {
	calls, streamed int
	limited         int64 // 429s received
	tokens, spend   int64 // what the store counts
	refusal         *quota.ExhaustedError
}

func run(ctx context.Context, out io.Writer, cfg config) error {
	var sim *openaisim.Server
	if cfg.upstream == "" {
		opts := []openaisim.Option{openaisim.WithProject(project, apiKey), openaisim.WithLimits(500, cfg.tpm)}
		if cfg.clock != nil {
			opts = append(opts, openaisim.WithClock(cfg.clock))
		}
		sim = openaisim.New(opts...)
		defer sim.Close()
		cfg.upstream = sim.URL()
	}
	res, err := enrich(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "enriched %d records with %s (%d streamed); 429s received: %d\n", res.calls, model, res.streamed, res.limited)
	if sim != nil {
		b := sim.Billed(project)
		fmt.Fprintf(out, "OpenAI billed %d tokens, %s\n", b.LimitedInputTokens()+b.OutputTokens, dollars(sim.Dollars(project)))
	}
	fmt.Fprintf(out, "the store counts %d tokens this minute, %s of %s this month\n", res.tokens, dollars(res.spend), dollars(int64(cfg.usd*1e6)))
	if res.refusal != nil {
		fmt.Fprintf(out, "stopped: budget %q spent, capacity returns in %s\n", res.refusal.Budget, res.refusal.RetryAfter.Round(time.Second))
	}
	return nil
}

// dollars prints micro-dollars as dollars, to the cent when that is exact.
func dollars(micro int64) string {
	if micro%10_000 == 0 {
		return fmt.Sprintf("$%d.%02d", micro/1e6, micro%1e6/10_000)
	}
	return fmt.Sprintf("$%d.%06d", micro/1e6, micro%1e6)
}

// meter returns the metered client and its limiter: the openai table for
// the upstream's host, with a monthly spend budget priced from the
// built-in openai price table.
func meter(ctx context.Context, cfg config, store quota.Store, wire http.RoundTripper) (*http.Client, *quota.Limiter, error) {
	base, err := url.Parse(cfg.upstream)
	if err != nil || base.Host == "" {
		return nil, nil, fmt.Errorf("--upstream %q: not a URL", cfg.upstream)
	}
	table, err := costs.Builtin("openai")
	if err != nil {
		return nil, nil, err
	}
	if table, err = table.WithHosts(base.Host); err != nil {
		return nil, nil, err
	}
	prices, err := costs.BuiltinPrices("openai")
	if err != nil {
		return nil, nil, err
	}
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		return nil, nil, err
	}
	month := quota.Budget{Name: "spend", Limit: int64(cfg.usd * 1e6), Window: quota.Monthly(la)} // micro-dollars
	if table, err = table.WithSpend(month, prices); err != nil {
		return nil, nil, err
	}
	opts := []quota.Option{}
	if cfg.clock != nil {
		opts = append(opts, quota.WithClock(cfg.clock))
	}
	if cfg.observer != nil {
		opts = append(opts, quota.WithObserver(cfg.observer))
	}
	lim, err := quota.New(store, table.API, table.Budgets, opts...)
	if err != nil {
		return nil, nil, err
	}
	client := &http.Client{Transport: quota.NewTransport(lim, table, quota.WithBase(wire),
		quota.WithCredential(quota.Credential{Secret: apiKey, Label: "enrich", Owner: project}))}
	return client, lim, nil
}

func enrich(ctx context.Context, cfg config) (*result, error) {
	store, err := storeurl.Open(ctx, cfg.store)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	wire := &limitCounter{base: http.DefaultTransport}
	client, lim, err := meter(ctx, cfg, store, wire)
	if err != nil {
		return nil, err
	}
	res := &result{}
	for i := cfg.first; cfg.records == 0 || i < cfg.first+cfg.records; i++ {
		stream := i%2 == 1
		_, err := complete(ctx, client, cfg.upstream, fmt.Sprintf("record %d: order #%d, 3 items, shipped to Lisbon", i, 1000+i), stream)
		if errors.As(err, &res.refusal) {
			break // a budget is spent: stop cleanly, resume on the next run
		}
		if err != nil {
			return nil, err
		}
		res.calls++
		if stream {
			res.streamed++
		}
	}
	res.limited = wire.limited.Load()
	if err := lim.Flush(ctx); err != nil {
		return nil, err
	}
	st, err := lim.Status(ctx, quota.Credential{Secret: apiKey, Owner: project})
	if err != nil {
		return nil, err
	}
	for _, u := range st {
		switch u.Budget {
		case "tokens":
			res.tokens = u.Used
		case "spend":
			res.spend = u.Used
		}
	}
	return res, nil
}

// complete asks for a one-line summary of record, streamed or not, and
// reads the answer to its end: the Transport settles the call's charge to
// the usage the body reports.
func complete(ctx context.Context, client *http.Client, upstream, record string, stream bool) (string, error) {
	body, _ := json.Marshal(map[string]any{
		"model": model,
		"messages": []map[string]string{
			{"role": "system", "content": "Summarize the record in one line."},
			{"role": "user", "content": record},
		},
		"max_tokens":     200,
		"stream":         stream,
		"stream_options": map[string]bool{"include_usage": stream},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, upstream+"/v1/chat/completions", strings.NewReader(string(body)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", fmt.Errorf("upstream answered %s: %s", resp.Status, msg)
	}
	var text strings.Builder
	if !stream {
		var c struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
			return "", err
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Message.Content)
		}
		return text.String(), nil
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &chunk) == nil {
			for _, ch := range chunk.Choices {
				text.WriteString(ch.Delta.Content)
			}
		}
	}
	return text.String(), sc.Err()
}

// limitCounter is the wire under the metered client: it counts the 429s
// the upstream sent.
type limitCounter struct {
	base    http.RoundTripper
	limited atomic.Int64
}

func (c *limitCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		c.limited.Add(1)
	}
	return resp, err
}
