package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// BenchmarkReplicas measures what redisstore.WithReplicas(1) costs: a quota
// Take (cost 1, one credential, a sliding second) whose decision is
// followed, in the same round trip, by WAIT 1, against a master with one
// real replica on loopback; and the same Take without WAIT on the same
// master. It needs redis-server on PATH (a benchmark of replication cannot
// run on anything else). Run it alone:
//
//	cd bench && go test -run '^$' -bench Replicas -benchtime 2s -count 3
func BenchmarkReplicas(b *testing.B) {
	ctx := context.Background()
	start := func(extra ...string) *server {
		b.Helper()
		dir, err := os.MkdirTemp("", "quotactl-bench-replicas-")
		if err != nil {
			b.Fatal(err)
		}
		var s *server
		for range 5 {
			if s, err = launch(dir, extra...); err == nil {
				break
			}
		}
		if err != nil {
			b.Fatalf("this benchmark needs redis-server on PATH: %v", err)
		}
		b.Cleanup(s.close)
		return s
	}
	master := start()
	port := strings.TrimPrefix(master.addr, "127.0.0.1:")
	replica := start("--replicaof", "127.0.0.1", port)
	rc := replica.client(1)
	defer rc.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("replica never synced: %q %v", info, err)
		}
		t := time.NewTimer(10 * time.Millisecond)
		<-t.C
	}
	for _, n := range []int{0, 1} {
		for _, g := range []int{1, 64} {
			b.Run("replicas="+strconv.Itoa(n)+"/goroutines="+strconv.Itoa(g), func(b *testing.B) {
				rdb := master.client(g)
				defer rdb.Close()
				opts := []redisstore.Option{redisstore.WithPrefix(fmt.Sprintf("qbench:wait:%d:%d:", n, g))}
				if n > 0 {
					opts = append(opts, redisstore.WithReplicas(n, time.Second))
				}
				st, err := redisstore.Open(ctx, rdb, opts...)
				if err != nil {
					b.Fatal(err)
				}
				lim, err := quota.New(st, "bench", []quota.Budget{{Name: "units", Limit: 1 << 40, Window: quota.Sliding(time.Second)}})
				if err != nil {
					b.Fatal(err)
				}
				cred := quota.Credential{Secret: "bench-replicas-key"}
				ch := quota.Units("units", 1)
				if _, err := lim.Take(ctx, cred, ch); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				if g == 1 {
					for b.Loop() {
						if _, err := lim.Take(ctx, cred, ch); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := lim.Take(ctx, cred, ch); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			})
		}
	}
}
