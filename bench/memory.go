package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // Daily(America/Los_Angeles) on hosts without a zone database

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// The saturated YouTube day: 95 calls of 100 units (search.list in the
// legacy table) against 9,500 units, then one more call that must be
// refused.
const (
	dayLimit = 9500
	dayCost  = 100
	dayCalls = dayLimit / dayCost
)

// memRow is one limiter's Redis memory after the saturated day.
type memRow struct {
	name, state string
	keys        int
	bytes       int64
	entries     int64 // members of the log sorted set; 0 when there is none
	admitted    int   // of dayCalls+1 calls
}

// day spends a saturated YouTube day through each limiter on a fresh
// credential and measures the Redis memory (MEMORY USAGE ... SAMPLES 0,
// exact) of the keys it keeps for that credential.
func (r *runner) day(ctx context.Context) ([]memRow, error) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var rows []memRow

	// quota: its own store prefix, so the keys below are this day's only.
	pfx := r.prefix + "day:quota:"
	rs := redisstore.New(r.rdb, redisstore.WithPrefix(pfx))
	lim, err := quota.New(rs, "youtube", []quota.Budget{{Name: "units", Limit: dayLimit, Window: quota.Daily(la)}})
	if err != nil {
		return nil, err
	}
	cred := quota.Credential{Secret: r.prefix + "yt-api-key", Label: "yt-key-1"}
	admitted, err := spend(func() (bool, error) { return takeOp(lim, cred, quota.Units("units", dayCost))(ctx) })
	if err != nil {
		return nil, fmt.Errorf("bench: quota day: %w", err)
	}
	if admitted != dayCalls {
		return nil, fmt.Errorf("bench: quota day: %d of %d calls admitted, want exactly %d", admitted, dayCalls+1, dayCalls)
	}
	all, err := scanKeys(ctx, r.rdb, pfx+"*")
	if err != nil {
		return nil, err
	}
	tag := redisstore.CredentialTag("youtube", quota.DefaultFingerprint(cred.Secret))
	var credKeys, catalog []string
	var logKey string
	for _, k := range all {
		switch {
		case strings.Contains(k, tag):
			credKeys = append(credKeys, k)
			if strings.Contains(k, ":log:") {
				logKey = k
			}
		default:
			catalog = append(catalog, k)
		}
	}
	if logKey == "" {
		return nil, fmt.Errorf("bench: quota day: no log key among %v", all)
	}
	row, err := r.usage(ctx, "quota redisstore", "sliding log: one member per call (nonce:cost), running sum", credKeys, logKey)
	if err != nil {
		return nil, err
	}
	row.admitted = admitted
	rows = append(rows, row)
	row, err = r.usage(ctx, "quota redisstore, catalog (once per store)", "budget definitions, credential fingerprints and labels", catalog, "")
	if err != nil {
		return nil, err
	}
	rows = append(rows, row)

	// the per-unit recipe
	key := r.prefix + "day:perunit:yt-key-1"
	p := newPerUnitLog(r.rdb, key, 24*time.Hour, dayLimit)
	if admitted, err = spend(func() (bool, error) { ok, _, err := p.take(ctx, dayCost); return ok, err }); err != nil {
		return nil, err
	}
	if admitted != dayCalls {
		return nil, fmt.Errorf("bench: per-unit day: %d of %d calls admitted, want exactly %d", admitted, dayCalls+1, dayCalls)
	}
	if row, err = r.usage(ctx, "per-unit sorted-set log (recipe)", "sliding log: one member per unit", []string{key}, key); err != nil {
		return nil, err
	}
	row.admitted = admitted
	rows = append(rows, row)

	// redis_rate: GCRA keeps one timestamp; it admits what its arithmetic
	// admits, reported as is.
	rl := redis_rate.NewLimiter(r.rdb)
	key = r.prefix + "day:rate:yt-key-1"
	if admitted, err = spend(func() (bool, error) {
		res, err := rl.AllowN(ctx, key, rateLimit(dayLimit, 24*time.Hour), dayCost)
		if err != nil {
			return false, err
		}
		return res.Allowed > 0, nil
	}); err != nil {
		return nil, fmt.Errorf("bench: redis_rate day: %w", err)
	}
	if row, err = r.usage(ctx, "go-redis/redis_rate", "GCRA: one timestamp (no record of calls)", []string{"rate:" + key}, ""); err != nil {
		return nil, err
	}
	row.admitted = admitted
	rows = append(rows, row)

	// ulule: a fixed-window counter
	ul, err := ululeLimiter(r.rdb, r.prefix+"day:", dayLimit, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	if admitted, err = spend(func() (bool, error) {
		c, err := ul.Increment(ctx, "yt-key-1", dayCost)
		return err == nil && !c.Reached, err
	}); err != nil {
		return nil, fmt.Errorf("bench: ulule day: %w", err)
	}
	if row, err = r.usage(ctx, "ulule/limiter", "fixed window: one counter (no record of calls)", []string{r.prefix + "day:ulule:yt-key-1"}, ""); err != nil {
		return nil, err
	}
	row.admitted = admitted
	rows = append(rows, row)
	r.logf("memory after a saturated day: quota %d B, per-unit log %d B", rows[0].bytes, rows[2].bytes)
	return rows, nil
}

// spend makes dayCalls+1 calls of dayCost units and returns how many were
// admitted.
func spend(call func() (bool, error)) (int, error) {
	n := 0
	for range dayCalls + 1 {
		ok, err := call()
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// usage sums the exact MEMORY USAGE of keys; logKey, when set, is the
// sorted set whose members are counted. A key that does not exist is an
// error: the row would understate the memory.
func (r *runner) usage(ctx context.Context, name, state string, keys []string, logKey string) (memRow, error) {
	row := memRow{name: name, state: state, keys: len(keys)}
	for _, k := range keys {
		n, err := r.rdb.MemoryUsage(ctx, k, 0).Result()
		if errors.Is(err, redis.Nil) {
			return row, fmt.Errorf("bench: %s: key %q does not exist", name, k)
		}
		if err != nil {
			return row, fmt.Errorf("bench: memory usage %q: %w", k, err)
		}
		row.bytes += n
	}
	if logKey != "" {
		n, err := r.rdb.ZCard(ctx, logKey).Result()
		if err != nil {
			return row, fmt.Errorf("bench: zcard %q: %w", logKey, err)
		}
		row.entries = n
	}
	return row, nil
}
