package main

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// growth measures what a lone decision costs as the state it meets grows
// with use rather than with the script (issue 26): a sliding log small
// enough that Redis keeps it a listpack (zset-max-listpack-entries, 128 by
// default: each ZADD then scans it) against one past that, and a daily
// admit whose hour's breakdown hash holds a row per method and job (61
// here) against one of a single row, each over the same 100 calls. last is the last EVALSHA a limiter
// sent (captureHook's).
func growth(ctx context.Context, rdb *redis.Client, prefix string, last *[]any, measureN func(string, []any, int, int, ...int)) {
	sliding := quota.Budget{Name: "units", Limit: 1 << 50, Window: quota.Sliding(time.Hour)}
	daily := quota.Budget{Name: "units", Limit: 1 << 50, Window: quota.Daily(time.UTC)}
	for _, tc := range []struct {
		name    string
		budget  quota.Budget
		methods int // distinct methods charged first: one breakdown row each
		entries int // entries in the log before the measured calls
		n       int // measured calls (each adds an entry)
	}{
		{"quota sliding 1 h admit, a log of 20 to 120 entries (a listpack)", sliding, 0, 20, 100},
		{"quota sliding 1 h admit, a log of 200 to 300 entries (a skiplist)", sliding, 0, 200, 100},
		{"quota daily admit, the hour's breakdown holding 1 row", daily, 0, 102, 100},
		{"quota daily admit, the hour's breakdown holding 61 rows", daily, 60, 102, 100},
	} {
		st := redisstore.New(rdb, redisstore.WithPrefix(prefix+"growth"+strconv.Itoa(len(tc.name)+tc.entries+tc.methods)+":"), redisstore.WithoutPipelining())
		l, err := quota.New(st, "cg", []quota.Budget{tc.budget})
		if err != nil {
			log.Fatal(err)
		}
		cred := quota.Credential{Secret: "cg-secret"}
		for i := range tc.methods {
			ch := quota.Charge{Method: fmt.Sprintf("videos.m%02d", i), Units: map[string]int64{"units": 1}}
			if _, err := l.Take(ctx, cred, ch); err != nil {
				log.Fatal(err)
			}
		}
		ch := quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 1}}
		for range tc.entries - tc.methods {
			if _, err := l.Take(ctx, cred, ch); err != nil {
				log.Fatal(err)
			}
		}
		call := append([]any(nil), (*last)...)
		nkeys, _ := strconv.Atoi(fmt.Sprint(call[2]))
		measureN(tc.name, call, 1, tc.n, 3+nkeys+1) // ARGV[2], NONCE
	}
}
