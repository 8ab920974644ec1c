package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/quota"
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
		Use:   "history API --label L [--budget B] [--every 1h]",
		Short: "Chart a credential's usage over the window",
		Long: `Chart the units a credential spent in each budget's current window (the
entries that still count), bucketed by --every, as a horizontal bar chart:
one line per bucket with its start time, a bar and the units. Without
--every, the bucket is picked so the window has at most 24 buckets (1h for a
24h or daily window).

Budgets are kept per owner: the chart is the owner's, every credential of
it together.

JSON: an array, one element per budget: {api, owner, budget, credential,
fingerprint, window, used, limit, from, to, every_seconds, buckets: [{start,
end, units, calls}]}.`,
		Example: `  quotactl history youtube --label yt-key-1
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
}

type historyJSON struct {
	API          string       `json:"api"`
	Owner        string       `json:"owner"`
	Budget       string       `json:"budget"`
	Credential   string       `json:"credential"`
	Fingerprint  string       `json:"fingerprint"`
	Window       string       `json:"window"`
	Used         int64        `json:"used"`
	Limit        int64        `json:"limit"`
	From         time.Time    `json:"from"`
	To           time.Time    `json:"to"`
	EverySeconds float64      `json:"every_seconds"`
	Buckets      []bucketJSON `json:"buckets"`
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

// buckets splits [from, to] into buckets of every and sums entries into
// them. Bucket edges fall on multiples of every from a daily window's
// midnight, or from the Unix epoch for a sliding window, so charts are
// stable from one run to the next.
func buckets(w quota.Window, now time.Time, every time.Duration, entries []quota.Entry) (from time.Time, out []bucketJSON, err error) {
	from = w.Start(now)
	first := from
	if w.IsDaily() {
		// from is the local midnight.
	} else {
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
	if !opts.Cred.given() {
		return usageErrorf("missing credential: give --label L (or --credential-env VAR or --credential-file FILE)")
	}
	c, err := opts.credential(ctx, opts.Cred, info)
	if err != nil {
		return err
	}
	now := opts.now()
	var charts []historyJSON
	for _, b := range budgets {
		entries, err := l.Entries(ctx, c.Credential, b.Name)
		if err != nil {
			return err
		}
		every := opts.Every
		if every == 0 {
			every = pickEvery(b.Window)
		}
		from, bs, err := buckets(b.Window, now, every, entries)
		if err != nil {
			return err
		}
		var used int64
		for _, e := range entries {
			used += e.Cost
		}
		charts = append(charts, historyJSON{
			API: info.Name, Owner: c.Account, Budget: b.Name, Credential: c.Label, Fingerprint: c.Fingerprint, Window: b.Window.String(),
			Used: used, Limit: b.Limit, From: from.UTC(), To: now.UTC(), EverySeconds: every.Seconds(), Buckets: bs,
		})
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

// chartWidth is the longest bar, in characters.
const chartWidth = 40

func (g *globals) chart(w io.Writer, c cred, h historyJSON) error {
	every := time.Duration(h.EverySeconds * float64(time.Second))
	who := c.name()
	if h.Owner != "" && h.Owner != c.Fingerprint {
		who += " (owner " + ownerName(h.Owner) + ")"
	}
	fmt.Fprintf(w, "%s/%s for %s: %d of %d used in the window (%s), per %s\n", h.API, h.Budget, who, h.Used, h.Limit, windowOf(h.Window), compact(every))
	var peak int64
	for _, b := range h.Buckets {
		peak = max(peak, b.Units)
	}
	layout := "15:04"
	first, last := h.Buckets[0].Start.In(g.location()), h.Buckets[len(h.Buckets)-1].Start.In(g.location())
	switch {
	case every < time.Minute:
		layout = "15:04:05"
	case first.YearDay() != last.YearDay() || first.Year() != last.Year():
		layout = "Jan 02 15:04"
	}
	unitsW := len(fmt.Sprint(peak))
	for _, b := range h.Buckets {
		n := 0
		if peak > 0 {
			n = int((b.Units*chartWidth + peak - 1) / peak)
		}
		line := fmt.Sprintf("%s  %-*s  %*d", b.Start.In(g.location()).Format(layout), chartWidth, strings.Repeat("#", n), unitsW, b.Units)
		if b.Calls > 0 {
			line += fmt.Sprintf("  (%d call%s)", b.Calls, plural(b.Calls))
		}
		if _, err := fmt.Fprintln(w, strings.TrimRight(line, " ")); err != nil {
			return err
		}
	}
	return nil
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
