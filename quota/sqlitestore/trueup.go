package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

var _ backend.TrueUpper = (*Store)(nil)

// TrueUp implements backend.TrueUpper in one BEGIN IMMEDIATE transaction:
// it prunes the budget's log as a Take would, counts it at now, and when
// the upstream counts more records one entry of the difference, stamped
// where it expires at the upstream's reset (see backend.TrueUpRequest).
// Entries are found by (log, at), so one stamped before newer ones takes
// its place in RetryAt's walk and in pruning.
func (s *Store) TrueUp(ctx context.Context, req *backend.TrueUpRequest) (*backend.TrueUpResult, error) {
	if err := backend.CheckTrueUp(req); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	var res *backend.TrueUpResult
	err := s.decide(ctx, "true-up", func(w *wtx) error {
		now := s.now(req.Now)
		var err error
		res, err = w.trueUp(req, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// trueUp is TrueUp's transaction at now.
func (w *wtx) trueUp(req *backend.TrueUpRequest, now time.Time) (*backend.TrueUpResult, error) {
	b := req.Budget
	lg, err := w.log(req.API, req.Owner, b, now, true)
	if err != nil {
		return nil, err
	}
	if err := w.trim(lg, b.Window, now); err != nil {
		return nil, err
	}
	res := &backend.TrueUpResult{At: now, Counted: lg.counted()}
	if at, ok := backend.TrueUpStamp(req, now); ok {
		switch {
		case req.Add:
			res.Added = req.Used
			err = w.addEntry(lg, b, at, res.Added, req.Nonce)
		case req.Used > res.Counted:
			res.Added = req.Used - res.Counted
			err = w.addEntry(lg, b, at, res.Added, req.Nonce)
		case req.Lower:
			res.Added, err = w.lower(lg, b, now, req, at)
		}
		if err != nil {
			return nil, err
		}
	}
	if res.Added != 0 {
		n := now.UnixMicro()
		if err := w.spend(req.API, req.Owner, b, trueUpMethod(req), req.Job, n, res.Added); err != nil {
			return nil, err
		}
		if err := w.st.bump.text(1, req.API).text(2, req.Owner).exec(); err != nil {
			return nil, err
		}
	}
	if err := w.save(lg); err != nil {
		return nil, err
	}
	res.Usage, err = w.usage(lg, b, now)
	return res, err
}

// addEntry records one plain entry of cost units at at in lg.
func (w *wtx) addEntry(lg *logRow, b backend.Budget, at time.Time, cost int64, nonce string) error {
	if err := w.st.insert.int(1, lg.id).int(2, at.UnixMicro()).int(3, cost).text(4, nonce).int(5, 0).exec(); err != nil {
		return err
	}
	lg.used += cost
	lg.idle = max(lg.idle, lg.expiry(b.Window, at))
	lg.dirty = true
	return nil
}

// lower replaces the counted entries of lg stamped before req.Since that
// are not held by one entry of req.Used at at, when they hold more, and
// returns the change in units (<= 0).
func (w *wtx) lower(lg *logRow, b backend.Budget, now time.Time, req *backend.TrueUpRequest, at time.Time) (int64, error) {
	start, since := b.Window.Start(now).UnixMicro(), req.Since.UnixMicro()
	var before int64
	q := w.st.unheldIn.int(1, lg.id).int(2, start).int(3, since)
	if q.next() {
		before = q.col(0)
	}
	if err := q.done(); err != nil {
		return 0, err
	}
	if req.Used >= before {
		return 0, nil
	}
	if err := w.st.dropUnheldIn.int(1, lg.id).int(2, start).int(3, since).exec(); err != nil {
		return 0, err
	}
	lg.used -= before
	lg.dirty = true
	if req.Used > 0 {
		if err := w.addEntry(lg, b, at, req.Used, req.Nonce); err != nil {
			return 0, err
		}
	}
	return req.Used - before, nil
}

// trueUpMethod is the Breakdown method a true-up's units are recorded
// under: an add's call's own, else UnmeteredMethod.
func trueUpMethod(req *backend.TrueUpRequest) string {
	if req.Add {
		return req.Method
	}
	return backend.UnmeteredMethod
}
