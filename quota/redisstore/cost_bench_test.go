package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// commandStats sums INFO commandstats: the calls and µs of the script
// commands (EVALSHA, EVAL: the whole script, the commands it runs
// included), and the calls of every other command (those the scripts ran).
func commandStats(b testing.TB, c *redis.Client) (scriptCalls, scriptUsec, inner int64) {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls, usec int64
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls = n
			case "usec":
				usec = n
			}
		}
		switch name {
		case "cmdstat_evalsha", "cmdstat_eval":
			scriptCalls += calls
			scriptUsec += usec
		case "cmdstat_info", "cmdstat_script", "cmdstat_hello", "cmdstat_client", "cmdstat_ping":
		default:
			inner += calls
		}
	}
	return
}

// BenchmarkRedisDecisionCost measures what one decision costs Redis itself,
// on a redis-server of the benchmark's own (so nothing else runs on it):
// the µs Redis spent in the take script per decision, and the commands
// the script ran per decision, from INFO commandstats. The charge names a
// method, as the Transport's do. The cases are the paths issue 13 sets
// targets for: a daily budget admitting, a spent daily budget refusing,
// a sliding budget admitting (a 1s window, so in steady state each
// admission also expires an entry), and a charge of two budgets; the first
// three again with decide skipped (take.lua's general path alone, what
// decide saves); and a no-op script (`return 1`) for scale. Each runs from one client (Redis
// idles between calls, so each call finds its caches cold: the way issue
// 13 timed scripts alone) and from 8 (Redis busy, as under bench/'s 64
// goroutines): the same script costs about twice as much in the first.
// With 8 clients the store pipelines (the default), so decisions of one
// budget that wait together are decided by one run of batch.lua; the
// clients=8-alone cases send each decision alone (WithoutPipelining), one
// take script each. Figures are per decision.
//
//	go test -run '^$' -bench RedisDecisionCost -benchtime 20000x ./quota/redisstore/
func BenchmarkRedisDecisionCost(b *testing.B) {
	srv := redistest.Server(b)
	if !srv.IsReal() {
		b.Fatal("needs a redis-server on PATH: miniredis keeps no command statistics")
	}
	c := srv.Client(b)
	ctx := context.Background()
	noop := redis.NewScript("return 1")
	run := 0 // the runner calls each case more than once: a fresh prefix each
	for _, tc := range []struct {
		name    string
		budget  []quota.Budget
		units   map[string]int64
		refuse  bool
		general bool
	}{
		{"noop", nil, nil, false, false},
		{"daily-admit", []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Daily(time.UTC)}}, map[string]int64{"units": 1}, false, false},
		{"general-daily-admit", []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Daily(time.UTC)}}, map[string]int64{"units": 1}, false, true},
		{"daily-refuse", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}}, map[string]int64{"units": 1}, true, false},
		{"general-daily-refuse", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}}, map[string]int64{"units": 1}, true, true},
		{"sliding-admit", []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Sliding(time.Second)}}, map[string]int64{"units": 1}, false, false},
		{"general-sliding-admit", []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Sliding(time.Second)}}, map[string]int64{"units": 1}, false, true},
		{"sliding-refuse", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}}, map[string]int64{"units": 1}, true, false},
		{"two-budgets-admit", []quota.Budget{
			{Name: "units", Limit: 1 << 50, Window: quota.Sliding(24 * time.Hour)},
			{Name: "search", Limit: 1 << 50, Window: quota.Daily(time.UTC)},
		}, map[string]int64{"units": 1, "search": 1}, false, false},
	} {
		for _, cl := range []struct {
			clients int
			alone   bool
		}{{1, false}, {8, true}, {8, false}} {
			clients := cl.clients
			name := fmt.Sprintf("%s/clients=%d", tc.name, clients)
			if cl.alone {
				name += "-alone"
			}
			b.Run(name, func(b *testing.B) {
				decide := func() error { return noop.Run(ctx, c, nil).Err() }
				if tc.budget != nil {
					ch := quota.Charge{Method: "videos.list", Units: tc.units}
					run++
					opts := []redisstore.Option{redisstore.WithPrefix(fmt.Sprintf("cost%d-%s:", run, tc.name))}
					if cl.alone {
						opts = append(opts, redisstore.WithoutPipelining())
					}
					st := redisstore.New(c, opts...)
					if tc.general {
						redisstore.GeneralOnly(st)
					}
					l, err := quota.New(st, "bench", tc.budget)
					if err != nil {
						b.Fatal(err)
					}
					decide = func() error {
						_, err := l.Take(ctx, secret, ch)
						if tc.refuse != errors.Is(err, quota.ErrExhausted) {
							return fmt.Errorf("refuse=%v, got %v", tc.refuse, err)
						}
						return nil
					}
					// defines the budgets, loads the script; a refusing case
					// spends its budget first
					for n := 0; n == 0 || tc.refuse && n < 100; n++ {
						if _, err := l.Take(ctx, secret, ch); err != nil {
							b.Fatal(err)
						}
					}
				} else if err := decide(); err != nil {
					b.Fatal(err)
				}
				calls0, usec0, inner0 := commandStats(b, c)
				if clients == 1 {
					for b.Loop() {
						if err := decide(); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := decide(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				calls, usec, inner := commandStats(b, c)
				if n := float64(b.N); calls > calls0 {
					// per decision, not per script run: batch.lua decides
					// several in one
					b.ReportMetric(float64(usec-usec0)/n, "redis-µs/decision")
					b.ReportMetric(float64(inner-inner0)/n, "redis-cmds/decision")
					b.ReportMetric(n/float64(calls-calls0), "decisions/script")
				}
			})
		}
	}
}
