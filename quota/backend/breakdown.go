package backend

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// BreakdownRequest asks a Store which methods and jobs spent one owner's
// units, per hour.
type BreakdownRequest struct {
	API   string
	Owner string // as in TakeRequest
	// Budgets names the budgets to report; empty: every budget.
	Budgets []string
	// Since is where the report starts: rows of every hour that ends after
	// Since (the hour holding Since included). Give a budget's window start
	// (Window.Start) to cover its current window.
	Since time.Time
	Now   time.Time
}

// BreakdownRow is the units one method spent, under one job, in one budget,
// during one hour. Units are what Take recorded minus what Refund gave back;
// Adjust is not spent by any method and does not appear.
type BreakdownRow struct {
	// Hour is the start of the hour (on the hour, in UTC; a zone's hours
	// start there too, except in zones 30 or 45 minutes off UTC).
	Hour   time.Time `json:"hour"`
	Budget string    `json:"budget"`
	Method string    `json:"method"`        // the charge's method; "" when unknown
	Job    string    `json:"job,omitempty"` // the job run the charge was made under (ContextWithJob)
	Units  int64     `json:"units"`
}

// CrossingMark asks a Store to record, once, that usage of one budget of
// one owner crossed a threshold: see Store.MarkCrossing.
type CrossingMark struct {
	API     string
	Owner   string // as in TakeRequest
	Budget  string
	Percent int // the threshold, 1..100
	// Until is when the mark lapses: the end of the window it was crossed
	// in (a calendar window's next reset, or one sliding window after At).
	Until time.Time
	Now   time.Time // zero: the store's clock
}

// HourOf returns the start of the UTC hour holding t: the Hour of the
// BreakdownRow t's units are recorded under.
func HourOf(t time.Time) time.Time {
	return time.UnixMicro(t.UnixMicro() - t.UnixMicro()%hourUS)
}

const hourUS = int64(time.Hour / time.Microsecond)

// dailyRowKeep is how long after its hour ends a breakdown row of a daily
// budget is kept: the longest local day (25 hours).
const dailyRowKeep = 25 * time.Hour

// monthlyRowKeep is dailyRowKeep for a monthly budget: the longest local
// month (31 days and the hour a DST change adds).
const monthlyRowKeep = 31*24*time.Hour + time.Hour

// BreakdownKeep returns how long after the end of its hour a store keeps a
// BreakdownRow of a budget with window w: the window's length (25 hours for
// a daily window, 745 hours for a monthly one), so rows cover every hour of
// the current window.
func BreakdownKeep(w Window) time.Duration {
	switch {
	case w.IsDaily():
		return dailyRowKeep
	case w.IsMonthly():
		return monthlyRowKeep
	}
	return w.Duration()
}

// BreakdownField returns the text form of a breakdown row's budget, method
// and job, joined by the unit separator (0x1f), which is dropped from method
// and job: how stores that keep rows in one string field name them.
// ParseBreakdownField reads it back.
func BreakdownField(budget, method, job string) string {
	method = strings.ReplaceAll(method, "\x1f", "")
	job = strings.ReplaceAll(job, "\x1f", "")
	return budget + "\x1f" + method + "\x1f" + job
}

// ParseBreakdownField reads a BreakdownField; ok is false when f is not one.
func ParseBreakdownField(f string) (budget, method, job string, ok bool) {
	budget, rest, ok1 := strings.Cut(f, "\x1f")
	method, job, ok2 := strings.Cut(rest, "\x1f")
	return budget, method, job, ok1 && ok2
}

// SortBreakdown sorts rows by hour, budget, method and job, merging
// duplicates and dropping rows of zero units: the order Store.Breakdown
// returns.
func SortBreakdown(rows []BreakdownRow) []BreakdownRow {
	slices.SortFunc(rows, func(a, b BreakdownRow) int {
		return cmp.Or(a.Hour.Compare(b.Hour), cmp.Compare(a.Budget, b.Budget), cmp.Compare(a.Method, b.Method), cmp.Compare(a.Job, b.Job))
	})
	out := rows[:0]
	for _, r := range rows {
		if n := len(out); n > 0 && out[n-1].Hour.Equal(r.Hour) && out[n-1].Budget == r.Budget && out[n-1].Method == r.Method && out[n-1].Job == r.Job {
			out[n-1].Units += r.Units
			continue
		}
		out = append(out, r)
	}
	return slices.DeleteFunc(out, func(r BreakdownRow) bool { return r.Units == 0 })
}
