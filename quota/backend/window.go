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
)

// Window is the span over which a Budget's limit applies. Build one with
// Sliding or Daily; the zero Window is invalid and New rejects it.
//
// Both kinds are the same log of entries with a different cutoff: an entry
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

// IsZero reports whether w is the zero (invalid) Window.
func (w Window) IsZero() bool { return w.kind == kindInvalid }

// IsDaily reports whether w resets at local midnight.
func (w Window) IsDaily() bool { return w.kind == kindDaily }

// Duration returns a sliding window's length, or 0 for a daily window.
func (w Window) Duration() time.Duration {
	if w.kind == kindSliding {
		return w.d
	}
	return 0
}

// Location returns a daily window's zone, or nil for a sliding window.
func (w Window) Location() *time.Location {
	if w.kind == kindDaily {
		return w.loc
	}
	return nil
}

// String returns the window's text form, accepted by ParseWindow:
// "sliding:24h0m0s" or "daily:America/Los_Angeles".
func (w Window) String() string {
	switch w.kind {
	case kindSliding:
		return "sliding:" + w.d.String()
	case kindDaily:
		if w.loc == nil {
			return "daily:"
		}
		return "daily:" + w.loc.String()
	}
	return "invalid"
}

// ParseWindow parses the text form of a Window: "sliding:DURATION" (or a bare
// duration such as "24h"), or "daily:ZONE" with an IANA zone name such as
// "America/Los_Angeles" (or "UTC").
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
	case "daily":
		if arg == "" {
			return Window{}, fmt.Errorf("%w: window %q: daily needs a zone, e.g. daily:America/Los_Angeles", ErrInvalid, s)
		}
		loc, err := time.LoadLocation(arg)
		if err != nil {
			return Window{}, fmt.Errorf("%w: window %q: unknown time zone %q", ErrInvalid, s, arg)
		}
		return Daily(loc), nil
	}
	return Window{}, fmt.Errorf("%w: window %q: kind must be sliding or daily", ErrInvalid, s)
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
	case kindDaily:
		if w.loc == nil {
			return fmt.Errorf("%w: daily window without a time zone", ErrInvalid)
		}
		return nil
	}
	return fmt.Errorf("%w: zero window: use quota.Sliding(d) or quota.Daily(loc)", ErrInvalid)
}

// Start returns the earliest recorded instant that still counts at now: for
// a sliding window now-d+1µs, for a daily window the local midnight that
// began now's day.
func (w Window) Start(now time.Time) time.Time {
	now = now.Truncate(time.Microsecond)
	if w.kind == kindDaily {
		return midnight(now, w.loc, 0)
	}
	return now.Add(-w.d + time.Microsecond)
}

// Expiry returns the first instant at which an entry recorded at at no
// longer counts: at+d for a sliding window, the next local midnight for a
// daily window.
func (w Window) Expiry(at time.Time) time.Time {
	if w.kind == kindDaily {
		return midnight(at, w.loc, 1)
	}
	return at.Truncate(time.Microsecond).Add(w.d)
}

// NextReset returns when a daily window next resets after now (the next
// local midnight). A sliding window never resets as a whole: it returns the
// zero Time.
func (w Window) NextReset(now time.Time) time.Time {
	if w.kind == kindDaily {
		return midnight(now, w.loc, 1)
	}
	return time.Time{}
}

// Boundaries returns local midnights around now, oldest first: the one that
// began the day before now's, now's own, and the next two. Stores whose clock
// lives elsewhere (Redis TIME) use them to find the day of their own now
// without knowing time zones, tolerating a day of clock skew.
func (w Window) Boundaries(now time.Time) []time.Time {
	if w.kind != kindDaily {
		return nil
	}
	b := make([]time.Time, 4)
	for i := range b {
		b[i] = midnight(now, w.loc, i-1)
	}
	return b
}

// midnight returns the first instant of the local day days after t's (in
// loc): its midnight, or, where a DST jump skips midnight (America/Santiago
// on 2026-09-06, America/Havana on 2026-03-08, clocks going from 23:59:59
// to 01:00), the jump itself. time.Date alone would give 23:00 of the day
// before, an instant that still belongs to the old day.
func midnight(t time.Time, loc *time.Location, days int) time.Time {
	y, m, d := t.In(loc).Date()
	m0 := time.Date(y, m, d+days, 0, 0, 0, 0, loc)
	want := time.Date(y, m, d+days, 0, 0, 0, 0, time.UTC) // the local date wanted, normalised
	// A zone has at most a few transitions around one midnight.
	for range 4 {
		ly, lm, ld := m0.In(loc).Date()
		if !time.Date(ly, lm, ld, 0, 0, 0, 0, time.UTC).Before(want) {
			break
		}
		_, end := m0.ZoneBounds() // the jump that skipped midnight
		if end.IsZero() || !end.After(m0) {
			break
		}
		m0 = end
	}
	return m0
}

// longestDay bounds the length of a local day in any zone (23 to 25 hours
// around DST changes), as a retention for daily windows.
const longestDay = 26 * time.Hour

// retention returns how far back a window can count: d for a sliding
// window, longestDay for a daily one.
func (w Window) retention() time.Duration {
	if w.kind == kindDaily {
		return longestDay
	}
	return w.d
}

// Equal reports whether w and v are the same window (daily windows compare
// by zone name).
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
//     spans at most 26 hours).
//
// A store prunes a log's entries only once they leave both its current
// window and its kept window, and counts only the current window's. A log
// kept for a daily window does not lose the entries its day ends: it sets
// them aside, uncounted, for DailyKeep after their instant, and takes them
// back when the budget's window changes, so that another zone's day, or a
// sliding window, counts every entry it holds (see KeptSince).
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
// for a daily one, DailyKeep back, since a daily log keeps its entries
// DailyKeep after their instant (see DailyKeep), not only until its own
// day ends. What is older is gone for every window, even a longer one.
func KeptSince(kept Window, now time.Time) time.Time {
	if kept.kind == kindDaily {
		return now.Truncate(time.Microsecond).Add(-DailyKeep + time.Microsecond)
	}
	return kept.Start(now)
}

// KeptUntil returns when a log kept for kept may drop an entry recorded at
// at: its expiry, or, for a daily window, DailyKeep after it if later.
func KeptUntil(kept Window, at time.Time) time.Time {
	e := kept.Expiry(at)
	if kept.kind == kindDaily {
		if k := at.Truncate(time.Microsecond).Add(DailyKeep); k.After(e) {
			return k
		}
	}
	return e
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

// HeldAt returns when a store records an entry of window w decided at now
// with hold (TakeRequest.Hold): now+hold, or for a daily window the day's
// last microsecond when now+hold is past it.
func HeldAt(w Window, now time.Time, hold time.Duration) time.Time {
	if hold <= 0 {
		return now
	}
	at := now.Add(hold).Truncate(time.Microsecond)
	if w.IsDaily() {
		if last := w.NextReset(now).Add(-time.Microsecond); at.After(last) {
			return last
		}
	}
	return at
}
