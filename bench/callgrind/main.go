// Command callgrind counts the instructions one lone decision's script costs
// Redis: quota's take script (a daily admit, a refusal of a spent daily
// budget, a sliding 1 h admit), go-redis/redis_rate's GCRA script and a
// no-op EVALSHA, each the same way. Instruction counts do not move with the
// machine's load as Redis µs do (issue 26 measured its redesigns with it).
//
// It needs a redis-server run under callgrind that collects only inside
// evalShaCommand (the script's run, its commands included; not the read
// of the request or the write of the reply), on a port of its own:
//
//	valgrind --tool=callgrind --toggle-collect=evalShaCommand \
//	    --callgrind-out-file=/tmp/cg/out.%p redis-server --port 6441 --save ""
//	cd bench && go run ./callgrind -addr 127.0.0.1:6441 -pid PID -out /tmp/cg
//
// For each case it makes the state a decision meets in steady state (a
// limiter's decisions, whose last EVALSHA it keeps), zeroes the counters
// (callgrind_control -z), sends n EVALSHA of that call with a fresh nonce
// each, dumps (callgrind_control -d) and prints the instructions per call.
// It writes keys under its own prefix and deletes none: use a server of
// its own.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6441", "the redis-server run under callgrind")
	pid := flag.Int("pid", 0, "the valgrind process's id (callgrind_control's target)")
	out := flag.String("out", "/tmp/cg", "the directory of --callgrind-out-file")
	n := flag.Int("n", 400, "EVALSHA per case")
	flag.Parse()
	if *pid == 0 {
		log.Fatal("callgrind: -pid is required")
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	prefix := fmt.Sprintf("cg%d:", time.Now().UnixNano())

	var last []any // the last EVALSHA sent, as go-redis sends it
	rdb.AddHook(captureHook{&last})

	type result struct {
		name string
		ir   int64
	}
	var results []result
	// measureN sends n copies of call, each with fresh nonces at nonceAt,
	// and records the instructions per decision (per call, over per);
	// measure sends -n copies.
	var measureN func(name string, call []any, per, n int, nonceAt ...int)
	measure := func(name string, call []any, per int, nonceAt ...int) {
		measureN(name, call, per, *n, nonceAt...)
	}
	measureN = func(name string, call []any, per, n int, nonceAt ...int) {
		zero := exec.Command("callgrind_control", "-z", strconv.Itoa(*pid))
		if err := zero.Run(); err != nil {
			log.Fatalf("callgrind_control -z: %v", err)
		}
		for i := range n {
			args := append([]any(nil), call...)
			for j, at := range nonceAt {
				args[at] = fmt.Sprintf("cg%dx%dy%d", time.Now().UnixNano(), i, j)
			}
			if err := rdb.Do(ctx, args...).Err(); err != nil && err != redis.Nil {
				log.Fatalf("%s: %v", name, err)
			}
		}
		ir, err := dump(*pid, *out)
		if err != nil {
			log.Fatal(err)
		}
		results = append(results, result{name, ir / int64(n*per)})
	}

	for _, tc := range []struct {
		name   string
		budget quota.Budget
		spend  bool
		fleet  int // marker fields of other processes' buckets to stage
	}{
		{"quota daily admit", quota.Budget{Name: "units", Limit: 1 << 50, Window: quota.Daily(time.UTC)}, false, 0},
		{"quota sliding 1 h admit", quota.Budget{Name: "units", Limit: 1 << 50, Window: quota.Sliding(time.Hour)}, false, 0},
		{"quota spent-daily refusal", quota.Budget{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}, true, 0},
		// a marker that a fleet's processes wrote to: one w:BUCKET field each
		{"quota daily admit, the marker holding 100 processes' fields", quota.Budget{Name: "units", Limit: 1 << 50, Window: quota.Daily(time.UTC)}, false, 100},
	} {
		st := redisstore.New(rdb, redisstore.WithPrefix(prefix+strconv.Itoa(len(results))+":"), redisstore.WithoutPipelining())
		l, err := quota.New(st, "cg", []quota.Budget{tc.budget})
		if err != nil {
			log.Fatal(err)
		}
		ch := quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 1}}
		// past the first decisions of the day (they renew lifetimes), and
		// past the limit for the refusal
		for range 102 {
			if _, err := l.Take(ctx, quota.Credential{Secret: "cg-secret"}, ch); err != nil && !tc.spend {
				log.Fatal(err)
			}
		}
		call := append([]any(nil), last...)
		nkeys, _ := strconv.Atoi(fmt.Sprint(call[2]))
		mark := fmt.Sprint(call[3+nkeys-1]) // take's last key
		for i := range tc.fleet {
			// (names past the 256 a store draws from: none is this
			// process's own, whose seq it must keep)
			if err := rdb.HSet(ctx, mark, fmt.Sprintf("w:%d", 1000+i), 1).Err(); err != nil {
				log.Fatal(err)
			}
		}
		if tc.spend {
			measure(tc.name, call, 1) // a refusal records nothing
			continue
		}
		measure(tc.name, call, 1, 3+nkeys+1) // ARGV[2], NONCE
	}

	growth(ctx, rdb, prefix, &last, measureN)
	batchCase(ctx, *addr, prefix, measure)

	limiter := redis_rate.NewLimiter(rdb)
	key := prefix + "gcra"
	if _, err := limiter.AllowN(ctx, key, redis_rate.PerHour(1e6), 1); err != nil {
		log.Fatal(err)
	}
	measure("redis_rate AllowN (GCRA)", append([]any(nil), last...), 1)

	noop := redis.NewScript("return 1")
	if err := noop.Load(ctx, rdb).Err(); err != nil {
		log.Fatal(err)
	}
	measure("no-op EVALSHA", []any{"evalsha", noop.Hash(), 0}, 1)
	floors(ctx, rdb, prefix, measure)

	fmt.Printf("callgrind, instructions per EVALSHA (evalShaCommand inclusive, %d calls each):\n\n", *n)
	fmt.Println("| script | instructions |")
	fmt.Println("|---|---:|")
	for _, r := range results {
		fmt.Printf("| %s | %s |\n", r.name, group(r.ir))
	}
}

// captureHook keeps the arguments of the last EVALSHA a client sent.
type captureHook struct{ last *[]any }

func (h captureHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h captureHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "evalsha") {
			*h.last = append([]any(nil), cmd.Args()...)
		}
		return next(ctx, cmd)
	}
}
func (h captureHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// dump has callgrind write its counters and returns the instructions they
// hold (the file's totals).
func dump(pid int, dir string) (int64, error) {
	before, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("out.%d*", pid)))
	if err := exec.Command("callgrind_control", "-d", strconv.Itoa(pid)).Run(); err != nil {
		return 0, fmt.Errorf("callgrind_control -d: %w", err)
	}
	after, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("out.%d*", pid)))
	seen := map[string]bool{}
	for _, f := range before {
		seen[f] = true
	}
	var fresh []string
	for _, f := range after {
		if !seen[f] {
			fresh = append(fresh, f)
		}
	}
	if len(fresh) != 1 {
		return 0, fmt.Errorf("callgrind_control -d wrote %d files in %s", len(fresh), dir)
	}
	b, err := os.ReadFile(fresh[0])
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "totals: "); ok {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "summary: "); ok {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no totals", fresh[0])
}

// group writes n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
