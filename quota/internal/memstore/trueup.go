package memstore

import (
	"context"
	"fmt"

	"github.com/quotactl/quotactl/quota/backend"
)

var _ backend.TrueUpper = (*Store)(nil)

// TrueUp implements backend.TrueUpper under the store's lock: it prunes
// the budget's log as a Take would, counts it at now, and records one
// entry of the difference when the upstream counts more (see
// backend.TrueUpRequest). The entry may be stamped before newer ones: the
// log keeps its entries ordered by instant (push), so the running sum,
// RetryAt's walk and expiry see it in its place.
func (s *Store) TrueUp(ctx context.Context, req *backend.TrueUpRequest) (*backend.TrueUpResult, error) {
	if ctx == nil {
		return nil, invalidf("memory store: true-up: nil context")
	}
	if err := backend.CheckTrueUp(req); err != nil {
		return nil, fmt.Errorf("memory store: %w", err)
	}
	if len(req.Nonce) > maxMemNonce {
		return nil, invalidf("memory store: true-up: nonce of %d bytes: at most %d", len(req.Nonce), maxMemNonce)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("quota: memory store: %w: %w", backend.ErrStoreUnavailable, err)
	}
	b := req.Budget
	s.mu.Lock()
	defer s.mu.Unlock()
	lg := s.logOf(req.API, req.Owner, b.Name)
	var nowUS int64
	if !req.Now.IsZero() {
		nowUS = req.Now.UnixMicro()
	} else {
		nowUS = max(s.clock.NowUS(), lg.seen) // never before an earlier decision
	}
	c := lg.use(b.Window, nowUS)
	res := &backend.TrueUpResult{At: s.instant(req.Now, nowUS), Counted: lg.sum - c.gap}
	if at, ok := backend.TrueUpStamp(req, res.At); ok {
		switch {
		case req.Add:
			res.Added = req.Used
			s.record(lg, at.UnixMicro(), res.Added, req.Nonce)
		case req.Used > res.Counted:
			res.Added = req.Used - res.Counted
			s.record(lg, at.UnixMicro(), res.Added, req.Nonce)
		case req.Lower:
			res.Added = s.lower(lg, c.first, req.Since.UnixMicro(), at.UnixMicro(), req.Used, req.Nonce)
		}
	}
	if res.Added != 0 {
		// (an entry at or after the window's start: c still says what
		// the window counts)
		s.spend(req.API, req.Owner, b, trueUpMethod(req), req.Job, nowUS, res.Added)
		s.bump(req.API, req.Owner)
	}
	t := lg.tally(&b, nowUS, c)
	t.fill(&res.Usage, &b) // (Remaining left to the Limiter, as a Take's)
	return res, nil
}

// record adds one entry of cost units at at (µs) to lg, in its place.
// Called with s.mu held.
func (s *Store) record(lg *memLog, at, cost int64, nonce string) {
	e := lg.push(at)
	e.cost = cost
	e.nonce.set(nonce)
	lg.sum += cost
}

// lower removes from lg, from the entry at first on, the entries stamped
// before since that are not held, when they hold more than used units, and
// records one entry of used at at in their place. It returns the change
// in units (<= 0). Called with s.mu held.
func (s *Store) lower(lg *memLog, first int, since, at, used int64, nonce string) int64 {
	var before int64
	for i := first; i < lg.n && lg.at(i).at < since; i++ {
		if e := lg.at(i); !e.held {
			before += e.cost
		}
	}
	if used >= before {
		return 0
	}
	j := first
	for i := first; i < lg.n; i++ {
		e := *lg.at(i)
		if e.at < since && !e.held {
			continue
		}
		*lg.at(j) = e
		j++
	}
	lg.n = j
	lg.sum -= before
	if used > 0 {
		s.record(lg, at, used, nonce)
	}
	return used - before
}

// trueUpMethod is the Breakdown method a true-up's units are recorded
// under: an add's call's own, else UnmeteredMethod.
func trueUpMethod(req *backend.TrueUpRequest) string {
	if req.Add {
		return req.Method
	}
	return backend.UnmeteredMethod
}
