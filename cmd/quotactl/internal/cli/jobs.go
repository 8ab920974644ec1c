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
last run; with NAME, its recent runs (--limit) and its checkpoint. An outcome
is ok, exhausted (a clean stop on a spent budget: the next run resumes from
the checkpoint), failed, panicked, cancelled or abandoned.

JSON: without NAME, an array of {job, last, checkpoint}; with NAME, {job, runs,
checkpoint}. A run has the jobs package's stable fields: job, run, trigger,
start, end, outcome, spent ({"API/BUDGET": units}), charges, unmetered, error,
exhausted ({budget, used, limit, left, cost, retry_at}); a checkpoint has job,
run, saved, cursor; it is null when there is none.`,
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
		Job        string           `json:"job"`
		Last       *jobs.Record     `json:"last"`
		Checkpoint *jobs.Checkpoint `json:"checkpoint"`
	}
	out := []jobJSON{}
	t := &table{header: []string{"JOB", "LAST RUN", "OUTCOME", "TOOK", "SPENT", "CHECKPOINT", "DETAIL"}}
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
		row := []string{name, "-", "-", "-", "-", opts.checkpointText(j.Checkpoint), "-"}
		if len(recs) > 0 {
			r := recs[0]
			j.Last = &r
			row = []string{name, opts.when(r.Start), string(r.Outcome), compact(r.Duration()), spentText(r.Spent), opts.checkpointText(j.Checkpoint), opts.detail(r)}
		}
		out = append(out, j)
		t.add(row...)
	}
	if opts.json {
		return opts.printJSON(out)
	}
	if len(out) == 0 {
		fmt.Fprintln(opts.io.ErrOut, "no job has run yet")
		return nil
	}
	return t.print(opts.io.Out, opts.io.TTY)
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
	t := &table{header: []string{"START", "TRIGGER", "OUTCOME", "TOOK", "SPENT", "DETAIL"}}
	for _, r := range recs {
		t.add(opts.when(r.Start), string(r.Trigger), string(r.Outcome), compact(r.Duration()), spentText(r.Spent), opts.detail(r))
	}
	if err := t.print(opts.io.Out, opts.io.TTY); err != nil {
		return err
	}
	if opts.io.TTY {
		fmt.Fprintf(opts.io.Out, "\ncheckpoint: %s\n", opts.checkpointText(cpp))
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

// detail says why a run ended the way it did.
func (g *globals) detail(r jobs.Record) string {
	switch {
	case r.Exhausted != nil:
		e := r.Exhausted
		return fmt.Sprintf("%s spent (%d of %d used, %d left); capacity back %s", e.Budget, e.Used, e.Limit, e.Left, relativeTo(e.RetryAt, g.now()))
	case r.Error != "":
		return strings.Join(strings.Fields(r.Error), " ")
	}
	return "-"
}

func relativeTo(t, now time.Time) string { return relative(t.Sub(now)) }
