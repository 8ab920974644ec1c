package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// Take implements backend.Store: one run of take.lua decides for every budget
// of the charge, atomically. Redis or network errors, and ctx's deadline,
// give an error wrapping backend.ErrStoreUnavailable; bad requests one
// wrapping backend.ErrInvalid.
func (s *Store) Take(ctx context.Context, req *backend.TakeRequest) (*backend.TakeResult, error) {
	if err := checkCred(req.API, req.Owner); err != nil {
		return nil, err
	}
	if err := checkNonce(req.Nonce); err != nil {
		return nil, err
	}
	n := len(req.Debits)
	if n == 0 {
		return nil, invalid("take names no budget")
	}
	for _, d := range req.Debits {
		if err := checkBudget(d.Budget); err != nil {
			return nil, err
		}
		if d.Cost <= 0 || d.Cost > d.Limit {
			return nil, invalid("cost %d for budget %q: must be between 1 and the limit %d", d.Cost, d.Name, d.Limit)
		}
	}
	if err := backend.CheckHold(req.Hold, req.Debits); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	name := func(i int) string { return req.Debits[i].Name }
	keys := s.keys(req.API, req.Owner, n, name, true)
	mk := s.markKey(req.API, req.Owner)
	keys = append(keys, "", "", mk) // the hour hashes are named in the loop
	seen := s.marks.seen(mk)
	trust := zero
	if req.TrustStore {
		trust = one
	}
	if s.general {
		trust = generalTrust[req.TrustStore]
	}
	est := s.estimate(req.Now)
	var keep time.Duration
	fields := make([]any, n)
	for i, d := range req.Debits {
		keep = max(keep, backend.BreakdownKeep(d.Window))
		fields[i] = backend.BreakdownField(d.Name, req.Method, req.Job)
	}
	hold := zero
	if req.Hold > 0 {
		hold = req.Hold.Microseconds()
	}
	args := make([]any, 0, 10+10*n)
	for attempt := 0; ; attempt++ {
		// the breakdown hashes of the hour holding est (less a margin for
		// a Redis clock behind the host's) and the next: the script picks
		// the one of its now
		h0 := backend.HourOf(est.Add(-hourMargin))
		keys[4*n] = s.useKey(req.API, req.Owner, h0)
		keys[4*n+1] = s.useKey(req.API, req.Owner, h0.Add(time.Hour))
		args = append(args[:0], nowArg(req.Now), req.Nonce, seen.seq, seen.until, trust,
			h0.UnixMicro(), keep.Microseconds(), hold)
		for i, d := range req.Debits {
			bx := s.box(d.Budget)
			args = append(args, d.Name, d.Cost, bx.limit)
			if d.Window.IsCalendar() {
				args = s.appendSpec(args, d.Window, est)
			} else {
				args = append(args, bx.win, zero, zero, zero, zero)
			}
			args = append(args, bx.id, fields[i])
		}
		args = append(args, s.own, seen.own)
		var (
			reply      []any
			short, err error
		)
		if s.probe != nil && n == 1 && batchable(&pipedCall{sc: takeScript, keys: keys, args: args}) {
			reply, err = s.probeDecide(ctx, keys, args)
		}
		if reply != nil || err != nil {
			// decided by the probe
		} else if s.replicas > 0 {
			reply, short, err = s.runWait(ctx, takeScript, keys, args)
		} else if s.pipe != nil {
			reply, err = s.runPiped(ctx, takeScript, keys, args)
		} else {
			reply, err = s.run(ctx, takeScript, keys, args)
		}
		if err != nil {
			return nil, failed(ctx, "take", err)
		}
		status, now, err := head(reply)
		if err != nil {
			return nil, failed(ctx, "take", err)
		}
		if status < 0 {
			if attempt > 0 || !req.Now.IsZero() {
				return nil, unavailable("take", fmt.Errorf("redis clock (%v) outside the calendar boundaries around %v", time.UnixMicro(now), est))
			}
			est = s.learn(now)
			continue
		}
		res, err := takeResult(req, status == 1, now, reply[2:])
		if err != nil {
			return nil, err
		}
		if short != nil && res.OK {
			// An admission needs the replicas; a refusal grants nothing
			// (and reports any store loss it found), so it stands.
			return nil, failed(ctx, "take", short)
		}
		s.marks.saw(mk, res.seq, res.until, now, res.StoreLoss || res.lost, res.OK)
		return &res.TakeResult, nil
	}
}

// probeDecide runs batch.lua on the one-debit take keys and args alone
// (tests only: see Store.probe), and returns its reply when it decided, nil
// when it left the decision to take.lua.
func (s *Store) probeDecide(ctx context.Context, keys []string, args []any) ([]any, error) {
	k, a := batchArgs([]*pipedCall{{keys: keys, args: args}})
	rs, err := batchReplies(batchScript.Run(ctx, s.rdb, k, a...), 1)
	if err != nil || len(rs) == 0 {
		return nil, err
	}
	s.probe.Add(1)
	return rs[0], nil
}

// generalTrust is the TRUST argument that also makes take.lua skip
// decide, its fast path (a test's switch: see export_test.go).
var generalTrust = map[bool]any{false: "G0", true: "G1"}

// head reads the {STATUS, NOW} every script reply starts with.
func head(reply []any) (status, now int64, err error) {
	if status, err = num(reply[0]); err != nil {
		return
	}
	now, err = num(reply[1])
	return
}

// takeReply is a TakeResult with what the script said of the owner's
// store-loss marker.
type takeReply struct {
	backend.TakeResult
	seq, until int64 // the marker after the call
	lost       bool  // some debited budget was found lost
}

func takeResult(req *backend.TakeRequest, ok bool, now int64, rest []any) (*takeReply, error) {
	n := len(req.Debits)
	if len(rest) != 5*n+3 {
		return nil, unavailable("take", fmt.Errorf("script replied %d values for %d budgets", len(rest), n))
	}
	var res *takeReply
	if n <= 4 { // one allocation for the result and its usage
		r := new(struct {
			res   takeReply
			usage [4]backend.Usage
		})
		res = &r.res
		res.Usage = r.usage[:n:n]
	} else {
		res = &takeReply{TakeResult: backend.TakeResult{Usage: make([]backend.Usage, n)}}
	}
	tail, err := ints(rest[4*n:])
	if err != nil {
		return nil, unavailable("take", err)
	}
	res.seq, res.until, res.StoreLoss = tail[0], tail[1], tail[2] == 1
	for i, l := range tail[3:] {
		if l == 1 {
			res.Usage[i].StoreLoss = true
			res.lost = true
		}
	}
	res.OK, res.At = ok, time.UnixMicro(now)
	for i, d := range req.Debits {
		var v [4]int64
		for j := range v {
			x, err := num(rest[4*i+j])
			if err != nil {
				return nil, unavailable("take", err)
			}
			v[j] = x
		}
		u := &res.Usage[i]
		*u = backend.Usage{
			Budget: d.Name, Window: d.Window, Limit: d.Limit, Used: v[0],
			Reset: usTime(v[1]), ExhaustedUntil: usTime(v[2]), RetryAt: usTime(v[3]),
			StoreLoss: u.StoreLoss,
		}
		if ok {
			u.Cost = d.Cost
		}
	}
	return res, nil
}
