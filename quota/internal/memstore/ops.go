package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

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
	if len(req.Nonce) > maxMemNonce {
		return invalidf("memory store: nonce of %d bytes: at most %d", len(req.Nonce), maxMemNonce)
	}
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
