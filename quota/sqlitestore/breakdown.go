package sqlitestore

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

//go:embed schema_v3.sql
var schemaV3SQL string

const spendSQL = `INSERT INTO usage_hours (api, owner, hour, budget, method, job, units, keep) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (api, owner, hour, budget, method, job) DO UPDATE SET units = units + excluded.units, keep = max(keep, excluded.keep)`

// spend adds units to the breakdown row of the hour holding at (µs), in the
// decision's transaction.
func (w *wtx) spend(api, owner string, b backend.Budget, method, job string, at, units int64) error {
	hour := backend.HourOf(time.UnixMicro(at)).UnixMicro()
	keep := hour + int64(time.Hour/time.Microsecond) + backend.BreakdownKeep(b.Window).Microseconds()
	return w.st.spend.text(1, api).text(2, owner).int(3, hour).text(4, b.Name).text(5, method).text(6, job).int(7, units).int(8, keep).exec()
}

// Breakdown implements backend.Store.
func (s *Store) Breakdown(ctx context.Context, req *backend.BreakdownRequest) ([]backend.BreakdownRow, error) {
	if req == nil || req.Owner == "" {
		return nil, fmt.Errorf("sqlitestore: breakdown: %w: empty credential", backend.ErrInvalid)
	}
	now := nowOr(req.Now).UnixMicro()
	since := backend.HourOf(req.Since).UnixMicro()
	q := `SELECT hour, budget, method, job, units FROM usage_hours WHERE api = ? AND owner = ? AND hour >= ? AND keep > ? AND units != 0`
	args := []any{req.API, req.Owner, since, now}
	if len(req.Budgets) > 0 {
		q += ` AND budget IN (?` + strings.Repeat(`, ?`, len(req.Budgets)-1) + `)`
		for _, b := range req.Budgets {
			args = append(args, b)
		}
	}
	var out []backend.BreakdownRow
	err := s.read(ctx, "breakdown", func(tx *sql.Tx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, q+` ORDER BY hour, budget, method, job`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r backend.BreakdownRow
			var hour int64
			if err := rows.Scan(&hour, &r.Budget, &r.Method, &r.Job, &r.Units); err != nil {
				return err
			}
			r.Hour = time.UnixMicro(hour)
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return backend.SortBreakdown(out), nil
}

// MarkCrossing implements backend.Store: an upsert that replaces only a
// lapsed mark, in one immediate transaction, so of several processes
// exactly one records it.
func (s *Store) MarkCrossing(ctx context.Context, req *backend.CrossingMark) (bool, error) {
	if req == nil || req.Owner == "" {
		return false, fmt.Errorf("sqlitestore: mark crossing: %w: empty credential", backend.ErrInvalid)
	}
	if req.Percent < 1 || req.Percent > 100 {
		return false, fmt.Errorf("sqlitestore: mark crossing: %w: threshold %d%%: must be between 1 and 100", backend.ErrInvalid, req.Percent)
	}
	now := nowOr(req.Now).UnixMicro()
	var first bool
	err := s.write(ctx, "mark crossing", func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `INSERT INTO crossings (api, owner, budget, percent, until) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (api, owner, budget, percent) DO UPDATE SET until = excluded.until WHERE crossings.until <= ?
			RETURNING 1`, req.API, req.Owner, req.Budget, req.Percent, req.Until.UnixMicro(), now).Scan(&one)
		switch {
		case err == sql.ErrNoRows:
			first = false
			return nil
		case err != nil:
			return err
		}
		first = true
		return nil
	})
	return first, err
}

// sweepUse drops breakdown rows and crossing marks lapsed by now (µs).
func (w *wtx) sweepUse(now int64) error {
	if err := w.st.dropHours.int(1, now).exec(); err != nil {
		return err
	}
	return w.st.dropCrossing.int(1, now).exec()
}
