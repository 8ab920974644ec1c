package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/ytsim"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storeurl"
)

// config is what the flags say, plus what tests inject.
type config struct {
	store    string // store URL; "" = storeurl.Default()
	schedule string // cron spec; "" = one run
	keyEnv   string // environment variable holding the real API key
	project  string // Google Cloud project the key belongs to; "" = a default
	upstream string // real API base URL; "" = the in-process simulator
	headroom int64  // units held back from the upstream's "units" limit
	out      string // JSON lines file

	clock func() time.Time // nil = the real clock (tests inject one)
}

// The simulator plays a project whose console says 40 units a day (the real
// default is 10,000), so one run of 8 regions × 4 pages spends it and you see
// the clean stop right away.
const (
	simUnits = 40
	simAPI   = "youtube-sim" // its budgets, kept apart from the real "youtube" ones
	simKey   = "sim-api-key"
)

// app is the wired program: store, limiter, metered client, scheduler.
type app struct {
	store   quota.Store
	state   quota.StateStore // the same store: checkpoints and run history
	limiter *quota.Limiter
	sched   *jobs.Scheduler
	sim     *ytsim.Server // nil with --upstream
	out     *os.File
	cred    quota.Credential
}

// open wires the program from cfg, printing what it uses to w.
func open(ctx context.Context, cfg config, w io.Writer, log *slog.Logger) (_ *app, err error) {
	a := &app{}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	table, err := costs.Builtin("youtube")
	if err != nil {
		return nil, err
	}
	api, base, budgets, err := a.upstream(cfg, w, table)
	if err != nil {
		return nil, err
	}
	// The table prices Google's hosts alone; the job calls one upstream,
	// the simulator or --upstream (Google, or a proxy in front of it): price
	// requests to that host.
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("--upstream %q: want a base URL such as https://www.googleapis.com", base)
	}
	// The job appends "/youtube/v3/...": "https://www.googleapis.com/" is
	// the same base, not a path "//youtube/v3/..." no route matches.
	base = strings.TrimRight(base, "/")
	if table, err = table.WithHosts(u.Host); err != nil {
		return nil, fmt.Errorf("--upstream %q: %w", base, err)
	}
	// Meter the shared pool at the upstream's limit less the headroom; the
	// per-method buckets (search: 100 calls) at their limit.
	for i := range budgets {
		if budgets[i].Name != "units" {
			continue
		}
		if budgets[i].Limit <= cfg.headroom || cfg.headroom < 0 {
			return nil, fmt.Errorf("--headroom %d: must be from 0 to less than %s/units' limit of %d", cfg.headroom, api, budgets[i].Limit)
		}
		budgets[i].Limit -= cfg.headroom
	}
	if err := a.meter(ctx, cfg, w, log, api, budgets); err != nil {
		return nil, err
	}
	if err := a.schedule(cfg, w, log, table, api, base); err != nil {
		return nil, err
	}
	return a, nil
}

// upstream picks the upstream: the simulator, or --upstream with the key
// in --api-key-env. It returns the API's name, its base URL and its
// budgets at the upstream's limits.
func (a *app) upstream(cfg config, w io.Writer, table *costs.Table) (api, base string, budgets []quota.Budget, err error) {
	api, base, budgets = table.API, cfg.upstream, slices.Clone(table.Budgets)
	switch {
	case cfg.upstream == "" && cfg.keyEnv != "":
		return "", "", nil, errors.New("--api-key-env needs --upstream (the real API is never the default)")
	case cfg.upstream == "":
		var opts []ytsim.Option
		if cfg.clock != nil {
			opts = append(opts, ytsim.WithClock(cfg.clock))
		}
		a.sim = ytsim.New(append(opts, ytsim.WithLimit("units", simUnits))...)
		api, base, a.cred = simAPI, a.sim.URL(), quota.Credential{Secret: simKey, Label: "sim", Owner: cmp.Or(cfg.project, "sim-project")}
		for i := range budgets {
			if budgets[i].Name == "units" {
				budgets[i].Limit = simUnits
			}
		}
		fmt.Fprintf(w, "upstream: simulated YouTube Data API at %s (%d units a day)\n", base, simUnits)
	default:
		key := os.Getenv(cfg.keyEnv)
		if cfg.keyEnv == "" || key == "" {
			return "", "", nil, fmt.Errorf("--upstream needs the API key in an environment variable: --api-key-env VAR")
		}
		// Google bills quota per Cloud project: name it, so that every key of
		// the project shares one budget (and a rotated key keeps its usage).
		a.cred = quota.Credential{Secret: key, Label: cfg.keyEnv, Owner: cmp.Or(cfg.project, "youtube-project")}
		fmt.Fprintf(w, "upstream: %s\n", base)
	}
	return api, base, budgets, nil
}

// meter opens the store and the limiter of api's budgets over it, and the
// results file.
func (a *app) meter(ctx context.Context, cfg config, w io.Writer, log *slog.Logger, api string, budgets []quota.Budget) error {
	url := cfg.store
	if url == "" {
		var err error
		if url, err = storeurl.Default(); err != nil {
			return err
		}
	}
	var err error
	if a.store, err = storeurl.Open(ctx, url); err != nil {
		return err
	}
	var ok bool
	if a.state, ok = a.store.(quota.StateStore); !ok {
		return fmt.Errorf("store %s keeps no job state", storeurl.Redact(url))
	}
	var lopts []quota.Option
	if cfg.clock != nil {
		lopts = append(lopts, quota.WithClock(cfg.clock))
	}
	if a.limiter, err = quota.New(a.store, api, budgets, append(lopts, quota.WithLogger(log))...); err != nil {
		return err
	}
	if a.out, err = os.OpenFile(cfg.out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(w, "store: %s, budget %s/units metered at %d (--headroom %d); results appended to %s\n",
		storeurl.Redact(url), api, budgets[0].Limit, cfg.headroom, cfg.out)
	return nil
}

// schedule adds the trending job, calling base through the metered client,
// to a scheduler on the store.
func (a *app) schedule(cfg config, w io.Writer, log *slog.Logger, table *costs.Table, api, base string) error {
	client := &http.Client{
		Transport: quota.NewTransport(a.limiter, table, quota.WithCredential(a.cred), quota.WithTransportLogger(log)),
		Timeout:   time.Minute,
	}
	now := time.Now
	if cfg.clock != nil {
		now = cfg.clock
	}
	job := &trending{client: client, base: base, key: a.cred.Secret, out: a.out, log: w, now: now, left: budgetLeft(a.limiter, a.cred)}
	sopts := []jobs.Option{jobs.WithLogger(log)}
	if cfg.clock != nil {
		sopts = append(sopts, jobs.WithClock(cfg.clock))
	}
	a.sched = jobs.New(a.state, sopts...)
	// Runs in every process on this store take turns through the job's lease;
	// a spent budget makes them wait, unless the limiter (say with
	// --headroom 0) can pay again.
	// A full run: 4 pages of videos.list and 1 search.list in each of the 8
	// regions; `quotactl jobs` holds it against what is left.
	plan := jobs.WithPlan(api, table.API, map[string]int64{"videos.list": 4 * int64(len(regions)), "search.list": int64(len(regions))})
	return a.sched.Add("trending", cfg.schedule, job.Run, jobs.WithLimiter(a.limiter, a.cred), plan)
}

// Close releases what open made.
func (a *app) Close() {
	if a.sim != nil {
		a.sim.Close()
	}
	if a.out != nil {
		a.out.Close()
	}
	if a.store != nil {
		a.store.Close()
	}
}
