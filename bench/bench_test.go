package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestPerUnitLog checks the baseline recipe is an exact sliding log with one
// member per unit, on miniredis, whose clock is what the script's TIME
// returns.
func TestPerUnitLog(t *testing.T) {
	m := miniredis.RunT(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m.SetTime(t0)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	p := newPerUnitLog(rdb, "log", time.Minute, 10)

	steps := []struct {
		at   time.Duration
		cost int64
		ok   bool
		used int64
	}{
		{0, 4, true, 4},
		{10 * time.Second, 4, true, 8},
		{20 * time.Second, 4, false, 8}, // 12 > 10: refused, nothing recorded
		{30 * time.Second, 2, true, 10},
		{59 * time.Second, 1, false, 10},
		{time.Minute, 4, true, 10}, // the first 4 left the window at t0+1m
		{time.Minute + 10*time.Second, 1, true, 7},
	}
	for i, s := range steps {
		m.SetTime(t0.Add(s.at))
		ok, used, err := p.take(ctx, s.cost)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if ok != s.ok || used != s.used {
			t.Errorf("step %d (t0+%v, cost %d): admitted %v used %d, want %v %d", i, s.at, s.cost, ok, used, s.ok, s.used)
		}
	}
	if n := rdb.ZCard(ctx, "log").Val(); n != 7 {
		t.Errorf("ZCARD = %d, want 7: one member per unit in the window", n)
	}
}

func TestParseScriptStats(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_ping:calls=5,usec=13,usec_per_call=2.60,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=1000,usec=45000,usec_per_call=45.00,rejected_calls=0,failed_calls=2\r\n" +
		"cmdstat_eval:calls=3,usec=300,usec_per_call=100.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_zadd:calls=1000,usec=2000,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n"
	if got, want := parseScriptStats(info), (scriptStats{calls: 1003, usec: 45300}); got != want {
		t.Errorf("parseScriptStats = %+v, want %+v (EVALSHA and EVAL only: the commands scripts call are inside their time)", got, want)
	}
}

// realRedis returns a client of $REDIS_URL or of a redis-server started
// for the test. A Redis is required: MEMORY USAGE and the other limiters'
// scripts need a real server, so there is no miniredis fallback and no skip.
func realRedis(t *testing.T) *redis.Client {
	t.Helper()
	srv, err := connect(os.Getenv("REDIS_URL"))
	if err != nil {
		t.Fatalf("this test needs a real Redis: %v", err)
	}
	t.Cleanup(srv.close)
	rdb := srv.client(8)
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("ping %s: %v", srv.addr, err)
	}
	return rdb
}

// TestBench runs every measurement, briefly, against a real Redis and
// checks what the report says: every row measured, no refusal where none is
// due, the full window refusing every decision, the saturated day's exact
// counts and the per-unit log's memory, and the run's keys deleted.
func TestBench(t *testing.T) {
	rdb := realRedis(t)
	ctx := t.Context()
	cfg := config{
		dur: 30 * time.Millisecond, warmup: 5 * time.Millisecond, rounds: 2,
		goroutines: []int{1, 4}, window: time.Second, fills: []int{10, 300}, count: 40,
	}
	var progress bytes.Buffer
	rep, err := bench(ctx, cfg, rdb, &progress)
	if err != nil {
		t.Fatalf("bench: %v\nprogress:\n%s", err, progress.String())
	}

	// 2 goroutine counts × (ceiling + 10 limiters × 2 costs); 2 × 3 in-process limiters × 2 costs;
	// 2 × (ceiling + 3 limiters) refusing
	if len(rep.decisions) != 42 || len(rep.local) != 12 || len(rep.refuse) != 10 {
		t.Fatalf("%d Redis rows, %d local rows, %d refusing rows; want 42, 12 and 10", len(rep.decisions), len(rep.local), len(rep.refuse))
	}
	localRefusals := 0
	for _, r := range rep.refuse {
		if r.ceiling == nil || r.ceiling.goroutines != r.s.goroutines {
			t.Errorf("%s g %d: ceiling %+v, want the one at the same goroutine count", r.name, r.s.goroutines, r.ceiling)
		}
		if r.name != "ceiling: no-op EVALSHA" && (r.s.ops == 0 || r.s.refused != r.s.ops) {
			t.Errorf("%s g %d on a spent budget: %d ops, %d refused", r.name, r.s.goroutines, r.s.ops, r.s.refused)
		}
		if strings.Contains(r.name, "local refusals") {
			localRefusals++
			// one store call per second at most: these rounds last 30ms
			if r.s.serverCalls > 2 {
				t.Errorf("%s g %d: %d script runs for %d local refusals", r.name, r.s.goroutines, r.s.serverCalls, r.s.ops)
			}
		}
	}
	if localRefusals != 2 {
		t.Errorf("%d local-refusal rows, want 2", localRefusals)
	}
	for _, r := range append(append([]row{}, rep.decisions...), rep.local...) {
		if r.s.ops == 0 || r.s.perSecond() <= 0 || len(r.s.rates) != 2 {
			t.Errorf("%s cost %d g %d: %d ops, %v/s, %d rounds", r.name, r.cost, r.s.goroutines, r.s.ops, r.s.perSecond(), len(r.s.rates))
		}
		if r.s.refused != 0 {
			t.Errorf("%s cost %d g %d: %d refused under a limit no run reaches", r.name, r.cost, r.s.goroutines, r.s.refused)
		}
		if r.ceiling == nil || r.ceiling.goroutines != r.s.goroutines {
			t.Errorf("%s g %d: ceiling %+v, want the one at the same goroutine count", r.name, r.s.goroutines, r.ceiling)
		}
		if local := slices.Contains(rep.local, r); local != (r.s.serverUsec < 0) {
			t.Errorf("%s: server time %d µs: want it measured for Redis rows only", r.name, r.s.serverUsec)
		}
		if r.s.clientCPU <= 0 && processCPU() >= 0 {
			t.Errorf("%s: client CPU %v for %d decisions", r.name, r.s.clientCPU, r.s.ops)
		}
		// (a lease admits many decisions per script run, and so does the
		// default store: batch.lua decides the decisions of one budget
		// that wait together; a store without pipelining runs one each)
		if r.s.serverUsec >= 0 && r.s.serverCalls < r.s.ops && (strings.Contains(r.name, "one script each") || strings.Contains(r.name, "ceiling")) {
			t.Errorf("%s: Redis counted %d script runs for %d decisions", r.name, r.s.serverCalls, r.s.ops)
		}
		if r.s.percentile(50) > r.s.percentile(99) {
			t.Errorf("%s: p50 %v > p99 %v", r.name, r.s.percentile(50), r.s.percentile(99))
		}
	}

	if len(rep.window) != 4 {
		t.Fatalf("%d window rows, want 4", len(rep.window))
	}
	for i, r := range rep.window {
		wantRefused := int64(0)
		if i%2 == 1 {
			wantRefused = 40
		}
		if r.s.ops != 40 || r.s.refused != wantRefused {
			t.Errorf("%s (%s): %d ops, %d refused; want 40, %d", r.name, r.algo, r.s.ops, r.s.refused, wantRefused)
		}
	}

	byName := map[string]memRow{}
	for _, m := range rep.memory {
		byName[m.name] = m
	}
	q, pu := byName["quota redisstore"], byName["per-unit sorted-set log (recipe)"]
	if q.entries != dayCalls || q.admitted != dayCalls || q.bytes <= 0 {
		t.Errorf("quota day: %+v, want %d entries and calls admitted", q, dayCalls)
	}
	if pu.entries != dayLimit || pu.admitted != dayCalls {
		t.Errorf("per-unit day: %+v, want %d members, %d calls admitted", pu, dayLimit, dayCalls)
	}
	if pu.bytes < 10*q.bytes {
		t.Errorf("per-unit log %d B, quota %d B: want the per-unit log at least 10× larger", pu.bytes, q.bytes)
	}
	for _, name := range []string{"go-redis/redis_rate", "ulule/limiter", "quota redisstore, catalog (once per store)"} {
		if m, ok := byName[name]; !ok || m.bytes <= 0 || m.keys == 0 {
			t.Errorf("%s: %+v, want keys measured", name, m)
		}
	}

	for _, pattern := range []string{rep.prefix + "*", "rate:" + rep.prefix + "*"} {
		left, err := scanKeys(context.Background(), rdb, pattern)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("%d keys matching %q left behind, e.g. %q", len(left), pattern, left[0])
		}
	}

	var md bytes.Buffer
	if err := rep.markdown(&md, "test"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| Limiter | Algorithm | Cost | Goroutines | Decisions/s | vs ceiling |",
		"| ceiling: no-op EVALSHA |", "| quota redisstore Take |", "| per-unit sorted-set log (recipe) |",
		"| go-redis/redis_rate AllowN |", "| ulule/limiter Increment |", "fixed window",
		"| quota MemoryStore Take |", "| quota sqlitestore Take |", "| x/time/rate AllowN (in process) |",
		"| quota redisstore Take, leases B=100 |", "| quota redisstore Take, daily |", "| quota redisstore Take, local refusals |", "Refuse-heavy phase",
		"| 300 entries in window |", "| per-unit sorted-set log (recipe) | sliding log: one member per unit | 1 | 9,500 |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}
