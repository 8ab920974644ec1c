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

// quotaTake is a Limiter.Take on store for a credential of its own.
func quotaTake(name, algo string, local bool, store quota.Store, window time.Duration) contender {
	return contender{
		name: name, algo: algo, local: local,
		setup: func(_ context.Context, id string, cost int64) (op, error) {
			lim, err := quota.New(store, "bench", quotaBudget(window))
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

// rateLimit is redis_rate's GCRA limit for limit units per window.
func rateLimit(limit int64, window time.Duration) redis_rate.Limit {
	return redis_rate.Limit{Rate: int(limit), Burst: int(limit), Period: window}
}

func redisRate(rdb *redis.Client, prefix string, window time.Duration) contender {
	l := redis_rate.NewLimiter(rdb)
	return contender{
		name: "go-redis/redis_rate AllowN",
		algo: "GCRA (leaky bucket): one timestamp, no window, no log",
		setup: func(_ context.Context, id string, cost int64) (op, error) {
			key, lim := prefix+"rate:"+id, rateLimit(1<<50, window)
			return func(ctx context.Context) (bool, error) {
				r, err := l.AllowN(ctx, key, lim, int(cost))
				if err != nil {
					return false, fmt.Errorf("bench: redis_rate: %w", err)
				}
				return r.Allowed > 0, nil
			}, nil
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
