package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	ulule "github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"
	"golang.org/x/time/rate"

	"github.com/quotactl/quotactl/quota"
)

// contender is one limiter in the decisions table. setup returns its
// decision at cost units on keys named by id, which no other measurement
// uses: every goroutine of one measurement charges the same key, the way
// every worker of a job charges the same credential.
type contender struct {
	name  string
	algo  string
	local bool // in-process store: no Redis round trip
	setup func(ctx context.Context, id string, cost int64) (op, error)
}

// ceilingScript is the fastest decision Redis can make: one EVALSHA of a
// script that does nothing. Every Redis limiter pays at least this.
var ceilingScript = redis.NewScript("return 1")

func ceiling(rdb redis.Scripter, prefix string) contender {
	return contender{
		name: "ceiling: no-op EVALSHA",
		algo: "`return 1`: one round trip, no work",
		setup: func(_ context.Context, id string, _ int64) (op, error) {
			keys := []string{prefix + "noop:" + id}
			return func(ctx context.Context) (bool, error) {
				return true, ceilingScript.Run(ctx, rdb, keys).Err()
			}, nil
		},
	}
}

// quotaBudget is the budget the decision measurements charge: a limit no
// measurement reaches, so every decision is an admission that records an
// entry, over a short sliding window so that in steady state each decision
// also expires about one entry.
func quotaBudget(window time.Duration) []quota.Budget {
	return []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Sliding(window)}}
}

// dailyBudget is quotaBudget's daily twin: the YouTube case, a daily
// budget no measurement spends, decided from its running sum.
var dailyBudget = []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Daily(time.UTC)}}

// quotaTake is a Limiter.Take on store of budgets, for a credential of its
// own, the limiter made with opts.
func quotaTake(name, algo string, local bool, store quota.Store, budgets []quota.Budget, opts ...quota.Option) contender {
	return contender{
		name: name, algo: algo, local: local,
		setup: func(_ context.Context, id string, cost int64) (op, error) {
			api := "bench-sliding" // one definition per API: a program defines it one way
			if budgets[0].Window.IsDaily() {
				api = "bench-daily"
			}
			lim, err := quota.New(store, api, budgets, opts...)
			if err != nil {
				return nil, err
			}
			return takeOp(lim, quota.Credential{Secret: "bench-secret-" + id, Label: id}, quota.Units("units", cost)), nil
		},
	}
}

// takeOp is one Take: refused on ErrExhausted, any other error fails.
func takeOp(lim *quota.Limiter, cred quota.Credential, ch quota.Charge) op {
	return func(ctx context.Context) (bool, error) {
		_, err := lim.Take(ctx, cred, ch)
		if errors.Is(err, quota.ErrExhausted) {
			return false, nil
		}
		return err == nil, err
	}
}

func perUnit(rdb redis.Scripter, prefix string, window time.Duration) contender {
	return contender{
		name: "per-unit sorted-set log (recipe)",
		algo: "sliding log, one member per unit: ZREMRANGEBYSCORE, ZCARD, ZADD ×cost",
		setup: func(_ context.Context, id string, cost int64) (op, error) {
			p := newPerUnitLog(rdb, prefix+"perunit:"+id, window, 1<<50)
			return func(ctx context.Context) (bool, error) {
				ok, _, err := p.take(ctx, cost)
				return ok, err
			}, nil
		},
	}
}

// rateOp is one redis_rate AllowN of cost on key.
func rateOp(l *redis_rate.Limiter, key string, lim redis_rate.Limit, cost int64) op {
	return func(ctx context.Context) (bool, error) {
		r, err := l.AllowN(ctx, key, lim, int(cost))
		if err != nil {
			return false, fmt.Errorf("bench: redis_rate: %w", err)
		}
		return r.Allowed > 0, nil
	}
}

// rateLimit is redis_rate's GCRA limit for limit units per window.
func rateLimit(limit int64, window time.Duration) redis_rate.Limit {
	return redis_rate.Limit{Rate: int(limit), Burst: int(limit), Period: window}
}

// realisticRate is the decisions per second redis_rate is given in the
// decisions tables: 1e6/s (1e6·cost units per second). No run reaches it,
// yet each decision moves GCRA's stored timestamp by 1 µs, so every call
// writes, as it does in real use. (At a rate of 1<<50 per second the
// timestamp never moves and redis_rate only reads: TIME and GET.)
const realisticRate = 1_000_000

func redisRate(rdb *redis.Client, prefix string, window time.Duration) contender {
	l := redis_rate.NewLimiter(rdb)
	return contender{
		name: "go-redis/redis_rate AllowN",
		algo: "GCRA (leaky bucket): one timestamp, no window, no log",
		setup: func(_ context.Context, id string, cost int64) (op, error) {
			key, lim := prefix+"rate:"+id, rateLimit(int64(realisticRate*window.Seconds())*cost, window)
			return rateOp(l, key, lim, cost), nil
		},
	}
}

// ululeLimiter is a ulule/limiter Limiter of limit units per window on
// Redis, its keys under prefix.
func ululeLimiter(rdb *redis.Client, prefix string, limit int64, window time.Duration) (*ulule.Limiter, error) {
	store, err := ulredis.NewStoreWithOptions(rdb, ulule.StoreOptions{Prefix: prefix + "ulule"})
	if err != nil {
		return nil, fmt.Errorf("bench: ulule store: %w", err)
	}
	return ulule.New(store, ulule.Rate{Period: window, Limit: limit}), nil
}

func ululeIncr(rdb *redis.Client, prefix string, window time.Duration) contender {
	return contender{
		name: "ulule/limiter Increment",
		algo: "fixed window counter (INCRBY + PEXPIRE): not sliding, bursts at the boundary",
		setup: func(_ context.Context, id string, cost int64) (op, error) {
			l, err := ululeLimiter(rdb, prefix, 1<<50, window)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) (bool, error) {
				c, err := l.Increment(ctx, id, cost)
				if err != nil {
					return false, fmt.Errorf("bench: ulule: %w", err)
				}
				return !c.Reached, nil
			}, nil
		},
	}
}

// quotaLeased is a Limiter.Take on store with leases of block units (0:
// adaptive), for a credential of its own.
func quotaLeased(name, algo string, store quota.Store, window time.Duration, block int64) contender {
	return contender{
		name: name, algo: algo,
		setup: func(_ context.Context, id string, cost int64) (op, error) {
			lim, err := quota.New(store, "bench-sliding", quotaBudget(window), quota.WithLeases(quota.LeaseOptions{Block: block}))
			if err != nil {
				return nil, err
			}
			return takeOp(lim, quota.Credential{Secret: "bench-secret-" + id, Label: id}, quota.Units("units", cost)), nil
		},
	}
}

// xrate is golang.org/x/time/rate's AllowN in process: a token bucket in
// memory, shared by nothing, at a rate no run reaches.
func xrate() contender {
	return contender{
		name:  "x/time/rate AllowN (in process)",
		algo:  "token bucket in process memory: no store, no log",
		local: true,
		setup: func(_ context.Context, _ string, cost int64) (op, error) {
			l := rate.NewLimiter(rate.Limit(1e12), 1<<40)
			return func(context.Context) (bool, error) {
				return l.AllowN(time.Now(), int(cost)), nil
			}, nil
		},
	}
}

// spentDaily is the budget of the refuse-heavy phase: a daily budget that
// setup spends whole before the measurement, so every decision is refused
// until midnight UTC.
var spentDaily = []quota.Budget{{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}}

// quotaSpent is Limiter.Take on a spent daily budget, with opts.
func quotaSpent(name, algo string, store quota.Store, opts ...quota.Option) contender {
	return contender{
		name: name, algo: algo,
		setup: func(ctx context.Context, id string, cost int64) (op, error) {
			lim, err := quota.New(store, "bench-spent", spentDaily, opts...)
			if err != nil {
				return nil, err
			}
			cred := quota.Credential{Secret: "bench-spent-" + id, Label: id}
			if _, err := lim.Take(ctx, cred, quota.Units("units", spentDaily[0].Limit)); err != nil {
				return nil, fmt.Errorf("spend the day: %w", err)
			}
			return takeOp(lim, cred, quota.Units("units", cost)), nil
		},
	}
}

// redisRateSpent is redis_rate with its burst spent: 100 a day, all taken.
func redisRateSpent(rdb *redis.Client, prefix string) contender {
	l := redis_rate.NewLimiter(rdb)
	return contender{
		name: "go-redis/redis_rate AllowN",
		algo: "GCRA, burst spent: a refusal reads the timestamp and writes nothing",
		setup: func(ctx context.Context, id string, cost int64) (op, error) {
			key, lim := prefix+"rate:spent:"+id, rateLimit(100, 24*time.Hour)
			if r, err := l.AllowN(ctx, key, lim, 100); err != nil || r.Allowed != 100 {
				return nil, fmt.Errorf("bench: redis_rate: spend the day: %v, %v", r, err)
			}
			return rateOp(l, key, lim, cost), nil
		},
	}
}
