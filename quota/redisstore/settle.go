package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// Settle implements backend.Store: one run of settle.lua shrinks the
// reservation's entry (found by its score At and nonce) in each named
// budget to min(its cost, the actual units), keeping its score, and
// returns the units freed per budget whose entry was found.
func (s *Store) Settle(ctx context.Context, req *backend.SettleRequest) (map[string]int64, error) {
	for _, d := range req.Debits {
		if d.Cost < 0 {
			return nil, invalid("settle: actual %d for budget %q: must be >= 0", d.Cost, d.Name)
		}
	}
	row := req.Decided
	if row.IsZero() {
		row = req.At
	}
	freed, err := s.settle(ctx, "settle", req.API, req.Owner, req.At, row, req.Nonce, req.Method, req.Job, req.Debits, req.Now)
	if err != nil {
		return nil, err
	}
	got := map[string]int64{}
	for i, d := range req.Debits {
		if freed[i] >= 0 {
			got[d.Name] = freed[i]
		}
	}
	return got, nil
}

// Refund implements backend.Store: a refund is a settle to zero, which
// removes the reservation's entry from each named budget; it returns the
// units given back per budget whose entry was found.
func (s *Store) Refund(ctx context.Context, req *backend.RefundRequest) (map[string]int64, error) {
	debits := make([]backend.Debit, len(req.Budgets))
	for i, b := range req.Budgets {
		debits[i] = backend.Debit{Budget: b} // Cost 0: keep nothing
	}
	freed, err := s.settle(ctx, "refund", req.API, req.Owner, req.At, req.At, req.Nonce, req.Method, req.Job, debits, req.Now)
	if err != nil {
		return nil, err
	}
	got := map[string]int64{}
	for i, b := range req.Budgets {
		if freed[i] > 0 {
			got[b.Name] = freed[i]
		}
	}
	return got, nil
}

// settle runs settle.lua for one reservation: each debit's entry keeps
// min(its cost, the debit's Cost). It returns, per debit, the units freed,
// or -1 where the entry was not found.
func (s *Store) settle(ctx context.Context, op, api, owner string, at, row time.Time, nonce, method, job string, debits []backend.Debit, now time.Time) ([]int64, error) {
	if err := checkCred(api, owner); err != nil {
		return nil, err
	}
	if err := checkNonce(nonce); err != nil {
		return nil, err
	}
	n := len(debits)
	if n == 0 {
		return nil, nil
	}
	calendar := false
	for _, d := range debits {
		if err := checkBudget(d.Budget); err != nil {
			return nil, err
		}
		calendar = calendar || d.Window.IsCalendar()
	}
	all := s.keys(api, owner, n, func(i int) string { return debits[i].Name }, true)
	keys := make([]string, 0, 3*n+2)
	for i := range n {
		keys = append(keys, all[3*i], all[3*i+1])
	}
	keys = append(keys, all[3*n:]...)
	keys = append(keys, s.useKey(api, owner, backend.HourOf(row)), s.markKey(api, owner))
	rest, _, err := s.runSpecs(ctx, op, settleScript, keys, now, calendar, func(est time.Time) []any {
		args := []any{nowArg(now), at.UnixMicro(), nonce}
		for _, d := range debits {
			args = append(args, d.Cost)
			args = s.appendSpec(args, d.Window, est)
		}
		for _, d := range debits {
			args = append(args, s.box(d.Budget).id)
		}
		for _, d := range debits {
			args = append(args, backend.BreakdownField(d.Name, method, job))
		}
		return args
	})
	if err != nil {
		return nil, err
	}
	v, err := ints(rest)
	if err != nil || len(v) != n {
		return nil, unavailable(op, fmt.Errorf("bad script reply %v: %v", rest, err))
	}
	return v, nil
}
