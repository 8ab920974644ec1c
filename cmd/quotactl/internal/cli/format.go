package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// relative says when d from now is, compactly: "in 2h5m", "3m10s ago",
// "now".
func relative(d time.Duration) string {
	switch {
	case d >= time.Second:
		return "in " + compact(d)
	case d <= -time.Second:
		return compact(-d) + " ago"
	}
	return "now"
}

// compact formats d to the second, with at most two units: "1d2h", "2h5m",
// "5m30s", "42s".
func compact(d time.Duration) string {
	if d > 0 && d < time.Second {
		return d.String()
	}
	d = d.Round(time.Second)
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	h := d / time.Hour
	d -= h * time.Hour
	m := d / time.Minute
	d -= m * time.Minute
	s := d / time.Second
	switch {
	case days > 0:
		if h == 0 {
			return fmt.Sprintf("%dd", days)
		}
		return fmt.Sprintf("%dd%dh", days, h)
	case h > 0:
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	case m > 0:
		if s == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

// took formats how long a run took at a precision a person reads: "412ms"
// under a second, "12.3s" under a minute, then compact ("5m30s", "2h5m").
func took(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + took(-d)
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return compact(d)
}

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
			if _, err := fmt.Fprintln(w, strings.Join(r, "\t")); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
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
// America/Los_Angeles", "sliding 24h".
func windowText(w quota.Window) string {
	if w.IsDaily() {
		return "day, reset at midnight " + w.Location().String()
	}
	return "sliding " + compact(w.Duration())
}
