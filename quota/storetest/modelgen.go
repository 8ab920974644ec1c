package storetest

import (
	"math/rand/v2"
	"time"
)

// The generator of MatchesModel's runs: random operations drawn for the
// model's state (what is left of a budget, the reservations it admitted,
// how far the clock may step back).

// genModelCase generates a run of steps operations from seed; margin as
// in modelSim.
func genModelCase(budgets []modelBudget, seed uint64, steps int, margin time.Duration) ModelCase {
	rng := rand.New(rand.NewPCG(seed, 0x6d6f64656c))
	start := modelStarts[seed%uint64(len(modelStarts))].
		Add(time.Duration(rng.Int64N(int64(time.Hour))) - 30*time.Minute).Truncate(time.Microsecond)
	if rng.IntN(3) == 0 {
		start = start.Add(time.Duration(rng.IntN(1000))) // the Limiter truncates the clock
	}
	s := newModelSim(budgets, start)
	s.margin = margin
	s.now = s.clear(start)
	c := ModelCase{Start: s.now}
	for i := range steps {
		op := s.gen(rng, i+1)
		s.apply(op)
		c.Ops = append(c.Ops, op)
	}
	return c
}

// nextChange returns the first instant after t at which something the
// model holds changes: a local midnight of a daily budget's zone (of a
// 1st, a monthly budget's), a live
// entry's expiry, a mark's end.
func (s *modelSim) nextChange(t time.Time) time.Time {
	var next time.Time
	note := func(x time.Time) {
		if x.After(t) && (next.IsZero() || x.Before(next)) {
			next = x
		}
	}
	for b, bd := range s.budgets {
		if bd.calendar() {
			note(bd.period(t, 1))
		}
		for cred := range s.m.logs {
			lg := &s.m.logs[cred][b]
			note(lg.exh)
			for _, e := range lg.entries {
				if e.live() {
					note(bd.expiry(e.at))
				}
			}
		}
	}
	return next
}

// clear returns t, or with a margin, the first instant from t on that is
// not within margin before a change (nextChange): the change itself, where
// what it ends has ended.
func (s *modelSim) clear(t time.Time) time.Time {
	for range 100 {
		x := s.nextChange(t.Truncate(time.Microsecond))
		if s.margin <= 0 || x.IsZero() || x.Sub(t) >= s.margin {
			return t
		}
		t = x
	}
	return t
}

// gen returns a random operation for the model's state.
func (s *modelSim) gen(rng *rand.Rand, id int) ModelOp {
	cred := rng.IntN(len(modelCreds))
	budget := s.budgets[rng.IntN(len(s.budgets))]
	switch p := rng.IntN(100); {
	case p < 44:
		op := ModelOp{Kind: OpTake, Cred: cred, ID: id, Units: s.genCharge(rng, cred)}
		if rng.IntN(4) == 0 {
			op.Kind, op.ID = OpAllow, 0
		}
		return op
	case p < 53 && len(s.resIDs) > 0:
		return ModelOp{Kind: OpRefund, Res: s.pickRes(rng), ByID: rng.IntN(5) == 0}
	case p < 61 && len(s.resIDs) > 0:
		res := s.pickRes(rng)
		cs := s.m.res[res]
		units := map[string]int64{}
		for i, c := range cs {
			if len(cs) > 1 && i > 0 && rng.IntN(2) == 0 {
				continue // Limiter.Settle names some of the budgets
			}
			cost := max(c.e.cost, 1)
			var n int64
			switch q := rng.IntN(20); {
			case q < 2:
				n = 0
			case q < 12 && cost > 1:
				n = 1 + rng.Int64N(cost-1)
			case q < 17:
				n = cost
			default:
				n = cost + 1 + rng.Int64N(5)
			}
			units[s.budgets[c.b].name] = n
		}
		return ModelOp{Kind: OpSettle, Res: res, Units: units}
	case p < 66:
		op := ModelOp{Kind: OpExhaust, Cred: cred, Budget: budget.name}
		switch q := rng.IntN(10); {
		case q < 2:
			op.Clear = true
		case q < 4:
			op.D = -time.Duration(rng.Int64N(int64(time.Hour))) // in the past: clears
		default:
			// in the future, far enough that a real Redis, whose key
			// lifetimes run on its own clock, does not expire the mark
			// before the run's clock passes it
			op.D = time.Minute + time.Duration(rng.Int64N(int64(3*time.Hour)))
		}
		if rng.IntN(4) == 0 {
			op.D += time.Duration(rng.IntN(1000)) // not a whole µs
		}
		return op
	case p < 71:
		op := ModelOp{Kind: OpAdjust, Cred: cred, Budget: budget.name}
		switch q := rng.IntN(20); {
		case q < 5:
			op.N = 0
		case q < 15:
			op.N = rng.Int64N(budget.limit + 1)
		case q < 19:
			op.N = budget.limit
		default:
			op.N = budget.limit + 1 // invalid
		}
		return op
	case p < 79:
		if d := s.genBack(rng); d > 0 {
			return ModelOp{Kind: OpBack, D: d}
		}
	case p < 83:
		// concurrent identical charges of one or two budgets: on Redis,
		// decisions that wait for a lane go out in batches
		n := 2 + rng.IntN(15)
		now := s.decided()
		units := map[string]int64{}
		for _, b := range rng.Perm(len(s.budgets))[:1+rng.IntN(2)] {
			bd := s.budgets[b]
			left := bd.limit - s.m.used(cred, b, now)
			units[bd.name] = min(max(1, left/int64(1+rng.IntN(n))), bd.limit)
		}
		return ModelOp{Kind: OpBurst, Cred: cred, ID: id, Units: units, N: int64(n)}
	}
	return ModelOp{Kind: OpForward, D: s.clear(s.now.Add(s.genForward(rng, cred))).Sub(s.now)}
}

// pickRes returns an admitted reservation: most often one the model
// still counts, most often a recent one.
func (s *modelSim) pickRes(rng *rand.Rand) int {
	ids := s.resIDs
	if rng.IntN(4) > 0 {
		var live []int
		now := s.decided()
		for _, id := range ids {
			for _, c := range s.m.res[id] {
				if c.e.live() && !c.e.at.Before(s.budgets[c.b].start(now)) {
					live = append(live, id)
					break
				}
			}
		}
		if len(live) > 0 {
			ids = live
		}
	}
	n := len(ids)
	if rng.IntN(3) > 0 {
		return ids[n-1-rng.IntN(min(n, 5))]
	}
	return ids[rng.IntN(n)]
}

// genCharge returns a charge of 1 to 8 budgets, each costing 1, a random
// amount, exactly what is left, one more, the whole limit or more.
func (s *modelSim) genCharge(rng *rand.Rand, cred int) map[string]int64 {
	k := 1
	switch p := rng.IntN(100); {
	case p < 35:
	case p < 60:
		k = 2
	case p < 80:
		k = 3 + rng.IntN(2)
	default:
		k = 5 + rng.IntN(len(s.budgets)-4)
	}
	now := s.decided()
	units := map[string]int64{}
	for _, b := range rng.Perm(len(s.budgets))[:k] {
		bd := s.budgets[b]
		left := bd.limit - s.m.used(cred, b, now)
		var n int64
		switch q := rng.IntN(100); {
		case q < 25:
			n = 1
		case q < 45:
			n = 1 + rng.Int64N(max(bd.limit/4, 1))
		case q < 55:
			n = 1 + rng.Int64N(bd.limit)
		case q < 72:
			n = left
			if n <= 0 && rng.IntN(10) > 0 {
				n = 1 // a cost of 0 is an invalid charge: now and then
			}
		case q < 85:
			n = left + 1
			if n > bd.limit && rng.IntN(4) > 0 {
				n = bd.limit // over the limit: now and then
			}
		case q < 98:
			n = bd.limit
		default:
			n = bd.limit + 1 + rng.Int64N(3)
		}
		units[bd.name] = n
	}
	return units
}

// genForward returns a step forward: seconds, minutes or hours, or to an
// instant where something changes (a local midnight, a DST change, an
// entry's expiry, a mark's end, the last refusal's RetryAt) or a µs or a
// second either side of it.
func (s *modelSim) genForward(rng *rand.Rand, cred int) time.Duration {
	switch p := rng.IntN(100); {
	case p < 35:
		return time.Duration(1+rng.IntN(59))*time.Second + time.Duration(rng.IntN(1e6))*time.Microsecond
	case p < 62:
		return time.Duration(1+rng.IntN(59))*time.Minute + time.Duration(rng.Int64N(int64(time.Minute)))
	case p < 70:
		return time.Duration(1+rng.IntN(30))*time.Hour + time.Duration(rng.Int64N(int64(time.Hour)))
	}
	now := s.decided()
	var targets []time.Time
	for b, bd := range s.budgets {
		if bd.calendar() {
			// (a month's end only when near: a run that jumped a month
			// at a time would leave the day and DST changes it starts
			// near)
			if next := bd.period(now, 1); !bd.month || next.Sub(now) < 48*time.Hour {
				targets = append(targets, next)
			}
			if _, end := now.In(bd.loc).ZoneBounds(); !end.IsZero() && end.Sub(now) < 48*time.Hour {
				targets = append(targets, end)
			}
		} else if u := s.m.usage(cred, b, now); !u.reset.IsZero() {
			targets = append(targets, u.reset)
		}
		if x := s.m.mark(cred, b, now); !x.IsZero() {
			targets = append(targets, x)
		}
	}
	if s.retry.After(now) {
		targets = append(targets, s.retry)
		if s.retry.Sub(now) < 48*time.Hour {
			// (a far one, a monthly budget's 1st, now and then only)
			targets = append(targets, s.retry, s.retry)
		}
	}
	at := targets[rng.IntN(len(targets))]
	at = at.Add([]time.Duration{-time.Second, -time.Microsecond, 0, 0, time.Microsecond}[rng.IntN(5)])
	if d := at.Sub(s.now); d > 0 {
		return d
	}
	return time.Duration(1+rng.IntN(59)) * time.Second
}

// genBack returns a step back of seconds to minutes within the rule of
// model.backFloor (at most back to the floor itself), or 0 when the rule
// allows none.
func (s *modelSim) genBack(rng *rand.Rand) time.Duration {
	room := s.now.Sub(s.m.backFloor())
	if room <= 0 {
		return 0
	}
	d := time.Duration(1+rng.IntN(59))*time.Second + time.Duration(rng.IntN(1e6))*time.Microsecond
	if rng.IntN(2) == 0 {
		d = time.Duration(1+rng.IntN(15))*time.Minute + time.Duration(rng.Int64N(int64(time.Minute)))
	}
	d = min(d, room)
	if s.clear(s.now.Add(-d)) != s.now.Add(-d) {
		return 0 // within the margin before a change
	}
	return d
}
