package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

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
		lgs, err := w.takeLogs(req, now)
		if err != nil {
			return err
		}
		if err := w.refusals(req, lgs, now, res); err != nil || !res.OK {
			return err
		}
		return w.record(req, lgs, now, res)
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

// countFrom returns the first instant (µs) a read counts at now for window
// win, of a log that keeps its entries for the window whose text is kept:
// win's start, or later where kept no longer keeps what win would count
// (entries a decision would delete first; see setWindow); and whether the
// log's set-aside entries count too (kept is a calendar window, and win
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
	return max(start, backend.KeptSince(k, now).UnixMicro()), k.IsCalendar(), nil
}

// asideID returns the log id under which the set-aside entries of log id
// count in a read: -id when they count (see countFrom), else id again.
func asideID(id int64, aside bool) int64 {
	if aside {
		return -id
	}
	return id
}

// takeLogs returns the log of each of req's debits, in order, each with
// the debit's window set and trimmed (made when new), and drops the
// owner's other logs that have gone idle.
func (w *wtx) takeLogs(req *backend.TakeRequest, now time.Time) ([]*logRow, error) {
	logs, err := w.credLogs(req.API, req.Owner, req.Debits)
	if err != nil {
		return nil, err
	}
	loaded := len(logs)
	lgs := w.lgs[:0]
	for i, d := range req.Debits {
		lgs = append(lgs, nil)
		for j := range logs[:loaded] {
			if lg := &logs[j]; lg.deb == i {
				lg.seen, lgs[i] = true, lg
				if err := w.setWindow(lg, d.Window, now); err != nil {
					return nil, err
				}
				break
			}
		}
		if lgs[i] == nil {
			logs = append(logs, logRow{deb: i}) // within the room credLogs left: no log moves
			lgs[i] = &logs[len(logs)-1]
			if err := w.create(lgs[i], req.API, req.Owner, d.Budget); err != nil {
				return nil, err
			}
		}
		if err := w.trim(lgs[i], d.Window, now); err != nil {
			return nil, err
		}
	}
	w.lgs = lgs
	for j := range logs[:loaded] {
		if lg := &logs[j]; !lg.seen && lg.idle <= now.UnixMicro() {
			if err := w.drop(lg.id); err != nil {
				return nil, err
			}
		}
	}
	return lgs, nil
}

// refusals sets res.OK false when a debit's budget cannot pay, with every
// budget's usage and, on the refusing ones, when enough units free up; it
// then saves what pruning changed. Otherwise it leaves res as it is.
func (w *wtx) refusals(req *backend.TakeRequest, lgs []*logRow, now time.Time, res *backend.TakeResult) error {
	n := now.UnixMicro()
	for i, d := range req.Debits {
		lg := lgs[i]
		var retry int64
		if deficit := lg.counted() + d.Cost - d.Limit; deficit > 0 {
			var err error
			if retry, err = w.retryAt(lg, d.Window, deficit, now); err != nil {
				return err
			}
		}
		if lg.exh > n {
			retry = max(retry, lg.exh)
		}
		if retry != 0 {
			res.OK = false
			var err error
			if res.Usage[i], err = w.usage(lg, d.Budget, now); err != nil {
				return err
			}
			res.Usage[i].RetryAt = time.UnixMicro(retry)
		}
	}
	if res.OK {
		return nil
	}
	for i, d := range req.Debits {
		if res.Usage[i].Budget == "" {
			var err error
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

// record writes one entry per debit (a held one at its lease's end), the
// breakdown rows and the logs, and each budget's usage after the charge.
func (w *wtx) record(req *backend.TakeRequest, lgs []*logRow, now time.Time, res *backend.TakeResult) error {
	n := now.UnixMicro()
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
		var err error
		if res.Usage[i], err = w.usage(lg, d.Budget, now); err != nil {
			return err
		}
		res.Usage[i].Cost = d.Cost
	}
	return nil
}
