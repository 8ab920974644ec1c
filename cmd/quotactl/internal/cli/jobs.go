package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

type jobsOptions struct {
	*globals
	Name  string // empty: every job
	Limit int
}

func newCmdJobs(g *globals, runF func(context.Context, *jobsOptions) error) *cobra.Command {
	opts := &jobsOptions{globals: g}
	c := &cobra.Command{
		Use:   "jobs [NAME]",
		Short: "Show the run history of scheduled jobs",
		Long: `Show the jobs package's run history from the store: without NAME, each job's
last run, who holds its lease now, its next tick and what its next run is
expected to cost against what is left; with NAME, its recent runs (--limit)
and its checkpoint. An outcome is ok, exhausted (a clean stop on a spent
budget: the next run resumes from the checkpoint), skipped (another run held
the job's lease), failed, panicked, cancelled or abandoned. While the budget
a job needs is spent, NEXT says "waiting for capacity until T": its runs do
not start before then.

On a terminal the table fits the width ($COLUMNS, else the terminal's, else
80): times with their dates where there is room, then relative times, then
without the columns empty for every job, then one block of lines per job.
Piped, rows are tab-separated without a header, with full times.

The expected cost is the job's plan (jobs.WithPlan: calls per method) priced
with the cost table, as 'quotactl costs estimate' does, held against what is
left for the API's only owner: its one credential, or its several keys of
one owner (a project, a rotated key); whole budgets when it has no
credential or several owners.

JSON: without NAME, an array of {job, last, checkpoint, lease, waiting, next,
plan, expected}; with NAME, {job, runs, checkpoint}. A run has the jobs
package's stable fields: job, run, trigger, start, end, outcome, spent
({"API/BUDGET": units}), charges, unmetered, error, exhausted ({budget, used,
limit, left, cost, retry_at}), holder, lease_expires; a checkpoint has job,
run, saved, cursor; lease is {key, holder, token, expires}; waiting is {job,
budget, cost, until, run, since}; plan is {api, table, calls}; expected is
[{budget, cost, left, limit, after, fits, reset}]. Each is null when there is
none.`,
		Args: rangeArgs(0, 1, "at most one NAME argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Name = args[0]
			}
			if opts.Limit <= 0 {
				return usageErrorf("--limit %d: must be > 0", opts.Limit)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return jobsRun(cmd.Context(), opts)
		},
	}
	c.Flags().IntVar(&opts.Limit, "limit", 20, "how many recent runs to show for NAME")
	return c
}

func (g *globals) stateStore(ctx context.Context) (quota.StateStore, error) {
	st, err := g.Store(ctx)
	if err != nil {
		return nil, err
	}
	ss, ok := st.(quota.StateStore)
	if !ok {
		return nil, fmt.Errorf("the store (%T) keeps no job history", st)
	}
	return ss, nil
}

func jobsRun(ctx context.Context, opts *jobsOptions) error {
	ss, err := opts.stateStore(ctx)
	if err != nil {
		return err
	}
	names, err := jobs.Names(ctx, ss)
	if err != nil {
		return err
	}
	if opts.Name != "" {
		if !slices.Contains(names, opts.Name) {
			known := "none has run yet"
			if len(names) > 0 {
				known = "jobs: " + strings.Join(names, ", ")
			}
			return usageErrorf("no runs of job %q in the store (%s)", opts.Name, known)
		}
		return opts.jobHistory(ctx, ss)
	}
	type jobJSON struct {
		Job        string               `json:"job"`
		Last       *jobs.Record         `json:"last"`
		Checkpoint *jobs.Checkpoint     `json:"checkpoint"`
		Lease      *backend.StateLease  `json:"lease"`
		Waiting    *jobs.WaitingMark    `json:"waiting"`
		Next       *time.Time           `json:"next"`
		Plan       *jobs.Plan           `json:"plan"`
		Expected   []estimateBudgetJSON `json:"expected"`
	}
	out := []jobJSON{}
	header := []string{"JOB", "LAST RUN", "OUTCOME", "TOOK", "SPENT", "LEASE", "NEXT", "NEXT RUN COST", "CHECKPOINT", "DETAIL"}
	var full, brief [][]string // times with dates; relative times only
	now := opts.now()
	for _, name := range names {
		recs, err := jobs.History(ctx, ss, name, 1)
		if err != nil {
			return err
		}
		cp, found, err := jobs.LoadCheckpoint(ctx, ss, name)
		if err != nil {
			return err
		}
		j := jobJSON{Job: name}
		if found {
			j.Checkpoint = &cp
		}
		if err := opts.jobNow(ctx, ss, &j.Lease, &j.Waiting, &j.Next, &j.Plan, &j.Expected, name, now); err != nil {
			return err
		}
		lease, cost, saved := opts.leaseText(j.Lease), expectedText(j.Expected), opts.checkpointText(j.Checkpoint)
		for _, short := range []bool{false, true} {
			row := []string{name, "-", "-", "-", "-", lease, opts.nextText(j.Waiting, j.Next, short), cost, saved, "-"}
			if len(recs) > 0 {
				r := recs[0]
				j.Last = &r
				row = []string{name, opts.whenIn(r.Start, short), string(r.Outcome), took(r.Duration()), spentText(r.Spent), lease, row[6], cost, saved, opts.detail(r, short)}
			}
			if short {
				brief = append(brief, row)
			} else {
				full = append(full, row)
			}
		}
		out = append(out, j)
	}
	if opts.json {
		return opts.printJSON(out)
	}
	if len(out) == 0 {
		fmt.Fprintln(opts.io.ErrOut, "no job has run yet")
		return nil
	}
	return opts.printFitted(opts.io.Out, header, full, brief)
}

// whenIn is when: "in 2h5m (2026-11-22 15:04:05 PST)", or with short
// "in 2h5m" alone.
func (g *globals) whenIn(t time.Time, short bool) string {
	if short {
		return relative(t.Sub(g.now()))
	}
	return g.when(t)
}

func (opts *jobsOptions) jobHistory(ctx context.Context, ss quota.StateStore) error {
	recs, err := jobs.History(ctx, ss, opts.Name, opts.Limit)
	if err != nil {
		return err
	}
	cp, found, err := jobs.LoadCheckpoint(ctx, ss, opts.Name)
	if err != nil {
		return err
	}
	var cpp *jobs.Checkpoint
	if found {
		cpp = &cp
	}
	if recs == nil {
		recs = []jobs.Record{}
	}
	if opts.json {
		return opts.printJSON(struct {
			Job        string           `json:"job"`
			Runs       []jobs.Record    `json:"runs"`
			Checkpoint *jobs.Checkpoint `json:"checkpoint"`
		}{opts.Name, recs, cpp})
	}
	header := []string{"START", "TRIGGER", "OUTCOME", "TOOK", "SPENT", "DETAIL"}
	var full, brief [][]string
	for _, r := range recs {
		for _, short := range []bool{false, true} {
			row := []string{opts.whenIn(r.Start, short), string(r.Trigger), string(r.Outcome), took(r.Duration()), spentText(r.Spent), opts.detail(r, short)}
			if short {
				brief = append(brief, row)
			} else {
				full = append(full, row)
			}
		}
	}
	if err := opts.printFitted(opts.io.Out, header, full, brief); err != nil {
		return err
	}
	if opts.io.TTY {
		width := opts.width()
		fmt.Fprint(opts.io.Out, "\n"+wrapHanging("checkpoint: ", opts.checkpointText(cpp), width, "  "))
		if w, found, err := jobs.LoadWaiting(ctx, ss, opts.Name, opts.now()); err != nil {
			return err
		} else if found {
			fmt.Fprint(opts.io.Out, wrapHanging("", fmt.Sprintf("waiting for capacity until %s (%s is spent): runs before then do not start", opts.absolute(w.Until), w.Budget), width, "  "))
		}
	}
	return nil
}

func (g *globals) checkpointText(cp *jobs.Checkpoint) string {
	if cp == nil {
		return "-"
	}
	cursor := string(cp.Cursor)
	if len(cursor) > 40 {
		cursor = cursor[:37] + "..."
	}
	return "saved " + relative(cp.Saved.Sub(g.now())) + " " + cursor
}

// spentText is "youtube/search=3 youtube/units=120".
func spentText(spent map[string]int64) string {
	if len(spent) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(spent)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, spent[k]))
	}
	return strings.Join(parts, " ")
}

// detail says why a run ended the way it did; short says when a held lease
// expires relative to now rather than at a date.
func (g *globals) detail(r jobs.Record, short bool) string {
	switch {
	case r.Outcome == jobs.Skipped && short:
		return "another run held the lease: " + r.Holder + ", expiring " + relative(r.LeaseExpires.Sub(g.now()))
	case r.Outcome == jobs.Skipped:
		return "another run held the lease: " + r.Holder + " until " + g.absolute(r.LeaseExpires)
	case r.Exhausted != nil:
		e := r.Exhausted
		return fmt.Sprintf("%s spent (%d of %d used, %d left); capacity back %s", e.Budget, e.Used, e.Limit, e.Left, relativeTo(e.RetryAt, g.now()))
	case r.Error != "":
		return strings.Join(strings.Fields(r.Error), " ")
	}
	return "-"
}

func relativeTo(t, now time.Time) string { return relative(t.Sub(now)) }

// jobNow reads what is true of job now: the live lease, the waiting mark,
// the next tick, and the plan's expected cost against what is left.
func (opts *jobsOptions) jobNow(ctx context.Context, ss quota.StateStore, lease **backend.StateLease, waiting **jobs.WaitingMark,
	next **time.Time, plan **jobs.Plan, expected *[]estimateBudgetJSON, job string, now time.Time) error {
	var leaseNow time.Time // the store's clock, unless a test injects one
	if opts.io.Clock != nil {
		leaseNow = now
	}
	if l, found, err := jobs.CurrentLease(ctx, ss, job, leaseNow); err != nil {
		return err
	} else if found {
		*lease = &l
	}
	if w, found, err := jobs.LoadWaiting(ctx, ss, job, now); err != nil {
		return err
	} else if found {
		*waiting = &w
	}
	info, found, err := jobs.LoadInfo(ctx, ss, job)
	if err != nil || !found {
		return err
	}
	if n := info.Next(now); !n.IsZero() {
		*next = &n
	}
	if info.Plan == nil {
		return nil
	}
	*plan = info.Plan
	est, err := opts.planCost(ctx, info.Plan)
	if err != nil {
		return fmt.Errorf("job %s: plan: %w", job, err)
	}
	*expected = est
	return nil
}

// planCost prices p with its cost table, as costs estimate does, against
// what is left now for the API's only owner (whole budgets when there is
// none or there are several).
func (opts *jobsOptions) planCost(ctx context.Context, p *jobs.Plan) ([]estimateBudgetJSON, error) {
	_, tb, err := loadTable(p.API, p.Table)
	if err != nil {
		return nil, err
	}
	est, err := tb.Estimate(p.Calls)
	if err != nil {
		return nil, err
	}
	st, err := opts.Store(ctx)
	if err != nil {
		return nil, err
	}
	apis, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	var info quota.APIInfo
	for _, a := range apis {
		if a.Name == p.API {
			info = a
		}
	}
	budgets := mergeBudgets(tb.Budgets, info.Budgets)
	usage := map[string]quota.Usage{}
	// The API's only account: one credential, or several of one owner (a
	// key rotated, a project's keys), whose usage is kept under the owner.
	account := ""
	for i, c := range info.Credentials {
		if i > 0 && c.Owner != account {
			account = ""
			break
		}
		account = c.Owner
	}
	if account != "" {
		l, err := quota.New(st, p.API, budgets, opts.limiterOptions()...)
		if err != nil {
			return nil, err
		}
		us, err := l.StatusOf(ctx, account) // the account, not a fingerprint
		if err != nil {
			return nil, err
		}
		for _, u := range us {
			usage[u.Budget] = u
		}
	}
	out := []estimateBudgetJSON{}
	now := opts.now()
	for _, b := range budgets {
		cost := est[b.Name]
		if cost == 0 {
			continue
		}
		left, reset := b.Limit, b.Window.NextReset(now)
		if u, ok := usage[b.Name]; ok {
			left = u.Remaining
			if !b.Window.IsDaily() {
				reset = u.Reset
			}
		}
		out = append(out, estimateBudgetJSON{Budget: b.Name, Cost: cost, Left: left, Limit: b.Limit, After: left - cost, Fits: cost <= left, Reset: jsonTime(reset)})
	}
	return out, nil
}

// leaseText is "HOLDER, expires in 25s", or "-".
func (g *globals) leaseText(l *backend.StateLease) string {
	if l == nil {
		return "-"
	}
	return l.Holder + ", expires " + relative(l.Expires.Sub(g.now()))
}

// nextText is the next tick, or "waiting for capacity until T"; short
// says when relative to now rather than at a date.
func (g *globals) nextText(w *jobs.WaitingMark, next *time.Time, short bool) string {
	switch {
	case w != nil && short:
		return "waiting for capacity, back " + relative(w.Until.Sub(g.now()))
	case w != nil:
		return "waiting for capacity until " + g.absolute(w.Until)
	case next != nil:
		return g.whenIn(*next, short)
	}
	return "on demand"
}

// expectedText is "fits: units 32 of 40 left" or "does not fit: units 32
// of 8 left, search 8 of 93 left", or "-" with no plan.
func expectedText(est []estimateBudgetJSON) string {
	if len(est) == 0 {
		return "-"
	}
	fits := true
	var parts []string
	for _, b := range est {
		fits = fits && b.Fits
		parts = append(parts, fmt.Sprintf("%s %d of %d left", b.Budget, b.Cost, b.Left))
	}
	verdict := "fits: "
	if !fits {
		verdict = "does not fit: "
	}
	return verdict + strings.Join(parts, ", ")
}
