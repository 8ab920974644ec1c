package memstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// Store is a backend.Store (and StateStore) that lives in one process: for
// tests, and for a single service with no need to share or keep its budget.
// It is safe for concurrent use; one mutex serialises decisions. Its clock
// (for a request with no Now) is the host's: the wall clock as read at
// most 100ms before, plus the monotonic clock's time since, so that a step
// of the wall clock shows within 100ms. The zero value is not usable: call
// New.
type Store struct {
	mu      sync.Mutex
	logs    map[logKey]*memLog
	apis    map[string]*memAPI
	state   map[string][]byte
	records map[string][][]byte
	leases  map[string]*memLease
	ops     uint64
	use     map[useKey]*useRow // Breakdown rows
	marks   map[markKey]int64  // MarkCrossing: lapses at (µs)
	// ChangeVersion per API and owner, bumped by Adjust and Exhaust; never
	// dropped, so a version never comes back
	vers map[verKey]int64
	// the log used last, so a run of decisions on one budget skips the
	// map; cleared when the sweep drops logs
	lastKey logKey
	last    *memLog
	clock   HostClock // a decision's, when the request gives no Now
	// the prefix of the nonces the store makes (a Limiter's decisions):
	// random, as a Limiter's own prefix is
	noncePfx string
}

var _ backend.Store = (*Store)(nil)
var _ backend.StateStore = (*Store)(nil)
var _ backend.ChangeVersioner = (*Store)(nil)

type verKey struct{ api, owner string }

type logKey struct{ api, cred, budget string }

type memAPI struct {
	budgets map[string]backend.Budget
	creds   map[string]backend.CredentialInfo // fingerprint -> record, stored form
}

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
// A log kept for a daily window does not drop the entries its day ends:
// it sets them aside, in the ring just before head, out of the running
// sum, and keeps each for DailyKeep after its instant (then drops it), so
// that a budget redefined with another zone or a sliding window counts
// them again (unarchive). Memory stays bounded: a daily log holds its
// day's entries and DailyKeep's worth of set-aside ones at most.
type memLog struct {
	ring   []memEntry // len is a power of two (or 0)
	head   int        // index of the oldest kept entry
	n      int        // kept entries
	old    int        // set-aside entries, oldest first, just before head
	sum    int64      // costs of the kept entries (not the set-aside ones)
	exh    int64      // exhausted until, µs; 0 if not marked
	window backend.Window
	kept   backend.Window // what the log keeps entries for: window, unless shortened
	// the daily window's current day, cached to skip zone arithmetic
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

// unarchive puts the set-aside entries recorded in the last DailyKeep at
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

// trimAside drops the set-aside entries recorded more than DailyKeep
// before now.
func (lg *memLog) trimAside(now int64) {
	from := now - backend.DailyKeep.Microseconds() + 1
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
	// what the old daily window set aside may count under the new one
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

// sweepEvery is how many decisions pass between sweeps that drop the logs of
// idle credentials.
const sweepEvery = 4096

// New returns an empty Store on the host clock.
func New() *Store {
	return &Store{
		logs:    make(map[logKey]*memLog),
		apis:    make(map[string]*memAPI),
		state:   make(map[string][]byte),
		records: make(map[string][][]byte),
		leases:  make(map[string]*memLease),
		// as unlikely as another Limiter's to be any Limiter's prefix
		noncePfx: NewNoncePrefix(),
	}
}

// Nonce returns the nonce the store made of seq (see Decide).
func (s *Store) Nonce(seq uint64) string {
	var buf [NonceMax]byte
	return string(AppendNonce(buf[:0], s.noncePfx, seq))
}

func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.UnixMicro(time.Now().UnixMicro()) // cheaper than Truncate
	}
	return t.Truncate(time.Microsecond)
}

// start returns the first µs that counts at now.
func (lg *memLog) start(now int64) int64 {
	if !lg.window.IsDaily() {
		return now - lg.window.Duration().Microseconds() + 1
	}
	return lg.day(now)
}

// day returns the start of the daily window's day holding now (µs),
// cached with its end.
func (lg *memLog) day(now int64) int64 {
	if now < lg.dayStart || now >= lg.dayEnd {
		t := time.UnixMicro(now)
		lg.dayStart = lg.window.Start(t).UnixMicro()
		lg.dayEnd = lg.window.NextReset(t).UnixMicro()
	}
	return lg.dayStart
}

// prune drops the entries the kept window no longer keeps at now (a daily
// window sets them aside), and an exhaustion mark that has ended.
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
// mark that has ended by now. A log kept for a daily window sets them
// aside instead, until DailyKeep after their instant (see memLog).
func (lg *memLog) pruneBefore(start, now int64) {
	lg.seen = max(lg.seen, now)
	aside := lg.kept.IsDaily()
	if !aside {
		lg.old = 0 // (none: a log that stops being daily takes them back)
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
	if b.Window.IsDaily() {
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
		// another window than the log's may count what its day set
		// aside; the next decision under the log's window sets them aside
		// again
		lg.unarchive(now)
	}
	first, gap := lg.from(b.Window.Start(time.UnixMicro(now)).UnixMicro())
	u := backend.Usage{Budget: b.Name, Window: b.Window, Limit: b.Limit, Used: lg.sum - gap}
	if lg.exh > now {
		u.ExhaustedUntil = time.UnixMicro(lg.exh)
	}
	if b.Window.IsDaily() {
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

func (s *Store) log(api, cred string, b backend.Budget, now int64) *memLog {
	lg := s.logOf(api, cred, b.Name)
	lg.use(b.Window, now)
	return lg
}

// instant returns a decision's now: reqNow as given (to the µs, in its
// location), else nowUS, the host clock's.
func (s *Store) instant(reqNow time.Time, nowUS int64) time.Time {
	if !reqNow.IsZero() {
		return reqNow.Truncate(time.Microsecond)
	}
	return time.UnixMicro(nowUS)
}

// logOf returns the log of api, cred and budget, made if new.
func (s *Store) logOf(api, cred, budget string) *memLog {
	k := logKey{api, cred, budget}
	lg := s.last
	if lg == nil || s.lastKey != k {
		lg = s.logs[k]
		if lg == nil {
			lg = &memLog{}
			s.logs[k] = lg
		}
		s.lastKey, s.last = k, lg
	}
	return lg
}

// Take implements Store.
func (s *Store) Take(ctx context.Context, req *backend.TakeRequest) (*backend.TakeResult, error) {
	if err := backend.CheckHold(req.Hold, req.Debits); err != nil {
		return nil, err
	}
	if len(req.Nonce) > maxMemNonce {
		return nil, invalidf("memory store: nonce of %d bytes: at most %d", len(req.Nonce), maxMemNonce)
	}
	res := newTakeResult(len(req.Debits))
	var err error
	if res.OK, res.At, _, err = s.take(ctx, req, 0, false, req.Debits, res.Usage); err != nil {
		return nil, err
	}
	return res, nil
}

// Decide is Take on the Limiter's path: the debits are given apart from
// req and each debit's usage is written into us (one per debit), so that
// neither escapes to the heap; req's Debits and Nonce are not read. The
// store makes the entries' nonce of the number it returns (Nonce). host,
// when not 0 and req.Now is zero, is the host clock's time (µs) as the
// caller read it.
func (s *Store) Decide(ctx context.Context, req *backend.TakeRequest, host int64, debits []backend.Debit, us []backend.Usage) (bool, time.Time, uint64, error) {
	return s.take(ctx, req, host, true, debits, us)
}

// take is Take for req with its debits given apart: it returns whether the
// charge was admitted and the store's now, and writes each debit's usage
// into us (one per debit). It keeps neither req, debits nor us, so the
// Limiter's request and debits stay on its stack. host, when not 0
// and req.Now is zero, is the host clock's time (µs) as the caller read it
// before the lock: the Limiter reads the clock once per decision. With
// mint, the store makes the entries' nonce instead of req.Nonce, of the
// number it returns (the nonce is s.nonce of it): a number it counts under
// its lock anyway, kept in the entry as is, so that a decision neither
// counts atomically nor formats a nonce.
//
// On the host clock a decision happens no earlier than any instant its
// logs were pruned at: a clock read before the lock, or a reading a µs
// behind another's, must not count a log at an instant before entries it
// no longer holds had expired.
func (s *Store) take(ctx context.Context, req *backend.TakeRequest, host int64, mint bool, debits []backend.Debit, us []backend.Usage) (bool, time.Time, uint64, error) {
	if ctx == nil {
		return false, time.Time{}, 0, invalidf("memory store: nil context")
	}
	if err := ctx.Err(); err != nil {
		return false, time.Time{}, 0, fmt.Errorf("quota: memory store: %w: %w", backend.ErrStoreUnavailable, err)
	}
	var logs [4]*memLog
	lgs := logs[:0]

	s.mu.Lock() // unlocked without a defer: nothing here panics
	// The clock is read under the lock, so decisions record their entries
	// in the order of their instants; or before it, by the caller (host),
	// and then no decision on a log happens before one made already.
	var nowUS int64
	switch {
	case !req.Now.IsZero():
		nowUS = req.Now.UnixMicro() // a test's clock: as is
	case host != 0:
		nowUS = host
	default:
		nowUS = s.clock.NowUS()
	}
	s.ops++
	if s.ops%sweepEvery == 0 {
		s.sweep(nowUS)
	}
	// The debits by pointer: a Debit copied costs more than its use here.
	for i := range debits {
		lg := s.logOf(req.API, req.Owner, debits[i].Name)
		if req.Now.IsZero() {
			nowUS = max(nowUS, lg.seen)
		}
		lgs = append(lgs, lg)
	}
	var cbuf [4]counted
	cs := cbuf[:0] // what each window counts: recording at now or later changes none
	for i := range debits {
		cs = append(cs, lgs[i].use(debits[i].Window, nowUS))
	}
	// What the decision reads for each Usage, filled in after the lock.
	var tbuf [4]tally
	ts := scratch(tbuf[:], len(debits))
	var retries [4]int64
	retry := scratch(retries[:], len(debits))
	ok := true
	for i := range debits {
		d, lg, c := &debits[i], lgs[i], cs[i]
		if deficit := lg.sum - c.gap + d.Cost - d.Limit; deficit > 0 {
			retry[i] = lg.retryAt(deficit, c.first)
		}
		if lg.exh > nowUS {
			retry[i] = max(retry[i], lg.exh)
		}
		if retry[i] != 0 {
			ok = false
		}
	}
	var seq uint64
	if ok {
		for i := range debits {
			d, lg := &debits[i], lgs[i]
			at := nowUS
			if req.Hold > 0 {
				at = backend.HeldAt(d.Window, s.instant(req.Now, nowUS), req.Hold).UnixMicro()
			}
			e := lg.push(at)
			e.cost, e.held = d.Cost, req.Hold > 0
			if mint {
				e.nonce.setStore(s.ops)
			} else {
				e.nonce.set(req.Nonce)
			}
			lg.sum += d.Cost
			s.spendLog(lg, req.API, req.Owner, &d.Budget, req.Method, req.Job, nowUS, d.Cost)
		}
		seq = s.ops
	}
	for i := range debits {
		ts[i] = lgs[i].tally(&debits[i].Budget, nowUS, cs[i])
	}
	s.mu.Unlock()
	for i := range debits {
		ts[i].fill(&us[i], &debits[i].Budget)
		if ok {
			us[i].Cost = debits[i].Cost
		} else if retry[i] != 0 {
			us[i].RetryAt = time.UnixMicro(retry[i])
		}
	}
	return ok, s.instant(req.Now, nowUS), seq, nil
}

// scratch returns buf[:n] when buf can hold n values, else a new slice of
// n: a caller's buffer on its stack for the usual few budgets, whatever
// number of budgets a charge names.
func scratch[T any](buf []T, n int) []T {
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]T, n)
}

// newTakeResult allocates a result and, for up to two budgets, its usage
// in one piece.
func newTakeResult(n int) *backend.TakeResult {
	if n <= 2 {
		r := new(struct {
			res backend.TakeResult
			buf [2]backend.Usage
		})
		r.res.Usage = r.buf[:n]
		return &r.res
	}
	return &backend.TakeResult{Usage: make([]backend.Usage, n)}
}

func (s *Store) sweep(now int64) {
	for k, lg := range s.logs {
		lg.prune(now)
		lg.row = nil
		if lg.idle() {
			delete(s.logs, k)
		}
	}
	s.sweepUse(now)
	s.lastKey, s.last = logKey{}, nil
}

// Refund implements Store.
func (s *Store) Refund(ctx context.Context, req *backend.RefundRequest) (map[string]int64, error) {
	at := req.At.UnixMicro()
	now := nowOr(req.Now).UnixMicro()
	got := map[string]int64{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range req.Budgets {
		if freed, ok := s.shrink(req.API, req.Owner, b, req.Method, req.Job, at, at, req.Nonce, now, 0); ok {
			got[b.Name] = freed
		}
	}
	return got, nil
}

// shrink lowers one entry (found by its time and nonce) of budget b to
// actual units, at most its cost, keeping the running sum and the usage
// breakdown in step; 0 removes it, as a refund does. It returns the units
// freed and whether the entry was found. Called with s.mu held.
func (s *Store) shrink(api, owner string, b backend.Budget, method, job string, at, row int64, nonce string, now, actual int64) (int64, bool) {
	lg := s.logs[logKey{api, owner, b.Name}]
	if lg == nil {
		return 0, false
	}
	lg.use(b.Window, now)
	if at < b.Window.Start(time.UnixMicro(now)).UnixMicro() {
		// out of the window: it counts for nothing, so there is nothing to
		// give back (a log may keep it longer, for a longer window it had)
		return 0, false
	}
	e := lg.find(at, nonce, s.noncePfx)
	if e == nil {
		return 0, false
	}
	c := backend.SettledCost(e.cost, actual)
	freed := e.cost - c
	lg.sum -= freed
	s.spend(api, owner, b, method, job, row, -freed)
	e.cost = c
	return freed, true
}

// Settle implements Store.
func (s *Store) Settle(ctx context.Context, req *backend.SettleRequest) (map[string]int64, error) {
	if ctx == nil {
		return nil, invalidf("memory store: nil context")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("quota: memory store: %w: %w", backend.ErrStoreUnavailable, err)
	}
	for _, d := range req.Debits {
		if d.Cost < 0 {
			return nil, invalidf("settle: actual %d for budget %q: must be >= 0", d.Cost, d.Name)
		}
	}
	at, row := req.At.UnixMicro(), req.At.UnixMicro()
	if !req.Decided.IsZero() {
		row = req.Decided.UnixMicro() // a held entry: the hour it was decided in
	}
	now := nowOr(req.Now).UnixMicro()
	got := map[string]int64{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range req.Debits {
		if freed, ok := s.shrink(req.API, req.Owner, d.Budget, req.Method, req.Job, at, row, req.Nonce, now, d.Cost); ok {
			got[d.Name] = freed
		}
	}
	return got, nil
}

// Exhaust implements Store.
func (s *Store) Exhaust(ctx context.Context, req *backend.ExhaustRequest) error {
	now := nowOr(req.Now).UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	lg := s.log(req.API, req.Owner, req.Budget, now)
	s.bump(req.API, req.Owner)
	lg.exh = 0
	if u := backend.ClampTime(req.Until).UnixMicro(); !req.Until.IsZero() && u > now {
		lg.exh = u
	}
	return nil
}

// Adjust implements Store.
func (s *Store) Adjust(ctx context.Context, req *backend.AdjustRequest) error {
	now := nowOr(req.Now).UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	lg := s.log(req.API, req.Owner, req.Budget, now)
	s.bump(req.API, req.Owner)
	// Held entries stamped past now are open leases' blocks
	// (TakeRequest.Hold): their leases may admit from them until they see
	// the version bumped above (LeaseOptions.CheckEvery), so they stay.
	// Every other entry goes, whatever its stamp: after the clock stepped
	// back, plain entries are stamped past now too, and Used is replaced.
	var held []memEntry
	drop := int64(-1)
	if !req.DropAt.IsZero() {
		drop = req.DropAt.UnixMicro()
	}
	for i := lg.n - 1; i >= 0 && lg.at(i).at > now; i-- {
		if e := lg.at(i); e.held && e.cost > 0 && (e.at != drop || !e.nonce.is(req.DropNonce, s.noncePfx)) {
			held = append(held, *e)
		}
	}
	lg.clear()
	lg.kept = req.Budget.Window
	if req.Used > 0 {
		e := lg.push(now)
		e.cost = req.Used
		e.nonce.set(req.Nonce)
		lg.sum = req.Used
	}
	for _, h := range held {
		*lg.push(h.at) = h
		lg.sum += h.cost
	}
	return nil
}

// bump changes the owner's ChangeVersion; its caller holds s.mu.
func (s *Store) bump(api, owner string) {
	if s.vers == nil {
		s.vers = make(map[verKey]int64)
	}
	s.vers[verKey{api, owner}]++
}

// ChangeVersion implements ChangeVersioner.
func (s *Store) ChangeVersion(ctx context.Context, api, owner string) (int64, error) {
	if ctx == nil {
		return 0, invalidf("memory store: nil context")
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("quota: memory store: %w: %w", backend.ErrStoreUnavailable, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vers[verKey{api, owner}], nil
}

// Usage implements Store.
func (s *Store) Usage(ctx context.Context, req *backend.UsageRequest) ([]backend.Usage, error) {
	now := nowOr(req.Now).UnixMicro()
	out := make([]backend.Usage, len(req.Budgets))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range req.Budgets {
		lg := s.logs[logKey{req.API, req.Owner, b.Name}]
		if lg == nil {
			lg = &memLog{kept: b.Window, window: b.Window}
		}
		out[i], _ = lg.peek(b, now)
	}
	return out, nil
}

// Entries implements Store.
func (s *Store) Entries(ctx context.Context, req *backend.EntriesRequest) ([]backend.Entry, error) {
	now := nowOr(req.Now).UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	lg := s.logs[logKey{req.API, req.Owner, req.Budget.Name}]
	if lg == nil {
		return nil, nil
	}
	_, first := lg.peek(req.Budget, now)
	var out []backend.Entry
	for i := first; i < lg.n; i++ {
		if e := lg.at(i); e.cost > 0 {
			out = append(out, backend.Entry{At: time.UnixMicro(e.at), Cost: e.cost, Nonce: e.nonce.String(s.noncePfx)})
		}
	}
	return out, nil
}

func (s *Store) api(name string) *memAPI {
	a := s.apis[name]
	if a == nil {
		a = &memAPI{budgets: map[string]backend.Budget{}, creds: map[string]backend.CredentialInfo{}}
		s.apis[name] = a
	}
	return a
}

// DefineBudgets implements Store.
func (s *Store) DefineBudgets(ctx context.Context, api string, budgets []backend.Budget) error {
	if err := backend.CheckName("api", api); err != nil {
		return err
	}
	for _, b := range budgets {
		if err := b.Validate(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.api(api)
	for _, b := range budgets {
		a.budgets[b.Name] = b
	}
	return nil
}

// DeleteBudget implements Store.
func (s *Store) DeleteBudget(ctx context.Context, api, budget string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apis[api]
	if a == nil || a.budgets[budget] == (backend.Budget{}) {
		return fmt.Errorf("%w: budget %s/%s", backend.ErrNotFound, api, budget)
	}
	delete(a.budgets, budget)
	return nil
}

// UpdateCredential implements Store: the store's mutex makes the change
// atomic.
func (s *Store) UpdateCredential(ctx context.Context, api string, u backend.CredentialUpdate) (backend.CredentialInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var creds []backend.CredentialInfo
	if a := s.apis[api]; a != nil {
		creds = slices.Collect(maps.Values(a.creds))
	}
	ch, info, err := backend.ApplyCredentialUpdate(api, creds, u)
	if err != nil {
		return backend.CredentialInfo{}, err
	}
	a := s.api(api)
	for _, c := range ch.Put {
		a.creds[c.ID] = c
	}
	for _, id := range ch.Delete {
		delete(a.creds, id)
	}
	return info, nil
}

// List implements Store.
func (s *Store) List(ctx context.Context) ([]backend.APIInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]backend.APIInfo, 0, len(s.apis))
	for _, name := range slices.Sorted(maps.Keys(s.apis)) {
		a := s.apis[name]
		info := backend.APIInfo{Name: name, Budgets: []backend.Budget{}, Credentials: []backend.CredentialInfo{}}
		for _, b := range slices.Sorted(maps.Keys(a.budgets)) {
			info.Budgets = append(info.Budgets, a.budgets[b])
		}
		for _, id := range slices.Sorted(maps.Keys(a.creds)) {
			info.Credentials = append(info.Credentials, a.creds[id].Filled())
		}
		out = append(out, info)
	}
	return out, nil
}

// Close implements Store; it does nothing.
func (s *Store) Close() error { return nil }

// SaveState implements StateStore.
func (s *Store) SaveState(ctx context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state[key] = slices.Clone(value)
	return nil
}

// LoadState implements StateStore.
func (s *Store) LoadState(ctx context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.state[key]
	if !ok {
		return nil, fmt.Errorf("%w: state %q", backend.ErrNotFound, key)
	}
	return slices.Clone(v), nil
}

// AppendRecord implements StateStore.
func (s *Store) AppendRecord(ctx context.Context, stream string, rec []byte, keep int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := append(s.records[stream], slices.Clone(rec))
	if keep > 0 && len(r) > keep {
		r = slices.Clone(r[len(r)-keep:])
	}
	s.records[stream] = r
	return nil
}

// Records implements StateStore.
func (s *Store) Records(ctx context.Context, stream string, limit int) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.records[stream]
	var out [][]byte
	for i := len(r) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		out = append(out, slices.Clone(r[i]))
	}
	return out, nil
}

// Streams implements StateStore.
func (s *Store) Streams(ctx context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.records {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}
