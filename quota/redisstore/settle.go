package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota"
)

var settleScript = script("settle")

// Settle implements quota.Store: one run of settle.lua shrinks the
// reservation's entry (found by its score At and nonce) in each named
// budget to min(its cost, the actual units), keeping its score, and
// returns the units freed per budget whose entry was found.
func (s *Store) Settle(ctx context.Context, req *quota.SettleRequest) (map[string]int64, error) {
	if err := checkCred(req.API, req.Owner); err != nil {
		return nil, err
	}
	if err := checkNonce(req.Nonce); err != nil {
		return nil, err
	}
	got := map[string]int64{}
	n := len(req.Debits)
	if n == 0 {
		return got, nil
	}
	daily := false
	for _, d := range req.Debits {
		if err := checkBudget(d.Budget); err != nil {
			return nil, err
		}
		if d.Cost < 0 {
			return nil, invalid("settle: actual %d for budget %q: must be >= 0", d.Cost, d.Name)
		}
		daily = daily || d.Window.IsDaily()
	}
	all := s.keys(req.API, req.Owner, n, func(i int) string { return req.Debits[i].Name }, true)
	keys := make([]string, 0, 3*n+1)
	for i := range n {
		keys = append(keys, all[3*i], all[3*i+1])
	}
	keys = append(keys, all[3*n:]...)
	keys = append(keys, s.useKey(req.API, req.Owner, quota.HourOf(req.At)))
	keys = append(keys, s.markKey(req.API, req.Owner))
	rest, _, err := s.runSpecs(ctx, "settle", settleScript, keys, req.Now, daily, func(est time.Time) []any {
		args := []any{nowArg(req.Now), req.At.UnixMicro(), req.Nonce}
		for _, d := range req.Debits {
			args = append(args, d.Cost)
			args = s.appendSpec(args, d.Window, est)
		}
		for _, d := range req.Debits {
			args = append(args, s.box(d.Budget).id)
		}
		for _, d := range req.Debits {
			args = append(args, quota.BreakdownField(d.Name, req.Method, req.Job))
		}
		return args
	})
	if err != nil {
		return nil, err
	}
	v, err := ints(rest)
	if err != nil || len(v) != n {
		return nil, unavailable("settle", fmt.Errorf("bad script reply %v: %v", rest, err))
	}
	for i, d := range req.Debits {
		if v[i] >= 0 {
			got[d.Name] = v[i]
		}
	}
	return got, nil
}
