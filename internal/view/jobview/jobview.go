// Package jobview is the view of the jobs package's runs that quotactl's
// tools share: `quotactl jobs --json`, `quotactl jobs NAME --json` and the
// dashboard's /api/jobs print the same Job, built here. It is apart from
// package view because it needs the jobs scheduler and the cost tables,
// which the Prometheus adapter must not pull in.
package jobview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// Job is one job as the store keeps it: its last run, checkpoint, the run
// that holds its lease now, its waiting mark (while the budget it needs is
// spent, runs do not start), its next tick, its plan and what the plan is
// expected to cost against what is left, and its recent runs, newest first
// (only where asked for: `quotactl jobs NAME`, the dashboard). Each is
// null when there is none.
type Job struct {
	Job        string              `json:"job"`
	Last       *jobs.Record        `json:"last"`
	Checkpoint *jobs.Checkpoint    `json:"checkpoint"`
	Lease      *backend.StateLease `json:"lease"`
	Waiting    *jobs.WaitingMark   `json:"waiting"`
	Next       *time.Time          `json:"next"`
	Plan       *jobs.Plan          `json:"plan"`
	// Expected is the plan (jobs.WithPlan: calls per method) priced with
	// its cost table, as 'quotactl costs estimate' does, held against what
	// is left for the API's only owner (whole budgets when it has none or
	// several).
	Expected []view.BudgetCost `json:"expected"`
	// PlanError says why the plan could not be priced (its cost table
	// could not be loaded here, say); Expected is null then.
	PlanError string        `json:"plan_error,omitempty"`
	Runs      []jobs.Record `json:"runs,omitempty"`
	// Units names the unit of each budget that Last, Runs and Waiting
	// name, keyed "API/BUDGET" as a run's spent is ("openai/spend":
	// "usd-micro"): what their amounts count (quota.Budget.UnitOf; the
	// default unit for a budget the store has no definition of). It is
	// null when they name none. Unit reads it.
	Units map[string]string `json:"units,omitempty"`
}

// Unit returns the unit of budget ("API/BUDGET") that j's runs name, for
// view.Amount: Units' entry, else quota.DefaultUnit.
func (j Job) Unit(budget string) string {
	if u, ok := j.Units[budget]; ok {
		return u
	}
	return quota.DefaultUnit
}

// Read reads every job ss keeps runs of, sorted by name, each with its
// runs most recent runs (0: none beyond Last). r gives the clock and reads
// the usage a plan is held against; apis is r's catalog when the caller
// has read it already, else nil (it is read if a plan needs it).
func Read(ctx context.Context, r *view.Reader, ss quota.StateStore, apis []view.API, runs int) ([]Job, error) {
	names, err := jobs.Names(ctx, ss)
	if err != nil {
		return nil, err
	}
	c := &catalog{r: r, apis: apis, read: apis != nil}
	out := []Job{}
	for _, name := range names {
		j, err := readJob(ctx, c, ss, name, runs)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// ReadJob reads one job as Read does. found is false when ss keeps no run
// of it.
func ReadJob(ctx context.Context, r *view.Reader, ss quota.StateStore, name string, runs int) (j Job, found bool, err error) {
	names, err := jobs.Names(ctx, ss)
	if err != nil || !slices.Contains(names, name) {
		return Job{}, false, err
	}
	j, err = readJob(ctx, &catalog{r: r}, ss, name, runs)
	return j, err == nil, err
}

// catalog is r's catalog, read once when a plan first needs it.
type catalog struct {
	r    *view.Reader
	apis []view.API
	read bool
}

func (c *catalog) api(ctx context.Context, name string) (view.API, error) {
	if !c.read {
		apis, err := c.r.APIs(ctx)
		if err != nil {
			return view.API{}, err
		}
		c.apis, c.read = apis, true
	}
	if i := slices.IndexFunc(c.apis, func(a view.API) bool { return a.Name == name }); i >= 0 {
		return c.apis[i], nil
	}
	return view.API{}, nil
}

func readJob(ctx context.Context, c *catalog, ss quota.StateStore, name string, runs int) (Job, error) {
	r := c.r
	now := r.Now()
	recs, err := jobs.History(ctx, ss, name, max(runs, 1))
	if err != nil {
		return Job{}, err
	}
	j := Job{Job: name}
	if len(recs) > 0 {
		last := recs[0]
		j.Last = &last
	}
	if runs > 0 {
		j.Runs = recs
	}
	if cp, found, err := jobs.LoadCheckpoint(ctx, ss, name); err != nil && !errors.Is(err, quota.ErrNotFound) {
		return Job{}, err
	} else if found {
		j.Checkpoint = &cp
	}
	// The lease is read on the store's clock, unless a test injects one.
	if l, found, err := jobs.CurrentLease(ctx, ss, name, r.StoreNow()); err != nil {
		return Job{}, err
	} else if found {
		j.Lease = &l
	}
	if w, found, err := jobs.LoadWaiting(ctx, ss, name, now); err != nil {
		return Job{}, err
	} else if found {
		j.Waiting = &w
	}
	if j.Units, err = units(ctx, c, j); err != nil {
		return Job{}, err
	}
	info, found, err := jobs.LoadInfo(ctx, ss, name)
	if err != nil || !found {
		return j, err
	}
	if n := info.Next(now); !n.IsZero() {
		j.Next = &n
	}
	if info.Plan == nil {
		return j, nil
	}
	j.Plan = info.Plan
	tb, cost, err := price(info.Plan)
	if err != nil {
		// The plan, not the store: the other jobs still show.
		j.PlanError = err.Error()
		return j, nil
	}
	a, err := c.api(ctx, info.Plan.API)
	if err != nil {
		return Job{}, err
	}
	if j.Expected, err = expected(ctx, r, a, tb, cost, now); err != nil {
		return Job{}, err
	}
	return j, nil
}

// units names the unit of every budget j's runs and waiting mark name,
// from the store's definitions; nil when they name none.
func units(ctx context.Context, c *catalog, j Job) (map[string]string, error) {
	var keys []string
	add := func(r jobs.Record) {
		for k := range r.Spent {
			keys = append(keys, k)
		}
		if r.Exhausted != nil {
			keys = append(keys, r.Exhausted.Budget)
		}
	}
	if j.Last != nil {
		add(*j.Last)
	}
	for _, r := range j.Runs {
		add(r)
	}
	if j.Waiting != nil {
		keys = append(keys, j.Waiting.Budget)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, k := range keys {
		if _, done := out[k]; done {
			continue
		}
		api, budget, _ := strings.Cut(k, "/") // names hold no '/'
		a, err := c.api(ctx, api)
		if err != nil {
			return nil, err
		}
		b, _ := a.Budget(budget) // none defined: the zero Budget's default unit
		out[k] = b.UnitOf()
	}
	return out, nil
}

// price prices p with its cost table: the units per budget of one run.
func price(p *jobs.Plan) (*costs.Table, map[string]int64, error) {
	tb, err := table(p)
	if err != nil {
		return nil, nil, err
	}
	cost, err := tb.Estimate(p.Calls)
	if err != nil {
		return nil, nil, err
	}
	return tb, cost, nil
}

// expected holds a run's cost (priced with tb) against what is left now of
// a's budgets for its only owner (whole budgets when it has none or
// several).
func expected(ctx context.Context, r *view.Reader, a view.API, tb *costs.Table, cost map[string]int64, now time.Time) ([]view.BudgetCost, error) {
	budgets := a.InForce(tb.Budgets)
	usage := map[string]quota.Usage{}
	if len(a.Owners) == 1 {
		// One account: one credential, or several of one owner (a key
		// rotated, a project's keys), whose usage is kept under the owner.
		l, err := r.Limiter(view.API{APIInfo: quota.APIInfo{Name: a.Name, Budgets: budgets}})
		if err != nil {
			return nil, err
		}
		us, err := l.StatusOf(ctx, a.Owners[0].Account)
		if err != nil {
			return nil, err
		}
		for _, u := range us {
			usage[u.Budget] = u
		}
	}
	return view.Costs(budgets, cost, usage, now), nil
}

// table is the plan's cost table: the built-in table it names (its API's
// when it names none), else the JSON or YAML file it names.
func table(p *jobs.Plan) (*costs.Table, error) {
	name := cmp.Or(p.Table, p.API)
	if slices.Contains(costs.Builtins(), name) {
		return costs.Builtin(name)
	}
	if p.Table == "" {
		return nil, fmt.Errorf("no built-in cost table for %q", p.API)
	}
	return costs.Load(p.Table)
}
