package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

func newCmdBudget(g *globals) *cobra.Command {
	return group("budget", "Define, list and delete budgets",
		newCmdBudgetSet(g, nil), newCmdBudgetList(g, nil), newCmdBudgetDelete(g, nil))
}

// splitBudget reads "API/BUDGET".
func splitBudget(s string) (api, budget string, err error) {
	api, budget, ok := strings.Cut(s, "/")
	if !ok || api == "" || budget == "" || strings.Contains(budget, "/") {
		return "", "", usageErrorf("%q: want API/BUDGET, such as youtube/units", s)
	}
	if backend.CheckName("api", api) != nil || backend.CheckName("budget", budget) != nil {
		return "", "", usageErrorf("%q: API and budget names are letters, digits, '.', '_' and '-', starting with a letter or digit (at most 64)", s)
	}
	return api, budget, nil
}

type budgetSetOptions struct {
	*globals
	API, Budget string
	Owner       string // --owner NAME: that owner's limit
	Limit       int64
	Window      string // --window DURATION
	Daily       string // --daily ZONE
	Monthly     string // --monthly ZONE
	Unit        string // --unit UNIT; empty: the one recorded
}

func newCmdBudgetSet(g *globals, runF func(context.Context, *budgetSetOptions) error) *cobra.Command {
	opts := &budgetSetOptions{globals: g}
	c := &cobra.Command{
		Use:   "set API/BUDGET --limit N (--window DURATION | --daily ZONE | --monthly ZONE | --owner NAME)",
		Short: "Define a budget, or change its limit or window, or an owner's limit",
		Long: `Define a budget of an API in the store, or replace its definition: a limit of
units over a sliding window (--window 24h: exact over any trailing 24 hours) or
a daily window that resets at local midnight in a time zone (--daily
America/Los_Angeles, as the YouTube Data API does), or a monthly one that
resets at local midnight on the 1st of each month (--monthly Europe/Paris,
as upstreams that bill by the calendar month do). Usage already recorded is
kept: a shorter window counts less of it, and a longer one, set again, counts
it all again.

A definition set here is an operator's: it overrides the definition a program
gives quota.New for the same budget, in every process sharing the store
(running limiters pick it up within 30 seconds), until 'quotactl budget
delete' removes it. 'budget list' and 'status --json' say which definition
applies (source: operator or program).

--unit says what the budget counts (tokens, requests, points; usd-micro for
micro-dollars, which status shows as dollars): without it, the budget keeps
the unit recorded for it (a program's, from its cost table), else units.

With --owner NAME, set the limit of that owner alone (an owner's name, or the
fingerprint of a credential that is its own owner), for an upstream that
grants it another (a YouTube project after a quota audit, GitHub Enterprise
Cloud): the budget keeps its window, and must be defined already. An
operator's limit of an owner beats every other (a program's, one learned from
the upstream), in every process sharing the store, within a second, until
'quotactl budget delete API/BUDGET --owner NAME' removes it.

JSON fields: api, budget, limit, window ("sliding:24h0m0s",
"daily:America/Los_Angeles" or "monthly:Europe/Paris"), unit, source ("operator"), limit_source
("operator"); with --owner: api, budget, owner, limit, limit_source.`,
		Example: `  quotactl budget set youtube/units --limit 10000 --daily America/Los_Angeles
  quotactl budget set youtube/search --limit 100 --daily America/Los_Angeles
  quotactl budget set github/core --limit 5000 --window 1h
  quotactl budget set openai/tokens --limit 2000000 --monthly UTC --unit tokens
  quotactl budget set openai/spend --limit 500000000 --monthly UTC --unit usd-micro
  quotactl budget set youtube/units --owner audited-project --limit 1000000`,
		Args: exactArgs(1, "one API/BUDGET argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if opts.API, opts.Budget, err = splitBudget(args[0]); err != nil {
				return err
			}
			if !cmd.Flags().Changed("limit") {
				return usageErrorf("missing --limit N")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return budgetSetRun(cmd.Context(), opts)
		},
	}
	c.Flags().Int64Var(&opts.Limit, "limit", 0, "units the window admits (> 0)")
	c.Flags().StringVar(&opts.Owner, "owner", "", "set this owner's limit alone (its name, or a credential's fingerprint)")
	c.Flags().StringVar(&opts.Window, "window", "", "a sliding window's length, e.g. 24h or 90m")
	c.Flags().StringVar(&opts.Daily, "daily", "", "a daily window's time zone (IANA name), e.g. America/Los_Angeles or UTC")
	c.Flags().StringVar(&opts.Monthly, "monthly", "", "a monthly window's time zone (IANA name), e.g. Europe/Paris or UTC")
	c.Flags().StringVar(&opts.Unit, "unit", "", "what the budget counts, e.g. tokens, requests, points or usd-micro (default: the unit recorded, else units)")
	return c
}

// parseWindow reads --window, --daily or --monthly (exactly one).
func parseWindow(window, daily, monthly string) (quota.Window, error) {
	given := 0
	for _, f := range []string{window, daily, monthly} {
		if f != "" {
			given++
		}
	}
	switch {
	case given > 1:
		return quota.Window{}, usageErrorf("give only one of --window, --daily and --monthly")
	case window != "":
		d, err := time.ParseDuration(window)
		if err != nil {
			return quota.Window{}, usageErrorf("--window %q: not a duration (such as 24h, 90m or 1h30m)", window)
		}
		if d <= 0 {
			return quota.Window{}, usageErrorf("--window %q: must be > 0", window)
		}
		return quota.Sliding(d), nil
	case daily != "":
		loc, err := windowZone("--daily", daily)
		if err != nil {
			return quota.Window{}, err
		}
		return quota.Daily(loc), nil
	case monthly != "":
		loc, err := windowZone("--monthly", monthly)
		if err != nil {
			return quota.Window{}, err
		}
		return quota.Monthly(loc), nil
	}
	return quota.Window{}, usageErrorf("missing window: give --window DURATION, --daily ZONE or --monthly ZONE")
}

// windowZone reads the zone flag gives: an IANA name, not "Local".
func windowZone(flag, zone string) (*time.Location, error) {
	if strings.EqualFold(zone, "local") {
		return nil, usageErrorf("%s %q: name the zone (such as America/Los_Angeles or UTC) so every host agrees", flag, zone)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, usageErrorf("%s %q: unknown time zone (want an IANA name such as America/Los_Angeles or UTC)", flag, zone)
	}
	return loc, nil
}

type budgetJSON struct {
	API    string       `json:"api"`
	Budget string       `json:"budget"`
	Owner  string       `json:"owner,omitempty"` // a row of one owner's limit
	Limit  int64        `json:"limit"`
	Window string       `json:"window,omitempty"`
	Unit   string       `json:"unit,omitempty"`
	Source quota.Source `json:"source,omitempty"` // whose definition of the budget
	// LimitSource is where the limit comes from: program, operator or
	// upstream.
	LimitSource  quota.Source `json:"limit_source"`
	LearnedLimit int64        `json:"learned_limit,omitempty"`
}

func budgetSetRun(ctx context.Context, opts *budgetSetOptions) error {
	if opts.Limit <= 0 {
		return usageErrorf("--limit %d: must be > 0", opts.Limit)
	}
	if opts.Owner != "" {
		return ownerLimitSetRun(ctx, opts)
	}
	w, err := parseWindow(opts.Window, opts.Daily, opts.Monthly)
	if err != nil {
		return err
	}
	b := quota.Budget{Name: opts.Budget, Limit: opts.Limit, Window: w, Unit: opts.Unit}
	if opts.Unit != "" && backend.CheckName("unit", opts.Unit) != nil {
		return usageErrorf("--unit %q: a unit is letters, digits, '.', '_' and '-', such as tokens, requests or usd-micro", opts.Unit)
	}
	if err := backend.ValidateBudgets([]quota.Budget{b}); err != nil {
		return err
	}
	st, err := opts.Store(ctx)
	if err != nil {
		return err
	}
	if err := quota.SetOverride(ctx, st, opts.API, b, opts.now()); err != nil {
		return err
	}
	if b.Unit == "" {
		// SetOverride kept the unit recorded, if any: say that one.
		over, err := quota.Overrides(ctx, st, opts.API)
		if err != nil {
			return err
		}
		b.Unit = over[b.Name].Unit
	}
	if opts.json {
		return opts.printJSON(budgetJSON{API: opts.API, Budget: b.Name, Limit: b.Limit, Window: w.String(), Unit: b.UnitOf(), Source: quota.SourceOperator, LimitSource: quota.SourceOperator})
	}
	_, err = fmt.Fprintf(opts.io.Out, "%s/%s: %s per %s\n", opts.API, b.Name, limitText(b), windowText(w))
	return err
}

type budgetListOptions struct {
	*globals
}

func newCmdBudgetList(g *globals, runF func(context.Context, *budgetListOptions) error) *cobra.Command {
	opts := &budgetListOptions{globals: g}
	return &cobra.Command{
		Use:   "list",
		Short: "List the budgets the store defines",
		Long: `List every budget the store defines, by API, with where its definition
comes from: "operator" (set with 'quotactl budget set', overriding any
program's definition until 'quotactl budget delete') or "program" (what a
program gave quota.New).

Owners with a limit of their own follow their budget, one row each, with
the limit in force and where it comes from: "operator" ('budget set
--owner'), "upstream" (learned from the upstream's reports: applied when
smaller than the limit it would replace, larger only in programs that opt
in) or "program" (quota.WithOwnerLimits). A learned limit not applied is
shown beside it. On these rows the OWNER column names the owner; it is "-"
on a budget's own row, and absent when no owner has a limit of its own.

JSON: an array of {api, budget, limit, window, unit, source, limit_source}, and
for an owner's row {api, budget, owner, limit, limit_source, learned_limit}
(learned_limit: what the upstream last reported, applied or not).`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return budgetListRun(cmd.Context(), opts)
		},
	}
}

func budgetListRun(ctx context.Context, opts *budgetListOptions) error {
	apis, err := opts.apis(ctx)
	if err != nil {
		return err
	}
	owners, err := opts.ownerLimits(ctx)
	if err != nil {
		return err
	}
	out := []budgetJSON{}
	for _, a := range apis {
		for _, b := range a.Budgets {
			src := opts.source(a.Name, b.Name)
			out = append(out, budgetJSON{API: a.Name, Budget: b.Name, Limit: b.Limit, Window: b.Window.String(), Unit: b.UnitOf(), Source: src, LimitSource: src})
			for _, lf := range owners[a.Name] {
				if lf.Budget == b.Name {
					out = append(out, budgetJSON{API: a.Name, Budget: b.Name, Owner: lf.Owner, Limit: lf.Limit, LimitSource: lf.Source, LearnedLimit: lf.Learned})
				}
			}
		}
	}
	if opts.json {
		return opts.printJSON(out)
	}
	if len(out) == 0 {
		fmt.Fprintln(opts.io.ErrOut, "no budgets defined; define one with 'quotactl budget set API/BUDGET --limit N --daily ZONE'")
		return nil
	}
	return budgetTable(out, len(owners) > 0).print(opts.io.Out, opts.io.TTY)
}

type budgetDeleteOptions struct {
	*globals
	API, Budget string
	Owner       string // --owner NAME: that owner's limits alone
}

func newCmdBudgetDelete(g *globals, runF func(context.Context, *budgetDeleteOptions) error) *cobra.Command {
	opts := &budgetDeleteOptions{globals: g}
	c := &cobra.Command{
		Use:   "delete API/BUDGET [--owner NAME]",
		Short: "Delete a budget's definition",
		Long: `Delete a budget's definition from the store, and the operator's override
of it: a program that defines the budget applies its own definition again
(running limiters within 30 seconds). Its recorded usage is not deleted: it
expires with its window, and comes back into view if the budget is defined
again. Until then 'quotactl refund' cannot give back a reservation's units in
it: it refunds the other budgets and exits 1 naming this one.

With --owner NAME, delete that owner's limits of the budget alone (the
operator's, the one learned from the upstream, and the one programs recorded):
the budget's limit applies to the owner again, until a program that gives it
one starts again or the upstream reports one.

JSON fields: api, budget, deleted (true); with --owner, owner too.`,
		Args: exactArgs(1, "one API/BUDGET argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if opts.API, opts.Budget, err = splitBudget(args[0]); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return budgetDeleteRun(cmd.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Owner, "owner", "", "delete this owner's limits alone (its name, or a credential's fingerprint)")
	return c
}

func budgetDeleteRun(ctx context.Context, opts *budgetDeleteOptions) error {
	if opts.Owner != "" {
		return ownerLimitDeleteRun(ctx, opts)
	}
	st, err := opts.Store(ctx)
	if err != nil {
		return err
	}
	removed, err := quota.RemoveOverride(ctx, st, opts.API, opts.Budget)
	if err != nil {
		return err
	}
	if err := st.DeleteBudget(ctx, opts.API, opts.Budget); err != nil {
		if !errors.Is(err, quota.ErrNotFound) {
			return err
		}
		if !removed {
			return usageErrorf("no budget %s/%s in the store", opts.API, opts.Budget)
		}
	}
	if opts.json {
		return opts.printJSON(struct {
			API     string `json:"api"`
			Budget  string `json:"budget"`
			Deleted bool   `json:"deleted"`
		}{opts.API, opts.Budget, true})
	}
	_, err = fmt.Fprintf(opts.io.Out, "deleted budget %s/%s (its recorded usage expires with its window)\n", opts.API, opts.Budget)
	return err
}
