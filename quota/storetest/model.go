package storetest

import (
	"slices"
	"time"
)

// This file is the reference model of MatchesModel: the limiter's
// semantics written down a second time, sharing no code with any store nor
// with quota's window arithmetic (no MemoryStore, no Window.Start, Expiry
// or NextReset): sliding cutoffs, local midnights and month starts are
// computed here from time.Date alone. It keeps every entry ever recorded, and never prunes:
// what a window counts is a filter over the whole log at the instant asked.
//
// The semantics it encodes (README "How it counts", DESIGN "Store
// contract"):
//
//   - Times are kept to the microsecond; a decision's now is the clock
//     truncated to it.
//   - An entry recorded at at counts at now when at >= start(now):
//     now-d+1µs for Sliding(d), the local midnight that began now's day for
//     Daily(loc), the local midnight of the 1st that began now's month for
//     Monthly(loc). An entry stamped after now (the clock stepped back)
//     counts. It stops counting at expiry(at): at+d, or the next local
//     midnight (of a 1st, monthly) after at.
//   - Take admits when every budget can pay: used+cost <= limit and no
//     exhaustion mark after now. Otherwise a refusing budget's RetryAt is
//     the expiry of the counted entry (oldest first) at which the units
//     freed cover used+cost-limit, or the mark if later; the error names
//     the budget that frees up last (the first in definition order on a
//     tie). An admission records one entry per budget at now.
//   - Refund and Settle find a reservation's entry while it counts in its
//     window now (at >= start(now)) and has not been refunded or replaced
//     by an Adjust; Settle sets its cost to min(cost, actual), 0 removing
//     it. Neither moves it in time.
//   - Exhaust marks a budget spent until a later instant (truncated to the
//     µs); a zero or past until clears the mark.
//   - Adjust(N) replaces every entry of the budget, whatever its stamp, by
//     one of N at now (none for 0) and clears the mark: used is N after it
//     (the model takes no leases, whose held blocks an Adjust would keep).
//   - Usage: used; remaining = limit-used, or 0 while marked; Reset the
//     next local midnight (daily), the next 1st's (monthly) or the expiry
//     of the oldest counted entry
//     (sliding; zero when none counts); ExhaustedUntil the mark while after
//     now.

// modelBudget is one budget as the model knows it.
type modelBudget struct {
	name  string
	limit int64
	slide time.Duration  // > 0: Sliding(slide)
	loc   *time.Location // Daily(loc) or Monthly(loc) when slide is 0
	month bool           // Monthly(loc), not Daily(loc)
}

// calendar reports whether b resets at calendar boundaries (daily or
// monthly).
func (b *modelBudget) calendar() bool { return b.slide == 0 }

// period returns the first instant of the calendar period (day or month)
// n periods after t's.
func (b *modelBudget) period(t time.Time, n int) time.Time {
	if b.month {
		return monthStart(t, b.loc, n)
	}
	return dayStart(t, b.loc, n)
}

// start returns the first instant that counts at now.
func (b *modelBudget) start(now time.Time) time.Time {
	if b.calendar() {
		return b.period(now, 0)
	}
	return now.Add(-b.slide + time.Microsecond)
}

// expiry returns the first instant at which an entry recorded at at no
// longer counts.
func (b *modelBudget) expiry(at time.Time) time.Time {
	if b.calendar() {
		return b.period(at, 1)
	}
	return at.Add(b.slide)
}

// dayStart returns the first instant of the local day (in loc) days after
// t's (see dateStart).
func dayStart(t time.Time, loc *time.Location, days int) time.Time {
	y, m, d := t.In(loc).Date()
	return dateStart(time.Date(y, m, d+days, 0, 0, 0, 0, time.UTC), loc)
}

// monthStart returns the first instant of the local month (in loc) months
// after t's: of its 1st (see dateStart).
func monthStart(t time.Time, loc *time.Location, months int) time.Time {
	y, m, _ := t.In(loc).Date()
	return dateStart(time.Date(y, m+time.Month(months), 1, 0, 0, 0, 0, time.UTC), loc)
}

// dateStart returns the first instant of the local date want (its year,
// month and day, normalised, in UTC) in loc: its midnight, or, should a DST
// jump skip that midnight, the first instant whose local date is want's
// (found by bisection, to the µs). time.Date gives an instant of the wrong
// day for a skipped midnight.
func dateStart(want time.Time, loc *time.Location) time.Time {
	wy, wm, wd := want.Date()
	m0 := time.Date(wy, wm, wd, 0, 0, 0, 0, loc)
	onOrAfter := func(x time.Time) bool {
		ly, lm, ld := x.In(loc).Date()
		return !time.Date(ly, lm, ld, 0, 0, 0, 0, time.UTC).Before(want)
	}
	if onOrAfter(m0) {
		if !onOrAfter(m0.Add(-time.Microsecond)) {
			return m0
		}
		// midnight given twice (a jump back over it): the day began at the first
		lo := m0.Add(-3 * time.Hour)
		return bisect(lo, m0, onOrAfter)
	}
	return bisect(m0, m0.Add(3*time.Hour), onOrAfter)
}

// bisect returns the first µs in (lo, hi] where ok holds; ok(lo) is false
// and ok(hi) true.
func bisect(lo, hi time.Time, ok func(time.Time) bool) time.Time {
	for hi.Sub(lo) > time.Microsecond {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Microsecond)
		if !mid.After(lo) {
			mid = lo.Add(time.Microsecond)
		}
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// modelEntry is one recorded charge of one budget.
type modelEntry struct {
	at   time.Time
	cost int64 // 0 once refunded or settled to 0
	gone bool  // replaced by an Adjust
}

func (e *modelEntry) live() bool { return e.cost > 0 && !e.gone }

// modelLog is one credential's log of one budget: every entry, in the
// order recorded, and its exhaustion mark.
type modelLog struct {
	entries []*modelEntry
	exh     time.Time // zero: never marked, or cleared
}

// modelCharge is one budget's entry of a reservation.
type modelCharge struct {
	b int
	e *modelEntry
}

// model is the reference: logs per credential and budget.
type model struct {
	budgets []modelBudget
	logs    [][]modelLog          // [cred][budget]
	res     map[int][]modelCharge // reservation (its take's ID) -> its entries
	high    time.Time             // the latest instant any operation was made at
}

func newModel(budgets []modelBudget, creds int) *model {
	m := &model{budgets: budgets, res: map[int][]modelCharge{}}
	for range creds {
		m.logs = append(m.logs, make([]modelLog, len(budgets)))
	}
	return m
}

// at notes that an operation is made at now.
func (m *model) at(now time.Time) {
	if now.After(m.high) {
		m.high = now
	}
}

// counted returns the entries budget b of cred counts at now, oldest first
// (by instant; in the order recorded for one instant).
func (m *model) counted(cred, b int, now time.Time) []*modelEntry {
	start := m.budgets[b].start(now)
	var out []*modelEntry
	for _, e := range m.logs[cred][b].entries {
		if e.live() && !e.at.Before(start) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(x, y *modelEntry) int { return x.at.Compare(y.at) })
	return out
}

func (m *model) used(cred, b int, now time.Time) int64 {
	var n int64
	for _, e := range m.counted(cred, b, now) {
		n += e.cost
	}
	return n
}

// mark returns b's exhaustion mark while it holds at now, else zero.
func (m *model) mark(cred, b int, now time.Time) time.Time {
	if x := m.logs[cred][b].exh; x.After(now) {
		return x
	}
	return time.Time{}
}

// modelUsage is what the model expects of one budget's quota.Usage.
type modelUsage struct {
	used, limit, remaining, cost int64
	reset, exhausted, retry      time.Time
}

func (m *model) usage(cred, b int, now time.Time) modelUsage {
	bd := &m.budgets[b]
	es := m.counted(cred, b, now)
	u := modelUsage{limit: bd.limit, exhausted: m.mark(cred, b, now)}
	for _, e := range es {
		u.used += e.cost
	}
	u.remaining = max(u.limit-u.used, 0)
	if !u.exhausted.IsZero() {
		u.remaining = 0
	}
	switch {
	case bd.calendar():
		u.reset = bd.period(now, 1)
	case len(es) > 0:
		u.reset = bd.expiry(es[0].at)
	}
	return u
}

// modelDebit is one budget's part of a charge.
type modelDebit struct {
	b    int
	cost int64
}

// take decides a charge of cred at now. Admitted (ok), it records the
// entries, under reservation id when id >= 0, and returns the usage after
// it; refused, the usage before it, with retry set on each refusing budget.
func (m *model) take(cred int, debits []modelDebit, now time.Time, id int) (bool, []modelUsage) {
	m.at(now)
	us := make([]modelUsage, len(debits))
	ok := true
	for i, d := range debits {
		us[i] = m.usage(cred, d.b, now)
		if deficit := us[i].used + d.cost - us[i].limit; deficit > 0 {
			var freed int64
			for _, e := range m.counted(cred, d.b, now) {
				if freed += e.cost; freed >= deficit {
					us[i].retry = m.budgets[d.b].expiry(e.at)
					break
				}
			}
		}
		if x := us[i].exhausted; x.After(us[i].retry) {
			us[i].retry = x
		}
		if !us[i].retry.IsZero() {
			ok = false
		}
	}
	if !ok {
		return false, us
	}
	var charges []modelCharge
	for _, d := range debits {
		e := &modelEntry{at: now, cost: d.cost}
		lg := &m.logs[cred][d.b]
		lg.entries = append(lg.entries, e)
		charges = append(charges, modelCharge{d.b, e})
	}
	if id >= 0 {
		m.res[id] = charges
	}
	for i, d := range debits {
		us[i] = m.usage(cred, d.b, now)
		us[i].cost = d.cost
	}
	return true, us
}

// settle shrinks the entries of reservation id in the budgets actual names
// (budget index -> units) to min(cost, actual), and reports whether any
// was found: still counted in its window at now and not refunded. A
// refund settles every budget to 0.
func (m *model) settle(id int, actual map[int]int64, now time.Time) bool {
	m.at(now)
	found := false
	for _, c := range m.res[id] {
		n, ok := actual[c.b]
		if !ok || !c.e.live() || c.e.at.Before(m.budgets[c.b].start(now)) {
			continue
		}
		found = true
		c.e.cost = min(c.e.cost, n)
	}
	return found
}

// exhaust marks budget b of cred spent until until (to the µs), or clears
// the mark when until is zero or not after now.
func (m *model) exhaust(cred, b int, until, now time.Time) {
	m.at(now)
	until = until.Truncate(time.Microsecond)
	if until.IsZero() || !until.After(now) {
		until = time.Time{}
	}
	m.logs[cred][b].exh = until
}

// adjust sets budget b of cred to used units recorded at now: every entry
// goes, whatever its stamp, and the mark is cleared.
func (m *model) adjust(cred, b int, used int64, now time.Time) {
	m.at(now)
	lg := &m.logs[cred][b]
	for _, e := range lg.entries {
		e.gone = true
	}
	lg.entries, lg.exh = nil, time.Time{}
	if used > 0 {
		lg.entries = append(lg.entries, &modelEntry{at: now, cost: used})
	}
}

// backFloor returns the earliest instant the clock may step back to. A
// store tidies up (drops expired entries, resets a day, clears a lapsed
// mark) when it happens to touch a log, so after the clock steps back from
// high to an earlier now', whatever changed state in (now', high] may or
// may not have been tidied away: the stores would rightly differ. The rule:
// the clock steps back only to an instant now' such that nothing the model
// holds changes state inside (now', high]:
//
//   - no live entry's expiry lies in it (an entry that expired by high
//     stays expired at now', one still counted at high still counts);
//   - no exhaustion mark ends in it;
//   - no local midnight of any daily budget's zone, nor start of any
//     monthly budget's month, lies in it (so an entry stamped after now'
//     lies in now's day, and no store saw a day begin that now' is
//     before).
//
// It returns the latest such instant at or before high: now' may equal it.
func (m *model) backFloor() time.Time {
	var floor time.Time
	note := func(c time.Time) {
		if !c.After(m.high) && c.After(floor) {
			floor = c
		}
	}
	for b := range m.budgets {
		bd := &m.budgets[b]
		if bd.calendar() {
			note(bd.period(m.high, 0))
		}
		for cred := range m.logs {
			lg := &m.logs[cred][b]
			note(lg.exh)
			for _, e := range lg.entries {
				if e.live() {
					note(bd.expiry(e.at))
				}
			}
		}
	}
	return floor
}
