package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

var trueupScript = scripts["trueup"]

var _ backend.TrueUpper = (*Store)(nil)

// TrueUp implements backend.TrueUpper: one run of trueup.lua, in the
// owner's slot, prunes the budget's log, counts it and records the
// difference the upstream counts more (see backend.TrueUpRequest), with
// the store-loss marker kept in step (a true-up neither hides a loss nor
// makes one up). A budget whose state the store lost is left as it is:
// the next Take finds the loss and counts the budget spent.
func (s *Store) TrueUp(ctx context.Context, req *backend.TrueUpRequest) (*backend.TrueUpResult, error) {
	if err := backend.CheckTrueUp(req); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	if err := checkCred(req.API, req.Owner); err != nil {
		return nil, err
	}
	if err := checkBudget(req.Budget); err != nil {
		return nil, err
	}
	if err := checkNonce(req.Nonce); err != nil {
		return nil, err
	}
	b := req.Budget
	keys := s.keys(req.API, req.Owner, 1, func(int) string { return b.Name }, true)
	mk := s.markKey(req.API, req.Owner)
	h0 := backend.HourOf(s.estimate(req.Now).Add(-hourMargin))
	keys = append(keys, mk, s.useKey(req.API, req.Owner, h0), s.useKey(req.API, req.Owner, h0.Add(time.Hour)))
	var until int64
	if !req.Until.IsZero() {
		until = backend.ClampTime(req.Until).UnixMicro()
	}
	mode, method := zero, backend.UnmeteredMethod
	switch {
	case req.Add:
		mode, method = "A", req.Method
	case req.Lower:
		mode = one
	}
	rest, now, err := s.runSpecs(ctx, "true-up", trueupScript, keys, req.Now, b.Window.IsCalendar(), func(est time.Time) []any {
		args := s.appendSpec([]any{nowArg(req.Now), req.Used, req.Nonce}, b.Window, est)
		return append(args, s.box(b).id, until, mode, req.Since.UnixMicro(), h0.UnixMicro(),
			backend.BreakdownKeep(b.Window).Microseconds(), backend.BreakdownField(b.Name, method, req.Job))
	})
	if err != nil {
		return nil, err
	}
	v, err := ints(rest)
	if err != nil || len(v) != 9 {
		return nil, unavailable("true-up", fmt.Errorf("bad script reply %v: %v", rest, err))
	}
	res := &backend.TrueUpResult{At: time.UnixMicro(now), Counted: v[1], Added: v[2], Usage: backend.Usage{
		Budget: b.Name, Window: b.Window, Limit: b.Limit, Used: v[3],
		Reset: usTime(v[4]), ExhaustedUntil: usTime(v[5]), StoreLoss: v[6] == 1,
	}}
	if !req.Now.IsZero() {
		res.At = req.Now.Truncate(time.Microsecond)
	}
	if v[0] == 0 && res.Added != 0 {
		s.marks.saw(mk, v[7], v[8], now, false, false)
	}
	return res, nil
}
