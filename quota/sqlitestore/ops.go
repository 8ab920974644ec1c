package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

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
			// (a calendar log keeps it AsideKeep, set aside once its
			// day or month ends, as an admission's: see prune)
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
			if b.Window.IsCalendar() {
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
			if !b.Window.IsCalendar() {
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
