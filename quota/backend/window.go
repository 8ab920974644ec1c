package backend

import (
	"fmt"
	"strings"
	"time"
)

type windowKind uint8

const (
	kindInvalid windowKind = iota
	kindSliding
	kindDaily
	kindMonthly
)

// Window is the span over which a Budget's limit applies. Build one with
// Sliding, Daily or Monthly; the zero Window is invalid and New rejects it.
//
// Every kind is the same log of entries with a different cutoff: an entry
// recorded at instant at counts until Expiry(at). Times are kept to the
// microsecond.
type Window struct {
	kind windowKind
	d    time.Duration
	loc  *time.Location
}

// Sliding returns a window that counts every entry recorded in the trailing
// d: exact over any span of length d, with no boundary bursts. d must be at
// least one microsecond and a whole number of microseconds (times are kept
// to the microsecond): New refuses Sliding(time.Hour/7).
func Sliding(d time.Duration) Window { return Window{kind: kindSliding, d: d} }

// Daily returns a window that resets at local midnight in loc, the way the
// YouTube Data API resets at midnight America/Los_Angeles. Days are calendar
// days, so a window is 23 or 25 hours long on DST transition days.
func Daily(loc *time.Location) Window { return Window{kind: kindDaily, loc: loc} }

// Monthly returns a window that resets at local midnight of the first day
// of each calendar month in loc, the way upstreams that bill by the month
// reset. Months are calendar months (28 to 31 days, an hour more or less
// in a month with a DST change); where a DST jump skips midnight of the
// 1st, the month begins at the jump, as a Daily window's day does.
func Monthly(loc *time.Location) Window { return Window{kind: kindMonthly, loc: loc} }

// IsZero reports whether w is the zero (invalid) Window.
func (w Window) IsZero() bool { return w.kind == kindInvalid }

// IsDaily reports whether w resets at every local midnight (Daily).
func (w Window) IsDaily() bool { return w.kind == kindDaily }

// IsMonthly reports whether w resets at local midnight of the 1st of each
// month (Monthly).
func (w Window) IsMonthly() bool { return w.kind == kindMonthly }

// IsCalendar reports whether w resets as a whole at calendar boundaries in
// a zone (Daily or Monthly): a fixed window, with a Location, a NextReset
// and no Duration.
func (w Window) IsCalendar() bool { return w.kind == kindDaily || w.kind == kindMonthly }

// Duration returns a sliding window's length, or 0 for a calendar window.
func (w Window) Duration() time.Duration {
	if w.kind == kindSliding {
		return w.d
	}
	return 0
}

// Location returns a calendar (daily or monthly) window's zone, or nil for
// a sliding window.
func (w Window) Location() *time.Location {
	if w.IsCalendar() {
		return w.loc
	}
	return nil
}

// String returns the window's text form, accepted by ParseWindow:
// "sliding:24h0m0s", "daily:America/Los_Angeles" or "monthly:Europe/Paris".
func (w Window) String() string {
	switch w.kind {
	case kindSliding:
		return "sliding:" + w.d.String()
	case kindDaily, kindMonthly:
		kind := "daily:"
		if w.kind == kindMonthly {
			kind = "monthly:"
		}
		if w.loc == nil {
			return kind
		}
		return kind + w.loc.String()
	}
	return "invalid"
}

// ParseWindow parses the text form of a Window: "sliding:DURATION" (or a bare
// duration such as "24h"), "daily:ZONE" or "monthly:ZONE" with an IANA zone
// name such as "America/Los_Angeles" (or "UTC").
func ParseWindow(s string) (Window, error) {
	kind, arg, found := strings.Cut(strings.TrimSpace(s), ":")
	if !found {
		kind, arg = "sliding", kind
	}
	switch kind {
	case "sliding":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return Window{}, fmt.Errorf("%w: window %q: bad duration: %v", ErrInvalid, s, err)
		}
		w := Sliding(d)
		if err := w.validate(); err != nil {
			return Window{}, invalidf("window %q: %v", s, trimInvalid(err))
		}
		return w, nil
	case "daily", "monthly":
		if arg == "" {
			return Window{}, fmt.Errorf("%w: window %q: %s needs a zone, e.g. %s:America/Los_Angeles", ErrInvalid, s, kind, kind)
		}
		loc, err := time.LoadLocation(arg)
		if err != nil {
			return Window{}, fmt.Errorf("%w: window %q: unknown time zone %q", ErrInvalid, s, arg)
		}
		if kind == "monthly" {
			return Monthly(loc), nil
		}
		return Daily(loc), nil
	}
	return Window{}, fmt.Errorf("%w: window %q: kind must be sliding, daily or monthly", ErrInvalid, s)
}

// MarshalText implements encoding.TextMarshaler with the String form.
func (w Window) MarshalText() ([]byte, error) {
	if err := w.validate(); err != nil {
		return nil, err
	}
	return []byte(w.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseWindow.
func (w *Window) UnmarshalText(b []byte) error {
	v, err := ParseWindow(string(b))
	if err != nil {
		return err
	}
	*w = v
	return nil
}

func (w Window) validate() error {
	switch w.kind {
	case kindSliding:
		if w.d < time.Microsecond {
			return fmt.Errorf("%w: sliding window of %v: must be at least 1µs", ErrInvalid, w.d)
		}
		if w.d%time.Microsecond != 0 {
			// Every store keeps times in µs: a window between two would be
			// truncated, and each store would count a different one.
			return fmt.Errorf("%w: sliding window of %v: must be a whole number of microseconds (such as %v)",
				ErrInvalid, w.d, w.d.Truncate(time.Microsecond))
		}
		return nil
	case kindDaily, kindMonthly:
		if w.loc == nil {
			return fmt.Errorf("%w: %s window without a time zone", ErrInvalid, strings.TrimSuffix(w.String(), ":"))
		}
		return nil
	}
	return fmt.Errorf("%w: zero window: use quota.Sliding(d), quota.Daily(loc) or quota.Monthly(loc)", ErrInvalid)
}

// Start returns the earliest recorded instant that still counts at now: for
// a sliding window now-d+1µs, for a daily window the local midnight that
// began now's day, for a monthly one the local midnight that began now's
// month.
func (w Window) Start(now time.Time) time.Time {
	now = now.Truncate(time.Microsecond)
	switch w.kind {
	case kindDaily:
		return midnight(now, w.loc, 0)
	case kindMonthly:
		return monthStart(now, w.loc, 0)
	}
	return now.Add(-w.d + time.Microsecond)
}

// Expiry returns the first instant at which an entry recorded at at no
// longer counts: at+d for a sliding window, the next local midnight for a
// daily window, the next 1st of a month at local midnight for a monthly one.
func (w Window) Expiry(at time.Time) time.Time {
	switch w.kind {
	case kindDaily:
		return midnight(at, w.loc, 1)
	case kindMonthly:
		return monthStart(at, w.loc, 1)
	}
	return at.Truncate(time.Microsecond).Add(w.d)
}

// NextReset returns when a calendar window next resets after now: the next
// local midnight (daily) or the next local midnight of a 1st (monthly). A
// sliding window never resets as a whole: it returns the zero Time.
func (w Window) NextReset(now time.Time) time.Time {
	switch w.kind {
	case kindDaily:
		return midnight(now, w.loc, 1)
	case kindMonthly:
		return monthStart(now, w.loc, 1)
	}
	return time.Time{}
}

// Boundaries returns a calendar window's resets around now, oldest first:
// the one that began the period (day or month) before now's, now's own,
// and the next two. Stores whose clock lives elsewhere (Redis TIME) use
// them to find the period of their own now without knowing time zones,
// tolerating a period of clock skew. A sliding window has none: nil.
func (w Window) Boundaries(now time.Time) []time.Time {
	var at func(time.Time, *time.Location, int) time.Time
	switch w.kind {
	case kindDaily:
		at = midnight
	case kindMonthly:
		at = monthStart
	default:
		return nil
	}
	b := make([]time.Time, 4)
	for i := range b {
		b[i] = at(now, w.loc, i-1)
	}
	return b
}

// monthStart returns the first instant of the local month months after
// t's (in loc): midnight of its 1st, or the DST jump that skipped it (see
// dateStart).
func monthStart(t time.Time, loc *time.Location, months int) time.Time {
	y, m, _ := t.In(loc).Date()
	return dateStart(y, m+time.Month(months), 1, loc)
}

// midnight returns the first instant of the local day days after t's (in
// loc): its midnight, or, where a DST jump skips midnight (America/Santiago
// on 2026-09-06, America/Havana on 2026-03-08, clocks going from 23:59:59
// to 01:00), the jump itself (see dateStart).
func midnight(t time.Time, loc *time.Location, days int) time.Time {
	y, m, d := t.In(loc).Date()
	return dateStart(y, m, d+days, loc)
}

// dateStart returns the first instant of the local date y-m-d in loc
// (normalised as time.Date does: month 13 is January of the next year):
// its midnight, or, where a DST jump skips that midnight, the jump itself.
// time.Date alone would give 23:00 of the day before, an instant that
// still belongs to the old day. Where clocks go back over midnight (it
// comes twice: Asia/Gaza on 2004-10-01, 01:00 back to 00:00), the date
// begins at the first, which time.Date does not promise.
func dateStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	m0 := time.Date(y, m, d, 0, 0, 0, 0, loc)
	want := time.Date(y, m, d, 0, 0, 0, 0, time.UTC) // the local date wanted, normalised
	onOrAfter := func(t time.Time) bool {
		ly, lm, ld := t.In(loc).Date()
		return !time.Date(ly, lm, ld, 0, 0, 0, 0, time.UTC).Before(want)
	}
	// A zone has at most a few transitions around one midnight.
	for range 4 {
		if onOrAfter(m0) {
			break
		}
		_, end := m0.ZoneBounds() // the jump that skipped midnight
		if end.IsZero() || !end.After(m0) {
			break
		}
		m0 = end
	}
	for range 4 {
		begin, _ := m0.ZoneBounds()
		if begin.IsZero() || m0.Sub(begin) > 4*time.Hour {
			break // the common case: no transition just before
		}
		// midnight as the offset before the transition reads it: when it
		// came before the transition, and is the date's, it came first
		_, off := begin.Add(-time.Microsecond).Zone()
		first := time.Unix(want.Unix()-int64(off), 0).In(loc)
		if !first.Before(begin) || !onOrAfter(first) {
			break
		}
		m0 = first
	}
	return m0
}

// longestDay bounds the length of a local day in any zone (23 to 25 hours
// around DST changes), as a retention for daily windows.
const longestDay = 26 * time.Hour

// longestMonth bounds the length of a local month in any zone (31 days,
// an hour more around a DST change), with longestDay's margin, as a
// retention for monthly windows.
const longestMonth = 31*24*time.Hour + 2*time.Hour

// retention returns how far back a window can count: d for a sliding
// window, longestDay for a daily one, longestMonth for a monthly one.
func (w Window) retention() time.Duration {
	switch w.kind {
	case kindDaily:
		return longestDay
	case kindMonthly:
		return longestMonth
	}
	return w.d
}

// Equal reports whether w and v are the same window (calendar windows
// compare by kind and zone name).
func (w Window) Equal(v Window) bool {
	if w.kind != v.kind || w.d != v.d {
		return false
	}
	return w.loc == v.loc || w.loc != nil && v.loc != nil && w.loc.String() == v.loc.String()
}

// Retain returns the window a store keeps a log's entries for after the log,
// kept so far for kept, is used with w (a budget's definition changed). It
// is how a definition change never destroys entries that a longer window
// would still count: a log used with a daily window, then with Sliding(1h),
// keeps a day of entries, and counts them again if the budget goes back to
// daily. The rule:
//
//   - kept zero, or equal to w: w (nothing changed);
//   - w sliding and at least as long as kept can count back: w;
//   - otherwise Sliding of the longer of the two spans (a daily window
//     spans at most 26 hours, a monthly one 31 days and 2 hours).
//
// A store prunes a log's entries only once they leave both its current
// window and its kept window, and counts only the current window's. A log
// kept for a daily window does not lose the entries its day ends: it sets
// them aside, uncounted, for DailyKeep after their instant, and takes them
// back when the budget's window changes, so that another zone's day, or a
// sliding window, counts every entry it holds (see KeptSince). A log kept
// for a monthly window does the same for MonthlyKeep (see AsideKeep).
func Retain(kept, w Window) Window {
	switch {
	case kept.IsZero(), kept.Equal(w):
		return w
	case w.kind == kindSliding && w.d >= kept.retention():
		return w
	}
	return Sliding(max(w.retention(), kept.retention()))
}

// PruneBefore returns the first instant a store must keep for a log used
// with w and kept for kept (see Retain): entries recorded before it count
// under neither window and may be deleted.
func PruneBefore(kept, w Window, now time.Time) time.Time {
	s := w.Start(now)
	if kept.IsZero() || kept.Equal(w) {
		return s
	}
	if k := KeptSince(kept, now); k.Before(s) {
		return k
	}
	return s
}

// KeptSince returns the first instant a log kept for kept still holds at
// now, for a window other than kept: kept's start for a sliding window;
// for a calendar one, AsideKeep(kept) back, since a daily (monthly) log
// keeps its entries DailyKeep (MonthlyKeep) after their instant, not only
// until its own period ends. What is older is gone for every window, even
// a longer one.
func KeptSince(kept Window, now time.Time) time.Time {
	if k := AsideKeep(kept); k > 0 {
		return now.Truncate(time.Microsecond).Add(-k + time.Microsecond)
	}
	return kept.Start(now)
}

// KeptUntil returns when a log kept for kept may drop an entry recorded at
// at: its expiry, or, for a calendar window, AsideKeep(kept) after it if
// later.
func KeptUntil(kept Window, at time.Time) time.Time {
	e := kept.Expiry(at)
	if k := at.Truncate(time.Microsecond).Add(AsideKeep(kept)); k.After(e) {
		return k
	}
	return e
}

// AsideKeep returns how long a log kept for window w keeps an entry after
// the instant it was recorded at, set aside once its period ended:
// DailyKeep for a daily window, MonthlyKeep for a monthly one, 0 for a
// sliding one (which drops what leaves it).
func AsideKeep(w Window) time.Duration {
	switch w.kind {
	case kindDaily:
		return DailyKeep
	case kindMonthly:
		return MonthlyKeep
	}
	return 0
}

// DailyKeep is how long a store keeps an entry of a log kept for a daily
// window after the instant it was recorded at, even once its own day has
// ended (uncounted, set aside from the running sum): the longest a local
// day can be (longestDay). Whatever the budget is redefined to, another
// zone's day (which holds the entry's instant for at most longestDay after
// it, whatever the spread of UTC offsets) or a sliding window up to that
// long, an entry the new window holds still counts: a daily budget moved
// from UTC to America/Los_Angeles at 05:00 UTC counts what the Los Angeles
// day spent before 00:00 UTC. A sliding window longer than DailyKeep set
// after a daily one counts what was recorded in the last DailyKeep only.
const DailyKeep = longestDay

// MonthlyKeep is DailyKeep for a log kept for a monthly window: the
// longest a local month can be (31 days, with DailyKeep's 2 hours of
// margin). Another zone's month holds an entry's instant for at most that
// long after it, so a monthly budget moved to another zone, or to a
// sliding window up to that long, counts every entry its new window holds.
const MonthlyKeep = longestMonth

// HeldAt returns when a store records an entry of window w decided at now
// with hold (TakeRequest.Hold): now+hold, or for a calendar window the
// period's last microsecond when now+hold is past it.
func HeldAt(w Window, now time.Time, hold time.Duration) time.Time {
	if hold <= 0 {
		return now
	}
	at := now.Add(hold).Truncate(time.Microsecond)
	if w.IsCalendar() {
		if last := w.NextReset(now).Add(-time.Microsecond); at.After(last) {
			return last
		}
	}
	return at
}
