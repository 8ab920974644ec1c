package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// useKey names one breakdown row of the memory store.
type useKey struct {
	api, owner        string
	hour              int64 // µs, on the hour
	budget, method, j string
}

// useRow is a breakdown row's units and when it may be dropped (µs).
type useRow struct{ units, keep int64 }

type markKey struct {
	api, owner, budget string
	percent            int
}

// spend adds units to the breakdown row of (budget, method, job) in the
// hour holding at (µs), and returns the row. Called with s.mu held.
func (s *Store) spend(api, owner string, b backend.Budget, method, job string, at, units int64) *useRow {
	if s.use == nil {
		s.use = make(map[useKey]*useRow)
	}
	hour := at - at%hourUS
	k := useKey{api: api, owner: owner, hour: hour, budget: b.Name, method: method, j: job}
	r := s.use[k]
	if r == nil {
		r = &useRow{}
		s.use[k] = r
	}
	r.add(hour, b.Window, units)
	return r
}

func (r *useRow) add(hour int64, w backend.Window, units int64) {
	r.units += units
	r.keep = max(r.keep, hour+hourUS+backend.BreakdownKeep(w).Microseconds())
}

// spendLog is spend for a decision on lg (the log of api, owner and b,
// used with b's window): a run of decisions with one method and job in one
// hour adds to the row the log spent into last, without hashing the row's
// key (the row's keep already counts this hour and window). Called with
// s.mu held.
func (s *Store) spendLog(lg *memLog, api, owner string, b *backend.Budget, method, job string, at, units int64) {
	if r := lg.row; r != nil && at >= lg.rowHour && at < lg.rowHour+hourUS && lg.rowMethod == method && lg.rowJob == job {
		r.units += units
		return
	}
	lg.row = s.spend(api, owner, *b, method, job, at, units)
	lg.rowHour, lg.rowMethod, lg.rowJob = at-at%hourUS, method, job
}

// sweepUse drops breakdown rows and crossing marks that have lapsed by now
// (µs). Called with s.mu held.
func (s *Store) sweepUse(now int64) {
	for k, r := range s.use {
		if r.keep <= now {
			delete(s.use, k)
		}
	}
	for k, until := range s.marks {
		if until <= now {
			delete(s.marks, k)
		}
	}
}

// Breakdown implements Store.
func (s *Store) Breakdown(ctx context.Context, req *backend.BreakdownRequest) ([]backend.BreakdownRow, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("quota: memory store: %w: %w", backend.ErrStoreUnavailable, err)
	}
	now := nowOr(req.Now).UnixMicro()
	since := req.Since.UnixMicro()
	want := make(map[string]bool, len(req.Budgets))
	for _, b := range req.Budgets {
		want[b] = true
	}
	s.mu.Lock()
	var out []backend.BreakdownRow
	for k, r := range s.use {
		if k.api != req.API || k.owner != req.Owner || r.keep <= now || k.hour+hourUS <= since {
			continue
		}
		if len(want) > 0 && !want[k.budget] {
			continue
		}
		out = append(out, backend.BreakdownRow{Hour: time.UnixMicro(k.hour), Budget: k.budget, Method: k.method, Job: k.j, Units: r.units})
	}
	s.mu.Unlock()
	return backend.SortBreakdown(out), nil
}

// MarkCrossing implements Store.
func (s *Store) MarkCrossing(ctx context.Context, req *backend.CrossingMark) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("quota: memory store: %w: %w", backend.ErrStoreUnavailable, err)
	}
	if req.Percent < 1 || req.Percent > 100 {
		return false, invalidf("threshold %d%%: must be between 1 and 100", req.Percent)
	}
	now := nowOr(req.Now).UnixMicro()
	k := markKey{req.API, req.Owner, req.Budget, req.Percent}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.marks == nil {
		s.marks = make(map[markKey]int64)
	}
	if until, ok := s.marks[k]; ok && until > now {
		return false, nil
	}
	s.marks[k] = req.Until.UnixMicro()
	return true, nil
}

// hourUS is an hour in µs.
const hourUS = int64(time.Hour / time.Microsecond)
