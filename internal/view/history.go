package view

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// Bucket is one step of a History: the units and calls recorded in it, and
// the units per method when buckets are whole hours (the store keeps its
// breakdown per hour).
type Bucket struct {
	Start   time.Time        `json:"start"`
	End     time.Time        `json:"end"`
	Units   int64            `json:"units"`
	Calls   int64            `json:"calls"`
	Methods map[string]int64 `json:"methods,omitempty"`
}

// History is one budget's current window of one owner, in buckets counted
// in the budget's own zone (see Zone): `quotactl history --json` prints an
// array of them, the dashboard's /api/history the same. Credential and
// Fingerprint are the credential it is shown for (empty for an owner as a
// whole).
type History struct {
	API          string    `json:"api"`
	Owner        string    `json:"owner"`
	Budget       string    `json:"budget"`
	Credential   string    `json:"credential"`
	Fingerprint  string    `json:"fingerprint"`
	Window       string    `json:"window"`
	Unit         string    `json:"unit"` // what the numbers count (Status.Unit)
	Used         int64     `json:"used"`
	Limit        int64     `json:"limit"`
	From         time.Time `json:"from"`
	To           time.Time `json:"to"`
	EverySeconds float64   `json:"every_seconds"`
	// Zone is where the buckets' hours are counted: a daily budget's own
	// zone, else the display zone.
	Zone    string   `json:"zone"`
	Buckets []Bucket `json:"buckets"`
	// Methods and Jobs are the units each method and each job spent in
	// the window's hours, from the store's hourly breakdown (charges made
	// outside a job are in no job).
	Methods map[string]int64 `json:"methods,omitempty"`
	Jobs    map[string]int64 `json:"jobs,omitempty"`
}

// NoMethod is the method name given to units charged without one.
const NoMethod = "(no method)"

// MaxBuckets bounds a History: a bucket length that splits the window into
// more is refused (TooManyBucketsError).
const MaxBuckets = 1000

// TooManyBucketsError is History's error for a bucket length that splits
// the window into more than MaxBuckets buckets.
type TooManyBucketsError struct {
	Every   time.Duration
	Buckets int
}

func (e *TooManyBucketsError) Error() string {
	return fmt.Sprintf("buckets of %v make %d buckets over the window; at most %d", e.Every, e.Buckets, MaxBuckets)
}

// steps are the bucket lengths Every picks from.
var steps = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// Every is the bucket length of a chart of w unless one is asked for: the
// shortest of 1s, 5s, 10s, 30s, 1m, 5m, 10m, 15m, 30m, 1h, 2h, 3h, 6h, 12h
// and 24h that splits the window into at most 24 buckets (a daily window
// counts as 24h: 1h buckets), else a 24th of the window rounded up to
// whole hours; a monthly window's are days (24h, 28 to 31 buckets). Steps
// of an hour or more are whole hours, so the store's hourly breakdown
// stacks each bucket by method.
func Every(w quota.Window) time.Duration {
	span := w.Duration()
	switch {
	case w.IsDaily():
		span = 24 * time.Hour
	case w.IsMonthly():
		return 24 * time.Hour
	}
	for _, s := range steps {
		if span/s <= 24 {
			return s
		}
	}
	return (span/24 + time.Hour - 1) / time.Hour * time.Hour
}

// Zone is where a chart of w counts hours: a daily or monthly budget's own
// zone (its day or month starts at its midnight), else display.
func Zone(w quota.Window, display *time.Location) *time.Location {
	if w.IsCalendar() {
		return w.Location()
	}
	return display
}

// firstBucket is where the buckets of a window that starts at from begin:
// a daily (monthly) window's midnight (of the 1st: across a DST change in
// the month, day buckets then start an hour off midnight); for steps of
// whole hours, the hour in loc at
// or before from; for steps that divide an hour, the last step of that
// hour at or before from; else where time.Truncate puts from (a multiple
// of every since Go's zero time). So edges fall on the clock of loc and
// stay put from one read to the next.
func firstBucket(w quota.Window, from time.Time, every time.Duration, loc *time.Location) time.Time {
	switch {
	case w.IsCalendar():
		return from
	case every%time.Hour == 0 || time.Hour%every == 0:
		lf := from.In(loc)
		// The local hour, found by subtraction: time.Date is ambiguous
		// in the hour a DST change repeats.
		first := from.Add(-time.Duration(lf.Minute())*time.Minute - time.Duration(lf.Second())*time.Second - time.Duration(lf.Nanosecond()))
		for !first.Add(every).After(from) {
			first = first.Add(every)
		}
		return first
	}
	return from.Truncate(every)
}

// History reads the current window of the budget b of account in api, in
// buckets of every (0: Every(b.Window)) counted in Zone(b.Window, display
// zone). Credential and Fingerprint are left for the caller to name.
// Errors: *TooManyBucketsError, or the store's.
func (r *Reader) History(ctx context.Context, api, account string, b quota.Budget, every time.Duration) (History, error) {
	h, _, err := r.history(ctx, api, account, b, every, r.Now())
	return h, err
}

// history is History, returning the entries counted too.
func (r *Reader) history(ctx context.Context, api, account string, b quota.Budget, every time.Duration, now time.Time) (History, []quota.Entry, error) {
	if every <= 0 {
		every = Every(b.Window)
	}
	loc := Zone(b.Window, r.loc)
	from := b.Window.Start(now)
	first := firstBucket(b.Window, from, every, loc)
	n := int(now.Sub(first)/every) + 1
	if n > MaxBuckets {
		return History{}, nil, &TooManyBucketsError{Every: every, Buckets: n}
	}
	entries, err := r.store.Entries(ctx, &backend.EntriesRequest{API: api, Owner: account, Budget: b, Now: r.StoreNow()})
	if err != nil {
		return History{}, nil, err
	}
	rows, err := r.store.Breakdown(ctx, &backend.BreakdownRequest{API: api, Owner: account, Budgets: []string{b.Name}, Since: from, Now: r.StoreNow()})
	if err != nil {
		return History{}, nil, err
	}
	h := History{
		API: api, Owner: account, Budget: b.Name, Window: b.Window.String(), Unit: b.UnitOf(), Limit: b.Limit,
		From: from.UTC(), To: now.UTC(), EverySeconds: every.Seconds(), Zone: loc.String(), Buckets: make([]Bucket, n),
	}
	for i := range h.Buckets {
		h.Buckets[i].Start = first.Add(time.Duration(i) * every).UTC()
		h.Buckets[i].End = first.Add(time.Duration(i+1) * every).UTC()
	}
	for _, e := range entries {
		h.Used += e.Cost
		if i := int(e.At.Sub(first) / every); i >= 0 && i < n {
			h.Buckets[i].Units += e.Cost
			h.Buckets[i].Calls++
		}
	}
	addBreakdown(&h, first, every, rows)
	return h, entries, nil
}

// addBreakdown adds the store's hourly breakdown rows of the window's hours
// to h: totals per method and job, and per bucket when buckets are whole
// hours.
func addBreakdown(h *History, first time.Time, every time.Duration, rows []backend.BreakdownRow) {
	for _, r := range rows {
		if r.Units <= 0 || !r.Hour.Add(time.Hour).After(h.From) {
			continue
		}
		m := r.Method
		if m == "" {
			m = NoMethod
		}
		h.Methods = add(h.Methods, m, r.Units)
		if r.Job != "" {
			h.Jobs = add(h.Jobs, r.Job, r.Units)
		}
		if every%time.Hour != 0 || r.Hour.Before(first) {
			continue
		}
		if i := int(r.Hour.Sub(first) / every); i < len(h.Buckets) {
			h.Buckets[i].Methods = add(h.Buckets[i].Methods, m, r.Units)
		}
	}
}

// add adds n to m[k], making m when it is nil.
func add(m map[string]int64, k string, n int64) map[string]int64 {
	if m == nil {
		m = map[string]int64{}
	}
	m[k] += n
	return m
}
