package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/quotactl/quotactl/internal/humantime"
	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/quota"
)

// relative, compact and took format durations as the dashboard does
// (internal/humantime): "in 2h5m", "5m30s", "12.3s".
func relative(d time.Duration) string { return humantime.Relative(d) }

func compact(d time.Duration) string { return humantime.Compact(d) }

func took(d time.Duration) string { return humantime.Took(d) }

// absolute formats t in the display zone, to the second.
func (g *globals) absolute(t time.Time) string {
	return t.In(g.location()).Format("2006-01-02 15:04:05 MST")
}

// when formats t as "in 2h5m (2026-11-22 15:04:05 PST)".
func (g *globals) when(t time.Time) string {
	return relative(t.Sub(g.now())) + " (" + g.absolute(t) + ")"
}

// table prints rows aligned under a header on a terminal, tab-separated
// without a header otherwise (for cut, awk and friends).
type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) print(w io.Writer, tty bool) error {
	if !tty {
		for _, r := range t.rows {
			if _, err := fmt.Fprintln(w, joinCells(r)); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, joinCells(t.header))
	for _, r := range t.rows {
		fmt.Fprintln(tw, joinCells(r))
	}
	return tw.Flush()
}

// printJSON writes v as indented JSON.
func (g *globals) printJSON(v any) error {
	enc := json.NewEncoder(g.io.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jsonTime is a time for JSON output: RFC 3339 in UTC, or null.
func jsonTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// windowText says what a window is in words: "day, reset at midnight
// America/Los_Angeles", "month, reset on the 1st at midnight Europe/Paris",
// "sliding 24h".
func windowText(w quota.Window) string {
	switch {
	case w.IsDaily():
		return "day, reset at midnight " + w.Location().String()
	case w.IsMonthly():
		return "month, reset on the 1st at midnight " + w.Location().String()
	}
	return "sliding " + compact(w.Duration())
}

// limitText says a budget's limit with its unit: "10000 units" in the
// default unit (as before units), else as status shows amounts: "30,000
// tokens", "$500.00" (view.Amount).
func limitText(b quota.Budget) string {
	if view.IsDefaultUnit(b.Unit) {
		return strconv.FormatInt(b.Limit, 10) + " units"
	}
	return view.Amount(b.Limit, b.Unit)
}

// amountText says n of unit as the CLI's tables do: a bare number in the
// default unit (as before units: "9600"), else as status shows amounts
// (view.Amount): "1,234 tokens", "$12.34".
func amountText(n int64, unit string) string { return inUnit(n, unit, view.Amount) }

// scaleText says n of unit in a narrow place, as history labels its bars:
// a bare number in the default unit ("9600"), else view.Scale: "1,234"
// (tokens), "$12.34".
func scaleText(n int64, unit string) string { return inUnit(n, unit, view.Scale) }

// inUnit is the CLI's rule for an amount: a bare number in the default
// unit, as the CLI printed amounts before budgets had units; in any other
// unit, as the view helper say shows it.
func inUnit(n int64, unit string, say func(n int64, unit string) string) string {
	if view.IsDefaultUnit(unit) {
		return strconv.FormatInt(n, 10)
	}
	return say(n, unit)
}

// usedOfText says used of limit in unit as status's USED column does:
// "9600/10000" in the default unit (as before units), else view.UsedOf:
// "1,234 / 30,000 tokens", "$12.34 / $500.00".
func usedOfText(used, limit int64, unit string) string {
	if view.IsDefaultUnit(unit) {
		return amountText(used, unit) + "/" + amountText(limit, unit)
	}
	return view.UsedOf(used, limit, unit)
}
