package redisstore_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

var noop = redis.NewScript("return 1")

// BenchmarkRedis measures Limiter.Take on the shared Redis (Redis TIME, no
// injected clock) at cost 1 and 100, serially and from 64 goroutines, next
// to a no-op EVALSHA through the same client: the ceiling for one script
// call per decision.
//
//	go test -run '^$' -bench Redis -benchtime 2s ./quota/redisstore/
func BenchmarkRedis(b *testing.B) {
	c := redistest.Client(b)
	kind, addr := redistest.Shared(b)
	b.Logf("Redis: %s at %s, GOMAXPROCS %d", kind, addr, runtime.GOMAXPROCS(0))
	ctx := context.Background()
	procs := runtime.GOMAXPROCS(0)
	par := (64 + procs - 1) / procs // goroutines per P, for 64 in all

	run := 0
	newLimiter := func(b *testing.B) *quota.Limiter {
		run++
		st := redisstore.New(c, redisstore.WithPrefix(fmt.Sprintf("%s%d:", redistest.Prefix(b), run)))
		l, err := quota.New(st, "bench", []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Sliding(24 * time.Hour)}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Take(ctx, secret, quota.Units("units", 1)); err != nil { // defines the budget, loads the script
			b.Fatal(err)
		}
		return l
	}
	if err := noop.Run(ctx, c, nil).Err(); err != nil {
		b.Fatal(err)
	}

	for _, mode := range []string{"serial", "parallel64"} {
		b.Run("noop-evalsha/"+mode, func(b *testing.B) {
			b.ReportAllocs()
			if mode == "serial" {
				for b.Loop() {
					if err := noop.Run(ctx, c, nil).Err(); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := noop.Run(ctx, c, nil).Err(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		for _, cost := range []int64{1, 100} {
			b.Run(fmt.Sprintf("take-cost%d/%s", cost, mode), func(b *testing.B) {
				l := newLimiter(b)
				ch := quota.Units("units", cost)
				b.ReportAllocs()
				if mode == "serial" {
					for b.Loop() {
						if _, err := l.Take(ctx, secret, ch); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.SetParallelism(par)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := l.Take(ctx, secret, ch); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
