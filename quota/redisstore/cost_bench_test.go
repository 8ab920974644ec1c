package redisstore_test

import (
	"context"
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
func commandStats(b *testing.B, c *redis.Client) (scriptCalls, scriptUsec, inner int64) {
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
// method, as the Transport's do.
//
//	go test -run '^$' -bench RedisDecisionCost -benchtime 20000x ./quota/redisstore/
func BenchmarkRedisDecisionCost(b *testing.B) {
	srv := redistest.Server(b)
	if !srv.IsReal() {
		b.Fatal("needs a redis-server on PATH: miniredis keeps no command statistics")
	}
	c := srv.Client(b)
	ctx := context.Background()
	for _, budgets := range []int{1, 2} {
		b.Run("budgets="+strconv.Itoa(budgets), func(b *testing.B) {
			bs := []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Sliding(24 * time.Hour)}}
			ch := quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 1}}
			if budgets == 2 {
				bs = append(bs, quota.Budget{Name: "search", Limit: 1 << 50, Window: quota.Daily(time.UTC)})
				ch.Units["search"] = 1
			}
			st := redisstore.New(c, redisstore.WithPrefix("cost"+strconv.Itoa(budgets)+":"))
			l, err := quota.New(st, "bench", bs)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Take(ctx, secret, ch); err != nil { // defines the budgets, loads the script
				b.Fatal(err)
			}
			calls0, usec0, inner0 := commandStats(b, c)
			for b.Loop() {
				if _, err := l.Take(ctx, secret, ch); err != nil {
					b.Fatal(err)
				}
			}
			calls, usec, inner := commandStats(b, c)
			if n := calls - calls0; n > 0 {
				b.ReportMetric(float64(usec-usec0)/float64(n), "redis-µs/decision")
				b.ReportMetric(float64(inner-inner0)/float64(n), "redis-cmds/decision")
			}
		})
	}
}
