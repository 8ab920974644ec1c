package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// logRow is one log, the (api, credential, budget) triple, as the sums
// table holds it, while a transaction works on it.
type logRow struct {
	id     int64
	budget string
	// window is the window the log keeps its entries for (backend.Retain):
	// the budget's window, or a longer one after the window was shortened,
	// so that a longer window it had still finds its entries.
	window string
	kept   backend.Window // window, parsed; zero while it equals the budget's
	used   int64          // running sum of the costs of the log's entries
	gap    int64          // of used, units the budget's window no longer counts
	exh    int64          // exhausted until, µs; 0 if not marked
	idle   int64          // every entry expired and the mark ended by then, µs
	dirty  bool           // the sums row needs writing back
	seen   bool           // debited by the decision at hand
	deb    int            // in Take, the index of its debit; -1 for none
}

// wtx is a decision's transaction on the decision connection: its
// prepared statements, and what one decision leaves for the next to reuse.
// The gate serialises decisions, so a Store has one.
type wtx struct {
	st   *stmts
	logs []logRow
	lgs  []*logRow
	win  map[backend.Window]string // text forms of windows met, a few dozen at most
}

// winText returns win.String(), without building it again for a window
// seen before.
func (w *wtx) winText(win backend.Window) string {
	if t, ok := w.win[win]; ok {
		return t
	}
	if len(w.win) >= 64 || w.win == nil {
		w.win = make(map[backend.Window]string)
	}
	t := win.String()
	w.win[win] = t
	return t
}

// scanLog reads the current row of credLogs or logByName into lg, but for
// the budget's name and window (see storedWindow).
func scanLog(s *stmt, lg *logRow) {
	lg.id, lg.used, lg.exh, lg.idle = s.col(0), s.col(3), s.col(4), s.col(5)
}

// storedWindow returns the window text of the current row of credLogs or
// logByName. win is the window text the budget is used with now: the
// stored window, when it is that one, costs no copy.
func storedWindow(s *stmt, win string) string {
	if v := s.view(2); v != win {
		return strings.Clone(v)
	}
	return win
}

// credLogs returns every log of one credential, in the decision's scratch,
// with room to append one per debit without moving. A log of a debited
// budget has its budget's name and the debit's index in deb; the others
// have neither (nor their window's text), only what the decision needs to
// drop them.
func (w *wtx) credLogs(api, cred string, debits []backend.Debit) ([]logRow, error) {
	logs := w.logs[:0]
	s := w.st.credLogs.text(1, api).text(2, cred)
	for s.next() {
		lg := logRow{deb: -1}
		name := s.view(1)
		for i := range debits {
			if debits[i].Name == name {
				lg.budget, lg.deb = debits[i].Name, i
				break
			}
		}
		scanLog(s, &lg)
		if lg.deb >= 0 {
			lg.window = storedWindow(s, w.winText(debits[lg.deb].Window))
		}
		logs = append(logs, lg)
	}
	if err := s.done(); err != nil {
		return nil, err
	}
	logs = slices.Grow(logs, len(debits))
	w.logs = logs
	return logs, nil
}

// log returns the log of budget b, creating it if create is set; nil if it
// does not exist and create is not set.
func (w *wtx) log(api, cred string, b backend.Budget, now time.Time, create bool) (*logRow, error) {
	lg := &logRow{budget: b.Name, deb: -1}
	found := false
	s := w.st.logByName.text(1, api).text(2, cred).text(3, b.Name)
	if s.next() {
		found = true
		scanLog(s, lg)
		lg.window = storedWindow(s, w.winText(b.Window))
	}
	switch err := s.done(); {
	case err != nil:
		return nil, err
	case !found && create:
		return lg, w.create(lg, api, cred, b)
	case !found:
		return nil, nil
	}
	return lg, w.setWindow(lg, b.Window, now)
}

// counted returns the units the budget's window counts.
func (lg *logRow) counted() int64 { return lg.used - lg.gap }

// create makes lg the new log of budget b.
func (w *wtx) create(lg *logRow, api, cred string, b backend.Budget) error {
	*lg = logRow{budget: b.Name, window: w.winText(b.Window), seen: true, deb: lg.deb}
	found := false
	s := w.st.newLog.text(1, api).text(2, cred).text(3, b.Name).text(4, lg.window)
	for s.next() {
		lg.id, found = s.col(0), true
	}
	if err := s.done(); err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("log of budget %q: inserted without an id", b.Name)
	}
	return nil
}

// setWindow records the window a log is used with at now, and how long it
// keeps its entries (backend.Retain: a shortened window keeps what the longer
// one counted). When the window changed (the budget was redefined), it
// first deletes the entries the old kept window no longer keeps (gone for
// every window, even a longer one set now), and recomputes idle_after so
// the sweep never drops an entry a kept window counts.
func (w *wtx) setWindow(lg *logRow, win backend.Window, now time.Time) error {
	ws := w.winText(win)
	lg.kept = backend.Window{}
	if lg.window == ws {
		return nil // the hot path: the definition did not change
	}
	old, err := backend.ParseWindow(lg.window)
	if err != nil {
		return fmt.Errorf("log of budget %q: stored window %q: %w", lg.budget, lg.window, err)
	}
	if old.IsDaily() {
		// what the old daily window set aside may count under the new one
		if err := w.unarchive(lg, now); err != nil {
			return err
		}
	}
	if err := w.prune(lg, backend.KeptSince(old, now).UnixMicro(), now.UnixMicro(), false); err != nil {
		return err
	}
	kept := win
	if lg.used != 0 { // an empty log starts afresh
		kept = backend.Retain(old, win)
	}
	if ks := kept.String(); ks != ws {
		lg.kept = kept
	}
	if ks := kept.String(); ks == lg.window {
		return nil
	}
	lg.window, lg.dirty = kept.String(), true
	var newest int64
	valid := false
	s := w.st.newest.int(1, lg.id)
	if s.next() && !s.null(0) {
		newest, valid = s.col(0), true
	}
	if err := s.done(); err != nil {
		return err
	}
	lg.idle = lg.exh
	if valid {
		at := time.UnixMicro(newest)
		lg.idle = max(lg.idle, win.Expiry(at).UnixMicro(), backend.KeptUntil(kept, at).UnixMicro())
	}
	return nil
}

// trim prunes the log for window win at now: it deletes the entries that
// neither win nor the kept window counts, and sets the units kept but no
// longer counted.
func (w *wtx) trim(lg *logRow, win backend.Window, now time.Time) error {
	start := win.Start(now).UnixMicro()
	if lg.kept.IsZero() {
		lg.gap = 0
		return w.prune(lg, start, now.UnixMicro(), win.IsDaily())
	}
	if err := w.prune(lg, backend.PruneBefore(lg.kept, win, now).UnixMicro(), now.UnixMicro(), false); err != nil {
		return err
	}
	s := w.st.gap.int(1, lg.id).int(2, start)
	if s.next() {
		lg.gap = s.col(0)
	}
	return s.done()
}

// expiry returns when an entry recorded at now leaves both the budget's
// window and the kept one (µs).
func (lg *logRow) expiry(win backend.Window, now time.Time) int64 {
	e := backend.KeptUntil(win, now).UnixMicro()
	if !lg.kept.IsZero() {
		e = max(e, backend.KeptUntil(lg.kept, now).UnixMicro())
	}
	return e
}

// prune deletes the log's entries recorded before start (µs), subtracting
// their costs from the running sum: O(expired entries). It also drops an
// exhaustion mark that has ended by now. With aside (a log kept for a
// daily window), it sets the entries aside instead (log = -id), out of the
// sum, and deletes those set aside more than backend.DailyKeep before now:
// a budget redefined with another zone or a sliding window counts the
// others again (unarchive). The set-aside entries are trimmed when more
// are set aside, at a day's first decision; whatever their number, none
// older than DailyKeep counts again.
func (w *wtx) prune(lg *logRow, start, now int64, aside bool) error {
	var freed int64
	moved := false
	q := w.st.prune
	if aside {
		q = w.st.setAside
	}
	s := q.int(1, lg.id).int(2, start)
	for s.next() {
		freed += s.col(0)
		moved = true
	}
	if err := s.done(); err != nil {
		return err
	}
	if aside && moved {
		if err := w.st.trimAside.int(1, lg.id).int(2, now-backend.DailyKeep.Microseconds()+1).exec(); err != nil {
			return err
		}
	}
	if freed != 0 {
		lg.used -= freed
		lg.dirty = true
	}
	if lg.exh != 0 && lg.exh <= now {
		lg.exh = 0
		lg.dirty = true
	}
	return nil
}

// unarchive puts the log's set-aside entries recorded in the last
// backend.DailyKeep back in it, and their costs in its running sum, and
// deletes the older ones: the log's window changed, and the new one may
// count them.
func (w *wtx) unarchive(lg *logRow, now time.Time) error {
	from := backend.KeptSince(backend.Daily(time.UTC), now).UnixMicro()
	var back int64
	s := w.st.unarchive.int(1, lg.id).int(2, from)
	for s.next() {
		back += s.col(0)
	}
	if err := s.done(); err != nil {
		return err
	}
	if back != 0 {
		lg.used += back
		lg.dirty = true
	}
	return w.st.trimAside.int(1, lg.id).int(2, from).exec()
}

// retryAt walks the log oldest first until deficit units are covered and
// returns when the entry that covers them expires (µs): exactly when a
// charge short of deficit units fits. Entries at one instant expire
// together, so their order among themselves does not matter.
func (w *wtx) retryAt(lg *logRow, win backend.Window, deficit int64, now time.Time) (int64, error) {
	var freed, at int64
	found := false
	s := w.st.walk.int(1, lg.id).int(2, win.Start(now).UnixMicro())
	for !found && s.next() {
		freed += s.col(1)
		if freed >= deficit {
			at, found = s.col(0), true
		}
	}
	if err := s.done(); err != nil {
		return 0, err
	}
	if found {
		return win.Expiry(time.UnixMicro(at)).UnixMicro(), nil
	}
	// Unreachable while cost <= limit: the log holds at least used units.
	return 0, fmt.Errorf("log of budget %q holds fewer units than its running sum %d", lg.budget, lg.counted())
}

// usage describes the log at now.
func (w *wtx) usage(lg *logRow, b backend.Budget, now time.Time) (backend.Usage, error) {
	u := backend.Usage{Budget: b.Name, Window: b.Window, Limit: b.Limit, Used: lg.counted()}
	if lg.exh > now.UnixMicro() {
		u.ExhaustedUntil = time.UnixMicro(lg.exh)
	}
	if b.Window.IsDaily() {
		u.Reset = time.UnixMicro(b.Window.NextReset(now).UnixMicro())
		return u, nil
	}
	s := w.st.oldest.int(1, lg.id).int(2, b.Window.Start(now).UnixMicro())
	if s.next() && !s.null(0) {
		u.Reset = time.UnixMicro(s.col(0) + b.Window.Duration().Microseconds())
	}
	return u, s.done()
}

func (w *wtx) save(lg *logRow) error {
	if !lg.dirty {
		return nil
	}
	lg.dirty = false
	return w.st.updateLog.text(1, lg.window).int(2, lg.used).int(3, lg.exh).int(4, lg.idle).int(5, lg.id).exec()
}

// drop deletes a log and its entries.
func (w *wtx) drop(id int64) error {
	if err := w.st.clearLog.int(1, id).int(2, id).exec(); err != nil {
		return err
	}
	return w.st.dropLog.int(1, id).exec()
}

// Take implements backend.Store: one BEGIN IMMEDIATE transaction that prunes
// each debited log, checks every budget (and exhaustion mark), and records
// one entry per budget or nothing. Logs of the same credential that are
// wholly expired are dropped on the way.
func (s *Store) Take(ctx context.Context, req *backend.TakeRequest) (*backend.TakeResult, error) {
	if err := checkTake(req); err != nil {
		return nil, err
	}
	var (
		now time.Time
		n   int64
		res *backend.TakeResult
	)
	err := s.decide(ctx, "take", func(w *wtx) error {
		// the host clock is read under the write lock (see s.now)
		now = s.now(req.Now)
		n = now.UnixMicro()
		res = newTakeResult(now, len(req.Debits))
		logs, err := w.credLogs(req.API, req.Owner, req.Debits)
		if err != nil {
			return err
		}
		loaded := len(logs)
		lgs := w.lgs[:0]
		for i, d := range req.Debits {
			lgs = append(lgs, nil)
			for j := range logs[:loaded] {
				if lg := &logs[j]; lg.deb == i {
					lg.seen, lgs[i] = true, lg
					if err := w.setWindow(lg, d.Window, now); err != nil {
						return err
					}
					break
				}
			}
			if lgs[i] == nil {
				logs = append(logs, logRow{deb: i}) // within the room credLogs left: no log moves
				lgs[i] = &logs[len(logs)-1]
				if err := w.create(lgs[i], req.API, req.Owner, d.Budget); err != nil {
					return err
				}
			}
			if err := w.trim(lgs[i], d.Window, now); err != nil {
				return err
			}
		}
		w.lgs = lgs
		for j := range logs[:loaded] {
			if lg := &logs[j]; !lg.seen && lg.idle <= n {
				if err := w.drop(lg.id); err != nil {
					return err
				}
			}
		}
		for i, d := range req.Debits {
			lg := lgs[i]
			var retry int64
			if deficit := lg.counted() + d.Cost - d.Limit; deficit > 0 {
				if retry, err = w.retryAt(lg, d.Window, deficit, now); err != nil {
					return err
				}
			}
			if lg.exh > n {
				retry = max(retry, lg.exh)
			}
			if retry != 0 {
				res.OK = false
				if res.Usage[i], err = w.usage(lg, d.Budget, now); err != nil {
					return err
				}
				res.Usage[i].RetryAt = time.UnixMicro(retry)
			}
		}
		if !res.OK {
			for i, d := range req.Debits {
				if res.Usage[i].Budget == "" {
					if res.Usage[i], err = w.usage(lgs[i], d.Budget, now); err != nil {
						return err
					}
				}
				if err := w.save(lgs[i]); err != nil { // what pruning changed
					return err
				}
			}
			return nil
		}
		for i, d := range req.Debits {
			lg := lgs[i]
			at, held := now, int64(0) // a held entry (a lease's block) sits at its lease's end
			if req.Hold > 0 {
				at, held = backend.HeldAt(d.Window, now, req.Hold), 1
			}
			if err := w.st.insert.int(1, lg.id).int(2, at.UnixMicro()).int(3, d.Cost).text(4, req.Nonce).int(5, held).exec(); err != nil {
				return err
			}
			lg.used += d.Cost
			lg.idle = max(lg.idle, lg.expiry(d.Window, at))
			lg.dirty = true
			if err := w.spend(req.API, req.Owner, d.Budget, req.Method, req.Job, n, d.Cost); err != nil {
				return err
			}
			if err := w.save(lg); err != nil {
				return err
			}
			if res.Usage[i], err = w.usage(lg, d.Budget, now); err != nil {
				return err
			}
			res.Usage[i].Cost = d.Cost
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.sweepEvery != 0 && s.ops.Add(1)%s.sweepEvery == 0 {
		// Best effort: the decision is made; a failed sweep is retried
		// by a later one.
		_, _ = s.sweep(ctx, n)
	}
	return res, nil
}

// newTakeResult returns an admitting result at now for n debits, in one
// allocation for the usual one or two.
func newTakeResult(now time.Time, n int) *backend.TakeResult {
	switch n {
	case 1:
		r := new(struct {
			backend.TakeResult
			u [1]backend.Usage
		})
		r.TakeResult = backend.TakeResult{OK: true, At: now, Usage: r.u[:]}
		return &r.TakeResult
	case 2:
		r := new(struct {
			backend.TakeResult
			u [2]backend.Usage
		})
		r.TakeResult = backend.TakeResult{OK: true, At: now, Usage: r.u[:]}
		return &r.TakeResult
	}
	return &backend.TakeResult{OK: true, At: now, Usage: make([]backend.Usage, n)}
}

// sweep drops up to sweepMax logs that are idle at now (µs): every entry
// expired and no exhaustion mark, so credentials no longer used do not keep
// their rows. It returns how many logs it dropped.
func (s *Store) sweep(ctx context.Context, now int64) (int, error) {
	var dropped int
	err := s.decide(ctx, "sweep", func(w *wtx) error {
		dropped = 0
		var ids []int64
		q := w.st.idleLogs.int(1, now).int(2, int64(s.sweepMax))
		for q.next() {
			ids = append(ids, q.col(0))
		}
		if err := q.done(); err != nil {
			return err
		}
		for _, id := range ids {
			if err := w.drop(id); err != nil {
				return err
			}
		}
		dropped = len(ids)
		return w.sweepUse(now)
	})
	return dropped, err
}

// Refund implements backend.Store.
func (s *Store) Refund(ctx context.Context, req *backend.RefundRequest) (map[string]int64, error) {
	if req == nil || req.Owner == "" {
		return nil, fmt.Errorf("sqlitestore: refund: %w: empty credential", backend.ErrInvalid)
	}
	for _, b := range req.Budgets {
		if err := checkBudget("refund", b); err != nil {
			return nil, err
		}
	}
	debits := make([]backend.Debit, len(req.Budgets)) // a refund is a settle to zero
	for i, b := range req.Budgets {
		debits[i] = backend.Debit{Budget: b}
	}
	return s.shrink(ctx, "refund", req.API, req.Owner, req.Method, req.Job, req.At, req.At, req.Nonce, req.Now, debits)
}

// Settle implements backend.Store: in one write transaction, each named
// budget's entry of the reservation keeps min(its cost, the actual units),
// and goes at 0; the running sum drops by what was freed.
func (s *Store) Settle(ctx context.Context, req *backend.SettleRequest) (map[string]int64, error) {
	if req == nil || req.Owner == "" {
		return nil, fmt.Errorf("sqlitestore: settle: %w: empty credential", backend.ErrInvalid)
	}
	for _, d := range req.Debits {
		if err := checkBudget("settle", d.Budget); err != nil {
			return nil, err
		}
		if d.Cost < 0 {
			return nil, fmt.Errorf("sqlitestore: settle: %w: actual %d for budget %q: must be >= 0", backend.ErrInvalid, d.Cost, d.Name)
		}
	}
	row := req.Decided
	if row.IsZero() {
		row = req.At
	}
	return s.shrink(ctx, "settle", req.API, req.Owner, req.Method, req.Job, req.At, row, req.Nonce, req.Now, req.Debits)
}

// shrink lowers, in one write transaction, each debit's budget's entry of
// the reservation recorded at at with nonce to min(its cost, the debit's
// Cost), 0 removing it, and returns the units freed per budget whose entry
// it found. The freed units leave the sum and the breakdown row they were
// spent in (the hour of row: at, or a held entry's decision). An entry the window no longer counts is not found.
func (s *Store) shrink(ctx context.Context, op, api, owner, method, job string, at, row time.Time, nonce string, reqNow time.Time, debits []backend.Debit) (map[string]int64, error) {
	atUS, rowUS := at.UnixMicro(), row.UnixMicro()
	var got map[string]int64
	err := s.decide(ctx, op, func(w *wtx) error {
		now := s.now(reqNow)
		got = map[string]int64{}
		for _, d := range debits {
			lg, err := w.log(api, owner, d.Budget, now, false)
			if err != nil {
				return err
			}
			if lg == nil {
				continue
			}
			if err := w.trim(lg, d.Window, now); err != nil {
				return err
			}
			var rowid, cost int64
			found := false
			// out of the window: it counts for nothing, so there is nothing
			// to give back (the log may keep it longer, for a longer window
			// it had)
			if atUS >= d.Window.Start(now).UnixMicro() {
				q := w.st.reservation.int(1, lg.id).int(2, atUS).text(3, nonce)
				if q.next() {
					rowid, cost, found = q.col(0), q.col(1), true
				}
				if err := q.done(); err != nil {
					return err
				}
			}
			if found {
				keep := min(cost, d.Cost)
				if keep == 0 {
					err = w.st.dropEntry.int(1, rowid).exec()
				} else if keep < cost {
					err = w.st.shrinkEntry.int(1, keep).int(2, rowid).exec()
				}
				if err != nil {
					return err
				}
				got[d.Name] = cost - keep
				if cost > keep {
					lg.used -= cost - keep
					lg.dirty = true
					if err := w.spend(api, owner, d.Budget, method, job, rowUS, keep-cost); err != nil {
						return err
					}
				}
			}
			if err := w.save(lg); err != nil { // and what pruning changed
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}

// Exhaust implements backend.Store.
func (s *Store) Exhaust(ctx context.Context, req *backend.ExhaustRequest) error {
	if req == nil || req.Owner == "" {
		return fmt.Errorf("sqlitestore: exhaust: %w: empty credential", backend.ErrInvalid)
	}
	if err := checkBudget("exhaust", req.Budget); err != nil {
		return err
	}
	return s.decide(ctx, "exhaust", func(w *wtx) error {
		now := s.now(req.Now)
		n := now.UnixMicro()
		lg, err := w.log(req.API, req.Owner, req.Budget, now, true)
		if err != nil {
			return err
		}
		if err := w.trim(lg, req.Budget.Window, now); err != nil {
			return err
		}
		if err := w.st.bump.text(1, req.API).text(2, req.Owner).exec(); err != nil {
			return err
		}
		u := backend.ClampTime(req.Until).UnixMicro()
		switch {
		case req.StoreLoss && lg.exh >= u:
			// a mark for lost usage never shortens a later one
		case !req.Until.IsZero() && u > n:
			lg.exh = u
			lg.idle = max(lg.idle, u)
		default:
			lg.exh = 0
		}
		lg.dirty = true
		return w.save(lg)
	})
}

// Adjust implements backend.Store.
func (s *Store) Adjust(ctx context.Context, req *backend.AdjustRequest) error {
	if req == nil || req.Owner == "" {
		return fmt.Errorf("sqlitestore: adjust: %w: empty credential", backend.ErrInvalid)
	}
	if err := checkBudget("adjust", req.Budget); err != nil {
		return err
	}
	if req.Used < 0 {
		return fmt.Errorf("sqlitestore: adjust: %w: used %d for budget %q: must be >= 0", backend.ErrInvalid, req.Used, req.Budget.Name)
	}
	return s.decide(ctx, "adjust", func(w *wtx) error {
		now := s.now(req.Now)
		n := now.UnixMicro()
		lg, err := w.log(req.API, req.Owner, req.Budget, now, true)
		if err != nil {
			return err
		}
		if err := w.st.bump.text(1, req.API).text(2, req.Owner).exec(); err != nil {
			return err
		}
		// Held entries stamped past now are open leases' blocks
		// (TakeRequest.Hold): their leases may admit from them until they
		// see the version bumped above (LeaseOptions.CheckEvery), so they
		// stay. Every other entry goes, whatever its stamp: after the
		// clock stepped back, plain entries are stamped past now too.
		var held, newest int64
		drop := int64(-1) // but the caller's own ended lease's
		if !req.DropAt.IsZero() {
			drop = req.DropAt.UnixMicro()
		}
		q := w.st.held.int(1, lg.id).int(2, n).int(3, drop).text(4, req.DropNonce)
		if q.next() && !q.null(1) {
			held, newest = q.col(0), q.col(1)
		}
		if err := q.done(); err != nil {
			return err
		}
		if err := w.st.clearUnheld.int(1, lg.id).int(2, n).int(3, drop).text(4, req.DropNonce).exec(); err != nil {
			return err
		}
		// and what a daily window set aside: the adjusted log starts afresh
		if err := w.st.trimAside.int(1, lg.id).int(2, math.MaxInt64).exec(); err != nil {
			return err
		}
		lg.used, lg.exh, lg.idle, lg.dirty = held, 0, 0, true
		lg.window, lg.kept = w.winText(req.Budget.Window), backend.Window{} // a new log: nothing kept
		if held > 0 {
			lg.idle = backend.KeptUntil(req.Budget.Window, time.UnixMicro(newest)).UnixMicro()
		}
		if req.Used > 0 {
			if err := w.st.insert.int(1, lg.id).int(2, n).int(3, req.Used).text(4, req.Nonce).int(5, 0).exec(); err != nil {
				return err
			}
			lg.used += req.Used
			// (a daily log keeps it DailyKeep, set aside once its day
			// ends, as an admission's: see prune)
			lg.idle = max(lg.idle, backend.KeptUntil(req.Budget.Window, now).UnixMicro())
		}
		return w.save(lg)
	})
}

// Usage implements backend.Store. It reads a snapshot and writes nothing:
// expired entries are subtracted, not deleted.
func (s *Store) Usage(ctx context.Context, req *backend.UsageRequest) ([]backend.Usage, error) {
	if req == nil || req.Owner == "" {
		return nil, fmt.Errorf("sqlitestore: usage: %w: empty credential", backend.ErrInvalid)
	}
	for _, b := range req.Budgets {
		if err := checkBudget("usage", b); err != nil {
			return nil, err
		}
	}
	now := nowOr(req.Now)
	n := now.UnixMicro()
	var out []backend.Usage
	err := s.read(ctx, "usage", func(tx *sql.Tx) error {
		out = make([]backend.Usage, len(req.Budgets))
		for i, b := range req.Budgets {
			u := backend.Usage{Budget: b.Name, Window: b.Window, Limit: b.Limit}
			if b.Window.IsDaily() {
				u.Reset = time.UnixMicro(b.Window.NextReset(now).UnixMicro())
			}
			var id, used, exh int64
			var kept string
			err := tx.QueryRowContext(ctx, `SELECT id, used, exhausted_until, "window" FROM sums WHERE api = ? AND cred = ? AND budget = ?`,
				req.API, req.Owner, b.Name).Scan(&id, &used, &exh, &kept)
			if errors.Is(err, sql.ErrNoRows) {
				out[i] = u
				continue
			}
			if err != nil {
				return err
			}
			start, aside, err := countFrom(b.Window, kept, now)
			if err != nil {
				return err
			}
			var expired, back int64
			if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(cost), 0) FROM entries WHERE log = ? AND at < ?`, id, start).Scan(&expired); err != nil {
				return err
			}
			if aside {
				if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(cost), 0) FROM entries WHERE log = -? AND at >= ?`, id, start).Scan(&back); err != nil {
					return err
				}
			}
			u.Used = used - expired + back
			if exh > n {
				u.ExhaustedUntil = time.UnixMicro(exh)
			}
			if !b.Window.IsDaily() {
				var oldest sql.NullInt64
				if err := tx.QueryRowContext(ctx, `SELECT min(at) FROM entries WHERE log IN (?, ?) AND at >= ?`, id, asideID(id, aside), start).Scan(&oldest); err != nil {
					return err
				}
				if oldest.Valid {
					u.Reset = time.UnixMicro(oldest.Int64 + b.Window.Duration().Microseconds())
				}
			}
			out[i] = u
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Entries implements backend.Store: the entries counted in the window now,
// oldest first (ties in the order they were recorded).
func (s *Store) Entries(ctx context.Context, req *backend.EntriesRequest) ([]backend.Entry, error) {
	if req == nil || req.Owner == "" {
		return nil, fmt.Errorf("sqlitestore: entries: %w: empty credential", backend.ErrInvalid)
	}
	if err := checkBudget("entries", req.Budget); err != nil {
		return nil, err
	}
	now := nowOr(req.Now)
	var out []backend.Entry
	err := s.read(ctx, "entries", func(tx *sql.Tx) error {
		out = nil
		var id int64
		var kept string
		err := tx.QueryRowContext(ctx, `SELECT id, "window" FROM sums WHERE api = ? AND cred = ? AND budget = ?`,
			req.API, req.Owner, req.Budget.Name).Scan(&id, &kept)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		start, aside, err := countFrom(req.Budget.Window, kept, now)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT at, cost, nonce FROM entries WHERE log IN (?, ?) AND at >= ? ORDER BY at, rowid`,
			id, asideID(id, aside), start)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var at int64
			var e backend.Entry
			if err := rows.Scan(&at, &e.Cost, &e.Nonce); err != nil {
				return err
			}
			e.At = time.UnixMicro(at)
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// countFrom returns the first instant (µs) a read counts at now for window
// win, of a log that keeps its entries for the window whose text is kept:
// win's start, or later where kept no longer keeps what win would count
// (entries a decision would delete first; see setWindow); and whether the
// log's set-aside entries count too (kept is a daily window, and win
// another: a decision would put them back first).
func countFrom(win backend.Window, kept string, now time.Time) (int64, bool, error) {
	start := win.Start(now).UnixMicro()
	if kept == win.String() {
		return start, false, nil
	}
	k, err := backend.ParseWindow(kept)
	if err != nil {
		return 0, false, fmt.Errorf("stored window %q: %w", kept, err)
	}
	return max(start, backend.KeptSince(k, now).UnixMicro()), k.IsDaily(), nil
}

// asideID returns the log id under which the set-aside entries of log id
// count in a read: -id when they count (see countFrom), else id again.
func asideID(id int64, aside bool) int64 {
	if aside {
		return -id
	}
	return id
}

func checkTake(req *backend.TakeRequest) error {
	if req == nil {
		return fmt.Errorf("sqlitestore: take: %w: nil request", backend.ErrInvalid)
	}
	if req.Owner == "" {
		return fmt.Errorf("sqlitestore: take: %w: empty credential", backend.ErrInvalid)
	}
	if len(req.Debits) == 0 {
		return fmt.Errorf("sqlitestore: take: %w: charge names no budget", backend.ErrInvalid)
	}
	if err := backend.CheckHold(req.Hold, req.Debits); err != nil {
		return fmt.Errorf("sqlitestore: take: %w", err)
	}
	for i, d := range req.Debits {
		if err := checkBudget("take", d.Budget); err != nil {
			return err
		}
		if d.Cost <= 0 {
			return fmt.Errorf("sqlitestore: take: %w: cost %d for budget %q: must be > 0", backend.ErrInvalid, d.Cost, d.Name)
		}
		if d.Cost > d.Limit {
			return fmt.Errorf("sqlitestore: take: %w: budget %q: cost %d > limit %d", backend.ErrCostExceedsLimit, d.Name, d.Cost, d.Limit)
		}
		for _, e := range req.Debits[:i] {
			if e.Name == d.Name {
				return fmt.Errorf("sqlitestore: take: %w: budget %q debited twice", backend.ErrInvalid, d.Name)
			}
		}
	}
	return nil
}

// checkBudget checks what the store relies on: a name, a limit and a
// usable window.
func checkBudget(op string, b backend.Budget) error {
	switch {
	case b.Name == "":
		return fmt.Errorf("sqlitestore: %s: %w: empty budget name", op, backend.ErrInvalid)
	case b.Limit <= 0:
		return fmt.Errorf("sqlitestore: %s: %w: budget %q: limit %d, must be > 0", op, backend.ErrInvalid, b.Name, b.Limit)
	case b.Window.IsZero(),
		b.Window.IsDaily() && b.Window.Location() == nil,
		!b.Window.IsDaily() && b.Window.Duration() < time.Microsecond:
		return fmt.Errorf("sqlitestore: %s: %w: budget %q: window %s", op, backend.ErrInvalid, b.Name, b.Window)
	}
	return nil
}
