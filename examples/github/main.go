// Command github lists a repository's issues page by page through
// quotactl's metered client, with a GitHub token that an unmetered CI job
// also spends, and stops cleanly when the token's quota is spent, without
// ever drawing a 403 or 429 from GitHub.
//
//	go run ./examples/github
//
// It starts a simulated GitHub API in process (internal/ghsim) whose core
// limit is --limit requests an hour for the token's user, and meters it with
// the built-in "github" cost table in the store --store names (default: a
// memory store). A CI job on another token of the same user, not metered,
// makes one call for every --ci-every calls the job makes, until it has
// spent 40% of the user's limit. The job learns
// the user's limit from the first response's x-ratelimit-limit, and what CI
// spent from every response's x-ratelimit-used (a true-up), so it stops on
// a local refusal exactly when GitHub's remaining reaches 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/ghsim"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storeurl"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.store, "store", "memory:", "quota store URL")
	flag.Int64Var(&cfg.limit, "limit", 200, "the simulated user's core requests an hour")
	flag.StringVar(&cfg.upstream, "upstream", "", "a running GitHub API (or simulator) to use instead of starting one; CI makes no calls then")
	flag.IntVar(&cfg.ciEvery, "ci-every", 1, "CI makes one unmetered call every N calls of the job, up to 40% of the limit (0: none)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "github:", err)
		os.Exit(1)
	}
}

type config struct {
	store    string
	upstream string
	limit    int64
	ciEvery  int
}

// result is what a run did, for the summary and the tests.
type result struct {
	jobCalls, ciCalls int
	learned           int64 // units the meter learned from reports (true-ups)
	quotaErrors       int   // 403 and 429 the job received
	upstreamUsed      int64
	counted           int64
	refusal           *quota.ExhaustedError
}

func run(ctx context.Context, out io.Writer, cfg config) error {
	var sim *ghsim.Server
	if cfg.upstream == "" {
		sim = ghsim.New(ghsim.WithUser("octocat", 583231, "ghp_job", "ghp_ci"), ghsim.WithLimit(ghsim.Core, cfg.limit))
		defer sim.Close()
		cfg.upstream = sim.URL()
	} else {
		cfg.ciEvery = 0
	}
	res, err := ingest(ctx, out, cfg)
	if err != nil {
		return err
	}
	if sim != nil {
		res.upstreamUsed = sim.Used("ghp_job", ghsim.Core)
	}
	fmt.Fprintf(out, "job: %d calls; CI (unmetered, same user): %d calls\n", res.jobCalls, res.ciCalls)
	fmt.Fprintf(out, "meter learned %d units from GitHub's reports; 403/429 received: %d\n", res.learned, res.quotaErrors)
	if sim != nil {
		fmt.Fprintf(out, "GitHub counts %d of %d used; the store counts %d\n", res.upstreamUsed, cfg.limit, res.counted)
	}
	if res.refusal != nil {
		fmt.Fprintf(out, "stopped: budget %q spent, capacity returns in %s\n", res.refusal.Budget, res.refusal.RetryAfter.Round(time.Second))
	}
	return nil
}

func ingest(ctx context.Context, out io.Writer, cfg config) (*result, error) {
	base, err := url.Parse(cfg.upstream)
	if err != nil || base.Host == "" {
		return nil, fmt.Errorf("--upstream %q: not a URL", cfg.upstream)
	}
	table, err := costs.Builtin("github")
	if err != nil {
		return nil, err
	}
	if table, err = table.WithHosts(base.Host); err != nil {
		return nil, err
	}
	store, err := storeurl.Open(ctx, cfg.store)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	var (
		mu      sync.Mutex
		learned int64
	)
	obs := quota.ObserverFunc(func(e quota.Event) {
		if e.Kind == quota.EventTrueUp {
			mu.Lock()
			learned += e.Units
			mu.Unlock()
		}
	})
	lim, err := quota.New(store, table.API, table.Budgets, quota.WithObserver(obs))
	if err != nil {
		return nil, err
	}
	wire := &statusCounter{base: http.DefaultTransport}
	job := &http.Client{Transport: quota.NewTransport(lim, table, quota.WithBase(wire),
		quota.WithCredential(quota.Credential{Secret: "ghp_job", Label: "job", Owner: "octocat"}))}
	ci := &http.Client{}

	res := &result{}
	get := func(c *http.Client, token string, page int) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/repos/octo-org/octo-repo/issues?page=%d", cfg.upstream, page), nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for page := 1; ; page++ {
		if cfg.ciEvery > 0 && page%cfg.ciEvery == 0 && int64(res.ciCalls) < cfg.limit*2/5 {
			if code, err := get(ci, "ghp_ci", page); err == nil && code == http.StatusOK {
				res.ciCalls++
			}
		}
		code, err := get(job, "ghp_job", page)
		if errors.As(err, &res.refusal) {
			break // spent: locally, or the upstream said so (counted by wire)
		}
		if err != nil {
			return nil, err
		}
		if code == http.StatusOK {
			res.jobCalls++
			if page%50 == 0 {
				fmt.Fprintf(out, "page %d listed\n", page)
			}
		}
	}
	res.quotaErrors = int(wire.quota.Load())
	if err := lim.Flush(ctx); err != nil {
		return nil, err
	}
	mu.Lock()
	res.learned = learned
	mu.Unlock()
	st, err := lim.Status(ctx, quota.Credential{Secret: "ghp_job", Owner: "octocat"})
	if err != nil {
		return nil, err
	}
	for _, u := range st {
		if u.Budget == "core" {
			res.counted = u.Used
		}
	}
	return res, nil
}

// statusCounter is the wire under the metered client: it counts the 403
// and 429 answers GitHub sent the job.
type statusCounter struct {
	base  http.RoundTripper
	quota atomic.Int64
}

func (c *statusCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests) {
		c.quota.Add(1)
	}
	return resp, err
}
