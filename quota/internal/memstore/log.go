package memstore

import (
	"encoding/binary"
	"sort"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// memEntry holds no pointers, so a window of a million entries costs the
// garbage collector nothing to scan.
type memEntry struct {
	at, cost int64 // µs since the epoch; cost 0 once refunded
	nonce    nonceBuf
	held     bool // a lease's block (TakeRequest.Hold): Adjust keeps it while it is held
}

// nonceBuf is a nonce inline: its length then its bytes; or, for a nonce
// the store made (storeNonce), the number it made it of: the nonce is the
// store's prefix then the number in base 32 (Store.nonce). One
// byte short of 32, so that with memEntry's held flag an entry stays 48
// bytes.
type nonceBuf [31]byte

// maxMemNonce is the longest nonce a Store keeps.
const maxMemNonce = len(nonceBuf{}) - 1

// storeNonce marks a nonceBuf holding a number; no length is as long.
const storeNonce = 0xff

// set sets the nonce to s.
func (n *nonceBuf) set(s string) { n[0] = byte(copy(n[1:], s)) }

// setStore sets the nonce to the one the store makes of seq.
func (n *nonceBuf) setStore(seq uint64) {
	n[0] = storeNonce
	binary.LittleEndian.PutUint64(n[1:], seq)
}

// String returns the nonce; pfx is the store's prefix.
func (n *nonceBuf) String(pfx string) string {
	if n[0] == storeNonce {
		var buf [NonceMax]byte
		return string(AppendNonce(buf[:0], pfx, binary.LittleEndian.Uint64(n[1:])))
	}
	return string(n[1 : 1+n[0]])
}

// is reports whether the nonce is s; pfx is the store's prefix.
func (n *nonceBuf) is(s, pfx string) bool {
	if n[0] == storeNonce {
		var buf [NonceMax]byte
		return string(AppendNonce(buf[:0], pfx, binary.LittleEndian.Uint64(n[1:]))) == s
	}
	return int(n[0]) == len(s) && string(n[1:1+n[0]]) == s
}

// memLog is one credential's log for one budget, oldest entry first (by
// the instant recorded, whatever order the calls came in), with a running
// sum of the kept entries' costs. The entries sit in a ring buffer that
// doubles when full, so expiring and appending never move entries.
//
// The log keeps its entries for kept (quota.Retain): after a budget's
// window is shortened, entries that a longer window it had would count stay
// in the log, uncounted, and count again if the window grows back. The
// entries the current window counts are those from start(now) on.
//
// A log kept for a calendar (daily or monthly) window does not drop the
// entries its day (month) ends: it sets them aside, in the ring just before
// head, out of the running sum, and keeps each for AsideKeep (DailyKeep,
// MonthlyKeep) after its instant (then drops it), so that a budget
// redefined with another zone or a sliding window counts them again
// (unarchive). Memory stays bounded: a daily log holds its day's entries
// and DailyKeep's worth of set-aside ones at most (a monthly log, a
// month's and MonthlyKeep's worth).
type memLog struct {
	ring   []memEntry // len is a power of two (or 0)
	head   int        // index of the oldest kept entry
	n      int        // kept entries
	old    int        // set-aside entries, oldest first, just before head
	sum    int64      // costs of the kept entries (not the set-aside ones)
	exh    int64      // exhausted until, µs; 0 if not marked
	window backend.Window
	kept   backend.Window // what the log keeps entries for: window, unless shortened
	// the calendar window's current day (month), cached to skip zone
	// arithmetic
	dayStart, dayEnd int64
	// the latest instant the log was pruned at (µs): a decision on the
	// host clock happens no earlier (see Store.take)
	seen int64
	// the breakdown row (in Store.use) the log's last decision spent
	// into, for its hour, method and job, kept for the log's window; nil
	// after a sweep, which may drop the row, and when the window changes
	row               *useRow
	rowHour           int64
	rowMethod, rowJob string
}

func (lg *memLog) at(i int) *memEntry { return &lg.ring[(lg.head+i)&(len(lg.ring)-1)] }

// aside returns the set-aside entry i (0 the oldest, to old-1).
func (lg *memLog) aside(i int) *memEntry {
	return &lg.ring[(lg.head-lg.old+i)&(len(lg.ring)-1)]
}

// unarchive puts the set-aside entries recorded in the last AsideKeep at
// now back in the log, and their costs in its sum (a definition change:
// the new window may count them); the older ones go.
func (lg *memLog) unarchive(now int64) {
	lg.trimAside(now)
	for i := range lg.old {
		lg.sum += lg.aside(i).cost
	}
	lg.head = (lg.head - lg.old) & (len(lg.ring) - 1)
	lg.n += lg.old
	lg.old = 0
}

// trimAside drops the set-aside entries recorded more than AsideKeep of
// the kept window (DailyKeep, MonthlyKeep) before now.
func (lg *memLog) trimAside(now int64) {
	from := now - backend.AsideKeep(lg.kept).Microseconds() + 1
	for lg.old > 0 && lg.aside(0).at < from {
		lg.old--
	}
}

// push makes room for an entry recorded at at, among the others in order,
// and returns it with at set and the rest zero: the caller sets the rest
// in place.
func (lg *memLog) push(at int64) *memEntry {
	if lg.old+lg.n == len(lg.ring) {
		ring := make([]memEntry, max(8, 2*len(lg.ring)))
		for i := range lg.old {
			ring[i] = *lg.aside(i)
		}
		for i := range lg.n {
			ring[lg.old+i] = *lg.at(i)
		}
		lg.ring, lg.head = ring, lg.old
	}
	// Keep the log ordered by instant: an entry recorded at an instant
	// earlier than the newest (a clock stepped back) moves in among them.
	i := lg.n
	for i > 0 && lg.at(i-1).at > at {
		*lg.at(i) = *lg.at(i - 1)
		i--
	}
	e := lg.at(i)
	*e = memEntry{at: at} // a ring slot may hold an old entry's flag
	lg.n++
	return e
}

// use sets the window a decision uses the log with at now: it drops the
// entries the kept window no longer keeps (they are gone for every window,
// even a longer one set now), then remembers in kept how far back the log
// must keep entries from now on (Retain). It returns what the window
// counts at now (see first).
func (lg *memLog) use(w backend.Window, now int64) counted {
	if lg.window == w && lg.kept == w {
		// The usual case, in short: the log keeps what the window counts,
		// so pruned it holds no entry the window does not count.
		lg.pruneBefore(lg.start(now), now)
		return counted{}
	}
	if lg.kept.IsZero() {
		lg.kept = w
	}
	if !lg.window.Equal(w) {
		lg.dayStart, lg.dayEnd = 0, 0
		lg.window = w
		lg.row = nil // its keep is the old window's
	}
	// what the old calendar window set aside may count under the new one
	lg.unarchive(now)
	lg.prune(now)
	if lg.sum == 0 {
		lg.kept = w // nothing kept: start afresh
	} else {
		lg.kept = backend.Retain(lg.kept, w)
	}
	var c counted
	c.first, c.gap = lg.first(now)
	return c
}

// find returns the live entry recorded at at with nonce, or nil; pfx is
// the store's nonce prefix.
func (lg *memLog) find(at int64, nonce, pfx string) *memEntry {
	for i := sort.Search(lg.n, func(i int) bool { return lg.at(i).at >= at }); i < lg.n && lg.at(i).at == at; i++ {
		if e := lg.at(i); e.nonce.is(nonce, pfx) && e.cost > 0 {
			return e
		}
	}
	return nil
}

func (lg *memLog) clear() { lg.ring, lg.head, lg.n, lg.old, lg.sum, lg.exh = nil, 0, 0, 0, 0, 0 }

func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.UnixMicro(time.Now().UnixMicro()) // cheaper than Truncate
	}
	return t.Truncate(time.Microsecond)
}

// start returns the first µs that counts at now.
func (lg *memLog) start(now int64) int64 {
	if !lg.window.IsCalendar() {
		return now - lg.window.Duration().Microseconds() + 1
	}
	return lg.day(now)
}

// day returns the start of the calendar window's day (month) holding now
// (µs), cached with its end.
func (lg *memLog) day(now int64) int64 {
	if now < lg.dayStart || now >= lg.dayEnd {
		t := time.UnixMicro(now)
		lg.dayStart = lg.window.Start(t).UnixMicro()
		lg.dayEnd = lg.window.NextReset(t).UnixMicro()
	}
	return lg.dayStart
}

// prune drops the entries the kept window no longer keeps at now (a
// calendar window sets them aside), and an exhaustion mark that has ended.
func (lg *memLog) prune(now int64) {
	var start int64
	if lg.kept.IsZero() || lg.kept.Equal(lg.window) {
		start = lg.start(now) // the hot path: the day cached
	} else {
		start = backend.KeptSince(lg.kept, time.UnixMicro(now)).UnixMicro()
	}
	lg.pruneBefore(start, now)
}

// pruneBefore drops the entries recorded before start, and an exhaustion
// mark that has ended by now. A log kept for a calendar window sets them
// aside instead, until AsideKeep after their instant (see memLog).
func (lg *memLog) pruneBefore(start, now int64) {
	lg.seen = max(lg.seen, now)
	aside := lg.kept.IsCalendar()
	if !aside {
		lg.old = 0 // (none: a log that stops being calendar takes them back)
	}
	for lg.n > 0 {
		e := lg.at(0)
		if e.at >= start {
			break
		}
		lg.sum -= e.cost
		lg.head = (lg.head + 1) & (len(lg.ring) - 1)
		lg.n--
		if aside {
			lg.old++
		}
	}
	if lg.old > 0 {
		lg.trimAside(now)
	}
	if lg.n == 0 && lg.old == 0 && len(lg.ring) > 1024 {
		lg.ring, lg.head = nil, 0 // let a burst's buffer go
	}
	if lg.exh != 0 && lg.exh <= now {
		lg.exh = 0
	}
}

func (lg *memLog) idle() bool { return lg.n == 0 && lg.old == 0 && lg.exh == 0 }

// first returns the index of the first entry the window counts at now, and
// the units of the kept entries before it (uncounted): 0 and 0 unless the
// window was shortened.
func (lg *memLog) first(now int64) (int, int64) { return lg.from(lg.start(now)) }

// from returns the index of the first entry recorded at start or later, and
// the units of the entries before it.
func (lg *memLog) from(start int64) (int, int64) {
	var gap int64
	i := 0
	for ; i < lg.n && lg.at(i).at < start; i++ {
		gap += lg.at(i).cost
	}
	return i, gap
}

// counted is what of a log a window counts at an instant: from the entry
// at first on, all the units but gap (see memLog.first).
type counted struct {
	first int
	gap   int64
}

// retryAt returns when deficit units will have expired (µs), the window
// counting from the entry at first.
func (lg *memLog) retryAt(deficit int64, first int) int64 {
	var freed int64
	for i := first; i < lg.n; i++ {
		e := lg.at(i)
		freed += e.cost
		if e.cost > 0 && freed >= deficit {
			return lg.window.Expiry(time.UnixMicro(e.at)).UnixMicro()
		}
	}
	return 0 // unreachable while cost <= limit
}

// tally is what a decision reads of a log, under the store's lock, for a
// Usage it fills after (fill): the work and the writes of a Usage are left
// out of the lock.
type tally struct {
	used     int64
	exh      int64 // exhausted until, µs; 0 if not marked
	reset    int64 // µs
	hasReset bool
}

// tally reads the log for b at now, of which c is what the window counts.
func (lg *memLog) tally(b *backend.Budget, now int64, c counted) tally {
	t := tally{used: lg.sum - c.gap}
	if lg.exh > now {
		t.exh = lg.exh
	}
	if b.Window.IsCalendar() {
		t.reset, t.hasReset = lg.dayEnd, true
	} else {
		for i := c.first; i < lg.n; i++ {
			if e := lg.at(i); e.cost > 0 {
				t.reset, t.hasReset = e.at+b.Window.Duration().Microseconds(), true
				break
			}
		}
	}
	return t
}

// fill sets u to the usage of b that t read. It sets u's fields in place:
// a Usage built apart and copied in costs as much again.
func (t *tally) fill(u *backend.Usage, b *backend.Budget) {
	u.Budget, u.Window, u.Limit, u.Used = b.Name, b.Window, b.Limit, t.used
	u.Remaining, u.Cost, u.StoreLoss = 0, 0, false
	u.ExhaustedUntil, u.RetryAt, u.Reset = time.Time{}, time.Time{}, time.Time{}
	if t.exh != 0 {
		u.ExhaustedUntil = time.UnixMicro(t.exh)
	}
	if t.hasReset {
		u.Reset = time.UnixMicro(t.reset)
	}
}

// peek describes the log for budget b at now without changing what it
// keeps (a read): only the entries b's window counts at now, and of those
// only the ones the log still keeps.
func (lg *memLog) peek(b backend.Budget, now int64) (backend.Usage, int) {
	lg.prune(now)
	if lg.old > 0 && !b.Window.Equal(lg.window) {
		// another window than the log's may count what its day (month) set
		// aside; the next decision under the log's window sets them aside
		// again
		lg.unarchive(now)
	}
	first, gap := lg.from(b.Window.Start(time.UnixMicro(now)).UnixMicro())
	u := backend.Usage{Budget: b.Name, Window: b.Window, Limit: b.Limit, Used: lg.sum - gap}
	if lg.exh > now {
		u.ExhaustedUntil = time.UnixMicro(lg.exh)
	}
	if b.Window.IsCalendar() {
		u.Reset = time.UnixMicro(b.Window.NextReset(time.UnixMicro(now)).UnixMicro())
	} else {
		for i := first; i < lg.n; i++ {
			if e := lg.at(i); e.cost > 0 {
				u.Reset = time.UnixMicro(e.at + b.Window.Duration().Microseconds())
				break
			}
		}
	}
	return u, first
}
