package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/internal/view/jobview"
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

Amounts are in their budget's unit, as status shows them: tokens as
"1,234 tokens", a spend budget (micro-dollars) as "$12.34", the default
unit as bare numbers.

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
plan, expected, units}; with NAME, the same object with runs, its recent runs
newest first. 'quotactl serve' answers the same on /api/jobs (with each
job's runs) and /api/jobs/NAME. A run has the jobs
package's stable fields: job, run, trigger, start, end, outcome, spent
({"API/BUDGET": units}), charges, unmetered, error, exhausted ({budget, used,
limit, left, cost, retry_at}), holder, lease_expires; a checkpoint has job,
run, saved, cursor; lease is {key, holder, token, expires}; waiting is {job,
budget, cost, until, run, since}; plan is {api, table, calls}; expected is
[{budget, cost, left, limit, after, fits, unit, reset}]; units is
{"API/BUDGET": unit} for each budget the runs and waiting name (what their
amounts count: usd-micro is micro-dollars). Each is null when there is none.`,
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

// jobJSON is one job of jobs --json: the view the dashboard's /api/jobs
// shows too.
type jobJSON = jobview.Job

func jobsRun(ctx context.Context, opts *jobsOptions) error {
	ss, err := opts.stateStore(ctx)
	if err != nil {
		return err
	}
	r, err := opts.reader(ctx)
	if err != nil {
		return err
	}
	if opts.Name != "" {
		j, found, err := jobview.ReadJob(ctx, r, ss, opts.Name, opts.Limit)
		if err != nil {
			return err
		}
		if !found {
			names, err := jobs.Names(ctx, ss)
			if err != nil {
				return err
			}
			known := "none has run yet"
			if len(names) > 0 {
				known = "jobs: " + strings.Join(names, ", ")
			}
			return usageErrorf("no runs of job %q in the store (%s)", opts.Name, known)
		}
		return opts.jobHistory(j)
	}
	out, err := jobview.Read(ctx, r, ss, nil, 0)
	if err != nil {
		return err
	}
	for _, j := range out {
		if j.PlanError != "" {
			return fmt.Errorf("job %s: plan: %s", j.Job, j.PlanError)
		}
	}
	if opts.json {
		return opts.printJSON(out)
	}
	if len(out) == 0 {
		fmt.Fprintln(opts.io.ErrOut, "no job has run yet")
		return nil
	}
	header := []string{"JOB", "LAST RUN", "OUTCOME", "TOOK", "SPENT", "LEASE", "NEXT", "NEXT RUN COST", "CHECKPOINT", "DETAIL"}
	var full, brief [][]string // times with dates; relative times only
	for _, j := range out {
		lease, cost, saved := opts.leaseText(j.Lease), expectedText(j.Expected), opts.checkpointText(j.Checkpoint)
		for _, short := range []bool{false, true} {
			row := []string{j.Job, "-", "-", "-", "-", lease, opts.nextText(j.Waiting, j.Next, short), cost, saved, "-"}
			if r := j.Last; r != nil {
				row = []string{j.Job, opts.whenIn(r.Start, short), string(r.Outcome), took(r.Duration()), spentText(r.Spent, j.Unit), lease, row[6], cost, saved, opts.detail(*r, j.Unit, short)}
			}
			if short {
				brief = append(brief, row)
			} else {
				full = append(full, row)
			}
		}
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

// jobHistory prints one job: its recent runs and, on a terminal, its
// checkpoint and waiting mark.
func (opts *jobsOptions) jobHistory(j jobJSON) error {
	if opts.json {
		return opts.printJSON(j)
	}
	header := []string{"START", "TRIGGER", "OUTCOME", "TOOK", "SPENT", "DETAIL"}
	var full, brief [][]string
	for _, r := range j.Runs {
		for _, short := range []bool{false, true} {
			row := []string{opts.whenIn(r.Start, short), string(r.Trigger), string(r.Outcome), took(r.Duration()), spentText(r.Spent, j.Unit), opts.detail(r, j.Unit, short)}
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
		fmt.Fprint(opts.io.Out, "\n"+wrapHanging("checkpoint: ", opts.checkpointText(j.Checkpoint), width, "  "))
		if w := j.Waiting; w != nil {
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

// spentText is "youtube/search=3 youtube/units=120", each budget in its
// unit (unit of "API/BUDGET"): "openai/spend=$12.34, openai/tokens=1,234
// tokens". Budgets are parted by commas once an amount holds a space.
func spentText(spent map[string]int64, unit func(budget string) string) string {
	if len(spent) == 0 {
		return "-"
	}
	var parts []string
	sep := " "
	for _, k := range slices.Sorted(maps.Keys(spent)) {
		a := amountText(spent[k], unit(k))
		if strings.Contains(a, " ") {
			sep = ", "
		}
		parts = append(parts, k+"="+a)
	}
	return strings.Join(parts, sep)
}

// detail says why a run ended the way it did, amounts in their budget's
// unit (unit of "API/BUDGET"); short says when a held lease expires
// relative to now rather than at a date.
func (g *globals) detail(r jobs.Record, unit func(budget string) string, short bool) string {
	switch {
	case r.Outcome == jobs.Skipped && short:
		return "another run held the lease: " + r.Holder + ", expiring " + relative(r.LeaseExpires.Sub(g.now()))
	case r.Outcome == jobs.Skipped:
		return "another run held the lease: " + r.Holder + " until " + g.absolute(r.LeaseExpires)
	case r.Exhausted != nil:
		e := r.Exhausted
		u := unit(e.Budget)
		return fmt.Sprintf("%s spent (%s of %s used, %s left); capacity back %s", e.Budget, amountText(e.Used, u), amountText(e.Limit, u), amountText(e.Left, u), relativeTo(e.RetryAt, g.now()))
	case r.Error != "":
		return strings.Join(strings.Fields(r.Error), " ")
	}
	return "-"
}

func relativeTo(t, now time.Time) string { return relative(t.Sub(now)) }

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
// of 8 left, search 8 of 93 left", each budget in its unit ("spend $1.20
// of $487.66 left"), or "-" with no plan.
func expectedText(est []estimateBudgetJSON) string {
	if len(est) == 0 {
		return "-"
	}
	fits := true
	var parts []string
	for _, b := range est {
		fits = fits && b.Fits
		parts = append(parts, b.Budget+" "+amountText(b.Cost, b.Unit)+" of "+amountText(b.Left, b.Unit)+" left")
	}
	verdict := "fits: "
	if !fits {
		verdict = "does not fit: "
	}
	return verdict + strings.Join(parts, ", ")
}
