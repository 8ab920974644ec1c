package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota/backend"
)

// runSpecs runs a script whose ARGV holds window specs built by build from
// an estimate of now, retrying once with Redis's own now when the script
// found the estimate more than a day (month) off; calendar says whether
// any spec is a calendar window's, whose boundaries need the estimate. It
// returns the reply after {STATUS, NOW} and NOW.
func (s *Store) runSpecs(ctx context.Context, op string, sc *redis.Script, keys []string, now time.Time, calendar bool, build func(est time.Time) []any) ([]any, int64, error) {
	var est time.Time
	if calendar {
		est = s.estimate(now)
	}
	for attempt := 0; ; attempt++ {
		reply, err := s.run(ctx, sc, keys, build(est))
		if err != nil {
			return nil, 0, failed(ctx, op, err)
		}
		status, at, err := head(reply)
		if err != nil {
			return nil, 0, failed(ctx, op, err)
		}
		if status >= 0 {
			return reply[2:], at, nil
		}
		if attempt > 0 || !now.IsZero() {
			return nil, 0, unavailable(op, fmt.Errorf("redis clock (%v) outside the calendar boundaries around %v", time.UnixMicro(at), est))
		}
		est = s.learn(at)
	}
}

// Exhaust implements backend.Store: it marks the budget spent until
// req.Until (the key expires then), or clears the mark. A mark set after a
// store loss (req.StoreLoss, or the take script's own) is never shortened
// by a later Exhaust with an earlier Until; clearing clears it too.
func (s *Store) Exhaust(ctx context.Context, req *backend.ExhaustRequest) error {
	if err := checkCred(req.API, req.Owner); err != nil {
		return err
	}
	if err := checkBudget(req.Budget); err != nil {
		return err
	}
	keys := s.keys(req.API, req.Owner, 1, func(int) string { return req.Budget.Name }, true)
	mk := s.markKey(req.API, req.Owner)
	var until int64
	if !req.Until.IsZero() {
		until = backend.ClampTime(req.Until).UnixMicro() // past int64 µs would wrap
	}
	loss := zero
	if req.StoreLoss {
		loss = one
	}
	// exh and the marker, then the log, sum and keep keys: an exhaust is a
	// write under the budget's definition, which the log's retention follows
	rest, now, err := s.runSpecs(ctx, "exhaust", exhaustScript, []string{keys[2], mk, keys[0], keys[1], keys[3]}, req.Now, req.Budget.Window.IsCalendar(), func(est time.Time) []any {
		return append(s.appendSpec([]any{nowArg(req.Now), until, loss}, req.Budget.Window, est), s.box(req.Budget).id)
	})
	if err != nil {
		return err
	}
	return s.sawMark(mk, now, rest)
}

// Adjust implements backend.Store: it replaces the budget's log with one
// entry of req.Used units recorded now (none if 0), keeping the entries
// held past now (open leases' blocks), and clears any exhaustion mark.
func (s *Store) Adjust(ctx context.Context, req *backend.AdjustRequest) error {
	if err := checkCred(req.API, req.Owner); err != nil {
		return err
	}
	if err := checkBudget(req.Budget); err != nil {
		return err
	}
	if req.Used < 0 || req.Used > req.Budget.Limit {
		return invalid("used %d for budget %q: must be between 0 and the limit %d", req.Used, req.Budget.Name, req.Budget.Limit)
	}
	if err := checkNonce(req.Nonce); err != nil {
		return err
	}
	drop := int64(-1) // the caller's own ended lease's block, held
	if !req.DropAt.IsZero() {
		drop = req.DropAt.UnixMicro()
		if err := checkNonce(req.DropNonce); err != nil {
			return err
		}
	}
	name := func(int) string { return req.Budget.Name }
	keys := s.keys(req.API, req.Owner, 1, name, true)
	mk := s.markKey(req.API, req.Owner)
	rest, now, err := s.runSpecs(ctx, "adjust", adjustScript, append(keys, mk), req.Now, req.Budget.Window.IsCalendar(), func(est time.Time) []any {
		return append(s.appendSpec([]any{nowArg(req.Now), req.Used, req.Nonce}, req.Budget.Window, est), s.box(req.Budget).id, req.DropNonce, drop)
	})
	if err != nil {
		return err
	}
	return s.sawMark(mk, now, rest)
}

// Usage implements backend.Store: the usage of each budget for one
// credential now, after dropping expired entries.
func (s *Store) Usage(ctx context.Context, req *backend.UsageRequest) ([]backend.Usage, error) {
	if err := checkCred(req.API, req.Owner); err != nil {
		return nil, err
	}
	n := len(req.Budgets)
	if n == 0 {
		return []backend.Usage{}, nil
	}
	calendar := false
	for _, b := range req.Budgets {
		if err := checkBudget(b); err != nil {
			return nil, err
		}
		calendar = calendar || b.Window.IsCalendar()
	}
	name := func(i int) string { return req.Budgets[i].Name }
	keys := s.keys(req.API, req.Owner, n, name, true)
	keys = append(keys, s.markKey(req.API, req.Owner))
	rest, _, err := s.runSpecs(ctx, "usage", usageScript, keys, req.Now, calendar, func(est time.Time) []any {
		args := make([]any, 0, 1+6*n)
		args = append(args, nowArg(req.Now))
		for _, b := range req.Budgets {
			args = s.appendSpec(args, b.Window, est)
		}
		for _, b := range req.Budgets {
			args = append(args, s.box(b).id)
		}
		return args
	})
	if err != nil {
		return nil, err
	}
	v, err := ints(rest)
	if err != nil || len(v) != 4*n {
		return nil, unavailable("usage", fmt.Errorf("bad script reply %v: %v", rest, err))
	}
	out := make([]backend.Usage, n)
	for i, b := range req.Budgets {
		out[i] = backend.Usage{
			Budget: b.Name, Window: b.Window, Limit: b.Limit, Used: v[3*i],
			Reset: usTime(v[3*i+1]), ExhaustedUntil: usTime(v[3*i+2]), StoreLoss: v[3*n+i] == 1,
		}
	}
	return out, nil
}

// Entries implements backend.Store: the entries the budget counts now,
// oldest first.
func (s *Store) Entries(ctx context.Context, req *backend.EntriesRequest) ([]backend.Entry, error) {
	if err := checkCred(req.API, req.Owner); err != nil {
		return nil, err
	}
	if err := checkBudget(req.Budget); err != nil {
		return nil, err
	}
	name := func(int) string { return req.Budget.Name }
	keys := s.keys(req.API, req.Owner, 1, name, true)
	keys = append(keys[:2], keys[3], s.markKey(req.API, req.Owner)) // log, sum, keep, marker
	rest, _, err := s.runSpecs(ctx, "entries", entriesScript, keys, req.Now, req.Budget.Window.IsCalendar(), func(est time.Time) []any {
		return append(s.appendSpec([]any{nowArg(req.Now)}, req.Budget.Window, est), s.box(req.Budget).id)
	})
	if err != nil {
		return nil, err
	}
	if len(rest)%2 != 0 {
		return nil, unavailable("entries", fmt.Errorf("odd script reply of %d values", len(rest)))
	}
	var out []backend.Entry
	for j := 0; j < len(rest); j += 2 {
		m, ok := rest[j].(string)
		at, err := num(rest[j+1])
		// NONCE:COST, or NONCE:h:COST for a held entry (a nonce holds no ':')
		n, i := strings.IndexByte(m, ':'), strings.LastIndexByte(m, ':')
		if !ok || err != nil || i < 0 {
			return nil, unavailable("entries", fmt.Errorf("bad log entry %v at %v", rest[j], rest[j+1]))
		}
		cost, err := strconv.ParseInt(m[i+1:], 10, 64)
		if err != nil {
			return nil, unavailable("entries", fmt.Errorf("bad log entry %q: %v", m, err))
		}
		out = append(out, backend.Entry{At: time.UnixMicro(at), Cost: cost, Nonce: m[:n]})
	}
	return out, nil
}
