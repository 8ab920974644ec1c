package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

type historyOptions struct {
	*globals
	API    string
	Cred   credFlags
	Budget string        // empty: every budget
	Every  time.Duration // 0: picked from the window
}

func newCmdHistory(g *globals, runF func(context.Context, *historyOptions) error) *cobra.Command {
	opts := &historyOptions{globals: g}
	var every string
	c := &cobra.Command{
		Use:   "history API (--label L | --owner NAME) [--budget B] [--every 1h]",
		Short: "Chart a credential's or an owner's usage over the window",
		Long: `Chart the units a credential spent in each budget's current window (the
entries that still count), bucketed by --every, as a horizontal bar chart:
one line per bucket with its start time, a bar and the units. Without
--every, the bucket is the shortest of 1s, 5s, 10s, 30s, 1m, 5m, 10m, 15m,
30m, 1h, 2h, 3h, 6h, 12h and 24h that gives the window at most 24 buckets
(1h for a 24h or daily window, 5m for a sliding hour; a day for a monthly
window), as the dashboard's charts.

Hours are counted in the budget's own zone (a daily or monthly budget resets
at its midnight), else in the display zone. Bars are to the scale of the limit: a
full bar is a bucket that spent the whole limit. Below the chart, the units
each method and each job spent in the window (the store keeps them per hour).
A budget with a unit of its own is charted in it (tokens; a spend budget,
unit usd-micro, in dollars).
Budgets are kept per owner: the chart is the owner's, every credential of
it together; --owner NAME alone charts that owner's. history only reads: an
--owner given with a credential must be the owner the store records for it
(a command that writes, such as take, moves a credential to the --owner it
is given).

JSON: an array, one element per budget: {api, owner, budget, credential,
fingerprint, window, unit, used, limit, from, to, every_seconds, zone, buckets:
[{start, end, units, calls, methods}], methods, jobs}; methods and jobs map a
name to units, methods per bucket only when buckets are whole hours;
credential and fingerprint are empty with --owner alone. 'quotactl serve'
answers the same on /api/history, one element per owner and budget.`,
		Example: `  quotactl history youtube --label yt-key-1
  quotactl history youtube --owner my-project --budget units
  quotactl history youtube --label yt-key-1 --budget search --every 30m --json`,
		Args: exactArgs(1, "one API argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.API = args[0]
			if every != "" {
				d, err := time.ParseDuration(every)
				if err != nil || d <= 0 {
					return usageErrorf("--every %q: want a duration > 0, such as 1h or 15m", every)
				}
				opts.Every = d
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return historyRun(cmd.Context(), opts)
		},
	}
	opts.Cred.register(c, "the credential's label")
	c.Flags().StringVar(&opts.Budget, "budget", "", "only this budget (default: every budget of the API)")
	c.Flags().StringVar(&every, "every", "", "bucket length, e.g. 1h or 15m (default: at most 24 buckets over the window)")
	return c
}

// historyJSON is one chart of history --json: the view every tool prints.
type historyJSON = view.History

func historyRun(ctx context.Context, opts *historyOptions) error {
	_, info, err := opts.limiter(ctx, opts.API)
	if err != nil {
		return err
	}
	budgets := info.Budgets
	if opts.Budget != "" {
		b, err := budgetOf(info, opts.Budget)
		if err != nil {
			return err
		}
		budgets = []quota.Budget{b}
	}
	c, err := opts.historyOf(ctx, info)
	if err != nil {
		return err
	}
	r, err := opts.reader(ctx)
	if err != nil {
		return err
	}
	var charts []historyJSON
	for _, b := range budgets {
		h, err := r.History(ctx, info.Name, c.Account, b, opts.Every)
		var many *view.TooManyBucketsError
		if errors.As(err, &many) {
			return usageErrorf("--every %v makes %d buckets over the window; at most %d", many.Every, many.Buckets, view.MaxBuckets)
		}
		if err != nil {
			return err
		}
		h.Credential, h.Fingerprint = c.Label, c.Fingerprint
		charts = append(charts, h)
	}
	if opts.json {
		return opts.printJSON(charts)
	}
	for i, h := range charts {
		if i > 0 {
			fmt.Fprintln(opts.io.Out)
		}
		if err := opts.chart(opts.io.Out, c, h); err != nil {
			return err
		}
	}
	return nil
}

// historyOf resolves whose usage history charts: the credential named
// (--label, --credential-env or --credential-file), or with --owner alone
// that owner (budgets are kept per owner). history only reads: an --owner
// that is not the one the store records for the credential named is an
// error, never a move of the credential to that owner (which a write
// command with --owner does).
func (opts *historyOptions) historyOf(ctx context.Context, info quota.APIInfo) (cred, error) {
	owner := opts.Cred.Owner
	if owner != "" {
		if err := backend.CheckName("owner", owner); err != nil {
			return cred{}, usageErrorf("bad --owner %q: letters, digits, '.', '_' and '-' only", owner)
		}
	}
	if !opts.Cred.given() {
		if owner == "" {
			return cred{}, usageErrorf("missing credential: give --label L (or --credential-env VAR or --credential-file FILE), or --owner NAME for an owner's usage")
		}
		var owners []string
		for _, k := range info.Credentials {
			if ownerIs(k.Owner, owner) {
				return cred{Account: k.Owner}, nil
			}
			owners = append(owners, k.Owner)
		}
		slices.Sort(owners)
		known := "it knows none"
		if len(owners) > 0 {
			known = "owners: " + strings.Join(slices.Compact(owners), ", ")
		}
		return cred{}, usageErrorf("unknown owner %q: no credential of %s belongs to it (%s)", owner, info.Name, known)
	}
	c, err := opts.credential(ctx, opts.Cred, info)
	if err != nil {
		return cred{}, err
	}
	if owner == "" {
		return c, nil
	}
	for _, k := range info.Credentials {
		if k.ID == c.Fingerprint && k.Owner != owner {
			return cred{}, usageErrorf("--owner %q: credential %s of %s is kept under owner %s, and history only reads: it moves no credential to another owner; leave --owner out for %s's chart, or give --owner alone for another owner's",
				owner, c.name(), info.Name, view.AccountName(k.Account()), view.AccountName(k.Account()))
		}
	}
	return c, nil
}

// chartWidth is the bar of a bucket that spent the whole limit, in
// characters: bars are to the scale of the limit, not of the busiest bucket.
const chartWidth = 40

func (g *globals) chart(w io.Writer, c cred, h historyJSON) error {
	every := time.Duration(h.EverySeconds * float64(time.Second))
	loc, err := time.LoadLocation(h.Zone)
	if err != nil {
		loc = g.location()
	}
	who := c.name()
	switch {
	case c.Fingerprint == "":
		who = "owner " + view.AccountName(h.Owner) // --owner alone
	case h.Owner != "" && h.Owner != c.Fingerprint:
		who += " (owner " + view.AccountName(h.Owner) + ")"
	}
	// In the budget's unit: "1,234 tokens of 30,000 tokens", "9600 of
	// 10000" in the default unit; the buckets in dollars for a spend budget.
	used := amountText(h.Used, h.Unit) + " of " + amountText(h.Limit, h.Unit)
	amount := func(n int64) string { return scaleText(n, h.Unit) }
	fmt.Fprintf(w, "%s/%s for %s: %s used in the window (%s), per %s in %s; a full bar is the limit\n",
		h.API, h.Budget, who, used, windowOf(h.Window), compact(every), loc)
	unitsW := 0
	for _, b := range h.Buckets {
		unitsW = max(unitsW, len(amount(b.Units)))
	}
	layout := "15:04"
	first, last := h.Buckets[0].Start.In(loc), h.Buckets[len(h.Buckets)-1].Start.In(loc)
	switch {
	case every < time.Minute:
		layout = "15:04:05"
	case first.YearDay() != last.YearDay() || first.Year() != last.Year():
		layout = "Jan 02 15:04"
	}
	for _, b := range h.Buckets {
		n := 0
		if h.Limit > 0 {
			n = int(b.Units * chartWidth / h.Limit)
			if b.Units > 0 && n == 0 {
				n = 1 // something was spent: show it
			}
			n = min(n, chartWidth)
		}
		line := fmt.Sprintf("%s  |%-*s|  %*s", b.Start.In(loc).Format(layout), chartWidth, strings.Repeat("#", n), unitsW, amount(b.Units))
		if b.Calls > 0 {
			line += fmt.Sprintf("  (%d call%s)", b.Calls, plural(b.Calls))
		}
		if _, err := fmt.Fprintln(w, strings.TrimRight(line, " ")); err != nil {
			return err
		}
	}
	// The store keeps them per hour: a window that starts inside an hour
	// (a sliding one) counts that whole hour.
	since := ""
	if from := h.From.In(loc); from.Minute() != 0 || from.Second() != 0 || from.Nanosecond() > 1000 {
		since = " (hours from " + from.Truncate(time.Hour).Format("15:04") + ")"
	}
	if len(h.Methods) > 1 || len(h.Methods) == 1 && h.Methods[view.NoMethod] == 0 {
		fmt.Fprintf(w, "by method%s: %s\n", since, totalsText(h.Methods, amount))
	}
	if len(h.Jobs) > 0 {
		fmt.Fprintf(w, "by job%s: %s\n", since, totalsText(h.Jobs, amount))
	}
	return nil
}

// totalsText is "videos.insert 9600, search.list 1", biggest first.
func totalsText(m map[string]int64, amount func(int64) string) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + amount(m[k])
	}
	return strings.Join(parts, ", ")
}

func windowOf(s string) string {
	w, err := quota.ParseWindow(s)
	if err != nil {
		return s
	}
	return windowText(w)
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
