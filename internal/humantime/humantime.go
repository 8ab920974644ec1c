// Package humantime formats durations the way quotactl's terminal output and
// its dashboard both show them, so the two never disagree.
package humantime

import (
	"fmt"
	"time"
)

// Relative says when d from now is, compactly: "in 2h5m", "3m10s ago",
// "now" (under a second either way).
func Relative(d time.Duration) string {
	switch {
	case d >= time.Second:
		return "in " + Compact(d)
	case d <= -time.Second:
		return Compact(-d) + " ago"
	}
	return "now"
}

// Compact formats d to the second, with at most two units: "1d2h", "2h5m",
// "5m30s", "42s". A positive d under a second keeps its own precision
// ("250ms").
func Compact(d time.Duration) string {
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
	case days > 0 && h == 0:
		return fmt.Sprintf("%dd", days)
	case days > 0:
		return fmt.Sprintf("%dd%dh", days, h)
	case h > 0 && m == 0:
		return fmt.Sprintf("%dh", h)
	case h > 0:
		return fmt.Sprintf("%dh%dm", h, m)
	case m > 0 && s == 0:
		return fmt.Sprintf("%dm", m)
	case m > 0:
		return fmt.Sprintf("%dm%ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

// Took formats how long something took at a precision a person reads:
// "412ms" under a second, "12.3s" under a minute, then Compact ("5m30s",
// "2h5m").
func Took(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + Took(-d)
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return Compact(d)
}
