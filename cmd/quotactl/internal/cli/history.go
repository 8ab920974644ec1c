package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
--every, the bucket is picked so the window has at most 24 buckets (1h for a
24h or daily window).

Hours are counted in the budget's own zone (a daily budget resets at its
midnight), else in the display zone. Bars are to the scale of the limit: a
full bar is a bucket that spent the whole limit. Below the chart, the units
each method and each job spent in the window (the store keeps them per hour).
Budgets are kept per owner: the chart is the owner's, every credential of
it together; --owner NAME alone charts that owner's. history only reads: an
--owner given with a credential must be the owner the store records for it
(a command that writes, such as take, moves a credential to the --owner it
is given).

JSON: an array, one element per budget: {api, owner, budget, credential,
fingerprint, window, used, limit, from, to, every_seconds, zone, buckets:
[{start, end, units, calls, methods}], methods, jobs}; methods and jobs map a
name to units, methods per bucket only when buckets are whole hours;
credential and fingerprint are empty with --owner alone.`,
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

type bucketJSON struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Units int64     `json:"units"`
	Calls int64     `json:"calls"`
	// Methods is the units per method, when buckets are whole hours (the
	// store keeps them per hour).
	Methods map[string]int64 `json:"methods,omitempty"`
}

type historyJSON struct {
	API          string    `json:"api"`
	Owner        string    `json:"owner"`
	Budget       string    `json:"budget"`
	Credential   string    `json:"credential"`
	Fingerprint  string    `json:"fingerprint"`
	Window       string    `json:"window"`
	Used         int64     `json:"used"`
	Limit        int64     `json:"limit"`
	From         time.Time `json:"from"`
	To           time.Time `json:"to"`
	EverySeconds float64   `json:"every_seconds"`
	// Zone is where the buckets' hours are counted: a daily budget's own
	// zone, else the display zone.
	Zone    string       `json:"zone"`
	Buckets []bucketJSON `json:"buckets"`
	// Methods and Jobs are the units each method and each job spent in the
	// window's hours (from the store's hourly breakdown).
	Methods map[string]int64 `json:"methods,omitempty"`
	Jobs    map[string]int64 `json:"jobs,omitempty"`
}

// maxBuckets bounds a chart.
const maxBuckets = 1000

// niceSteps are the bucket lengths picked when --every is not given.
var niceSteps = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// span returns the window's length for picking a bucket: a daily window's
// day is taken as 24h.
func span(w quota.Window) time.Duration {
	if w.IsDaily() {
		return 24 * time.Hour
	}
	return w.Duration()
}

func pickEvery(w quota.Window) time.Duration {
	for _, s := range niceSteps {
		if span(w)/s <= 24 {
			return s
		}
	}
	return span(w) / 24
}

// zoneOf is the zone a budget's chart counts hours in: a daily budget's
// own (its day starts at its midnight), else the display zone.
func (g *globals) zoneOf(w quota.Window) *time.Location {
	if w.IsDaily() {
		return w.Location()
	}
	return g.location()
}

// storeNow is the Now of a store request: the injected clock, or zero for
// the store's own.
func (g *globals) storeNow() time.Time {
	if g.io.Clock != nil {
		return g.io.Clock()
	}
	return time.Time{}
}

// addBreakdown adds the store's hourly breakdown rows to a chart: totals per
// method and job, and per bucket when buckets are whole hours.
func addBreakdown(h *historyJSON, every time.Duration, rows []backend.BreakdownRow) {
	if len(h.Buckets) == 0 {
		return
	}
	first := h.Buckets[0].Start
	for _, r := range rows {
		if r.Units <= 0 || !r.Hour.Add(time.Hour).After(h.From) {
			continue
		}
		m := r.Method
		if m == "" {
			m = noMethod
		}
		if h.Methods == nil {
			h.Methods = map[string]int64{}
		}
		h.Methods[m] += r.Units
		if r.Job != "" {
			if h.Jobs == nil {
				h.Jobs = map[string]int64{}
			}
			h.Jobs[r.Job] += r.Units
		}
		if every%time.Hour != 0 {
			continue
		}
		i := int(r.Hour.Sub(first) / every)
		if i < 0 || i >= len(h.Buckets) {
			continue
		}
		b := &h.Buckets[i]
		if b.Methods == nil {
			b.Methods = map[string]int64{}
		}
		b.Methods[m] += r.Units
	}
}

// noMethod names units charged without a method name.
const noMethod = "(no method)"

// buckets splits [from, to] into buckets of every and sums entries into
// them. Bucket edges fall on multiples of every from a daily window's
// midnight, or, for a sliding window, from the hour in loc (or the Unix
// epoch for steps under an hour), so charts are stable from one run to the
// next and hours are loc's.
func buckets(w quota.Window, now time.Time, every time.Duration, entries []quota.Entry, loc *time.Location) (from time.Time, out []bucketJSON, err error) {
	from = w.Start(now)
	first := from
	switch {
	case w.IsDaily():
		// from is the local midnight.
	case every%time.Hour == 0:
		lf := from.In(loc)
		first = time.Date(lf.Year(), lf.Month(), lf.Day(), lf.Hour(), 0, 0, 0, loc)
	default:
		first = from.Truncate(every)
	}
	n := int(now.Sub(first)/every) + 1
	if n > maxBuckets {
		return from, nil, usageErrorf("--every %v makes %d buckets over the window; at most %d", every, n, maxBuckets)
	}
	out = make([]bucketJSON, n)
	for i := range out {
		out[i].Start = first.Add(time.Duration(i) * every).UTC()
		out[i].End = first.Add(time.Duration(i+1) * every).UTC()
	}
	for _, e := range entries {
		i := int(e.At.Sub(first) / every)
		if i < 0 || i >= n {
			continue
		}
		out[i].Units += e.Cost
		out[i].Calls++
	}
	return from, out, nil
}

func historyRun(ctx context.Context, opts *historyOptions) error {
	l, info, err := opts.limiter(ctx, opts.API)
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
	now := opts.now()
	var charts []historyJSON
	for _, b := range budgets {
		var entries []quota.Entry
		if c.Fingerprint == "" {
			// --owner alone: the owner's log, whichever of its credentials
			// spent it.
			entries, err = l.Store().Entries(ctx, &backend.EntriesRequest{API: info.Name, Owner: c.Account, Budget: b, Now: opts.storeNow()})
		} else {
			entries, err = l.Entries(ctx, c.Credential, b.Name)
		}
		if err != nil {
			return err
		}
		every := opts.Every
		if every == 0 {
			every = pickEvery(b.Window)
		}
		loc := opts.zoneOf(b.Window)
		from, bs, err := buckets(b.Window, now, every, entries, loc)
		if err != nil {
			return err
		}
		var used int64
		for _, e := range entries {
			used += e.Cost
		}
		h := historyJSON{
			API: info.Name, Owner: c.Account, Budget: b.Name, Credential: c.Label, Fingerprint: c.Fingerprint, Window: b.Window.String(),
			Used: used, Limit: b.Limit, From: from.UTC(), To: now.UTC(), EverySeconds: every.Seconds(), Zone: loc.String(), Buckets: bs,
		}
		rows, err := l.Store().Breakdown(ctx, &backend.BreakdownRequest{API: info.Name, Owner: c.Account, Budgets: []string{b.Name}, Since: from, Now: opts.storeNow()})
		if err != nil {
			return err
		}
		addBreakdown(&h, every, rows)
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
				owner, c.name(), info.Name, ownerName(k.Owner), ownerName(k.Owner))
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
		who = "owner " + ownerName(h.Owner) // --owner alone
	case h.Owner != "" && h.Owner != c.Fingerprint:
		who += " (owner " + ownerName(h.Owner) + ")"
	}
	fmt.Fprintf(w, "%s/%s for %s: %d of %d used in the window (%s), per %s in %s; a full bar is the limit\n",
		h.API, h.Budget, who, h.Used, h.Limit, windowOf(h.Window), compact(every), loc)
	var peak int64
	for _, b := range h.Buckets {
		peak = max(peak, b.Units)
	}
	layout := "15:04"
	first, last := h.Buckets[0].Start.In(loc), h.Buckets[len(h.Buckets)-1].Start.In(loc)
	switch {
	case every < time.Minute:
		layout = "15:04:05"
	case first.YearDay() != last.YearDay() || first.Year() != last.Year():
		layout = "Jan 02 15:04"
	}
	unitsW := len(fmt.Sprint(peak))
	for _, b := range h.Buckets {
		n := 0
		if h.Limit > 0 {
			n = int(b.Units * chartWidth / h.Limit)
			if b.Units > 0 && n == 0 {
				n = 1 // something was spent: show it
			}
			n = min(n, chartWidth)
		}
		line := fmt.Sprintf("%s  |%-*s|  %*d", b.Start.In(loc).Format(layout), chartWidth, strings.Repeat("#", n), unitsW, b.Units)
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
	if len(h.Methods) > 1 || len(h.Methods) == 1 && h.Methods[noMethod] == 0 {
		fmt.Fprintf(w, "by method%s: %s\n", since, totalsText(h.Methods))
	}
	if len(h.Jobs) > 0 {
		fmt.Fprintf(w, "by job%s: %s\n", since, totalsText(h.Jobs))
	}
	return nil
}

// totalsText is "videos.insert 9600, search.list 1", biggest first.
func totalsText(m map[string]int64) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
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
