package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

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
//
// It is one function of about 90 lines on purpose: the decision path of
// every Take and Allow on this store, one lock hold, with its buffers on
// the stack (BenchmarkVersusRate); split, its steps would pass the logs,
// counts and tallies between them.
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
