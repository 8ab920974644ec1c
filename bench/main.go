// Command bench measures quotactl's stores side by side with other Redis
// rate limiters, in one run against one Redis, and prints the results as
// markdown tables (BENCHMARKS.md at the repository root records a run).
//
// Run it from this directory:
//
//	go run .                       # starts its own redis-server on a free loopback port
//	go run . -redis redis://127.0.0.1:6379/0
//	REDIS_URL=redis://127.0.0.1:6379/0 go run .
//
// It measures decisions per second and p50/p99 latency at 1 and 64
// goroutines for a no-op EVALSHA (the ceiling), the quota Redis store at cost
// 1 and 100, go-redis/redis_rate AllowN, ulule/limiter Increment and the
// common per-unit sorted-set log; the same for the memory and SQLite stores;
// quota's decision latency with 10 and 100,000 entries in the window; and the
// Redis memory each limiter keeps after a saturated YouTube day.
//
// On a Redis it is given, every key it writes starts with "qbench:RANDOM:"
// (redis_rate's with "rate:qbench:RANDOM:") and is deleted at the end; it
// never flushes a database. A redis-server it starts has no persistence and
// is stopped at the end.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if spec := os.Getenv(fleetEnv); spec != "" {
		code := fleetChild(ctx, spec, os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args, runs the benchmark and writes the markdown report to
// stdout and progress to stderr. It returns the exit code: 0, 1 when a
// measurement failed, 2 for bad flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	srv, err := connect(cfg.redisURL)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer srv.close()
	desc := "given by URL, " + srv.addr
	if srv.started {
		desc = "started by bench on " + srv.addr + ", --save \"\""
	}
	fmt.Fprintf(stderr, "bench: Redis %s\n", desc)
	rdb := srv.client(slicesMax(cfg.goroutines))
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		fmt.Fprintf(stderr, "bench: ping %s: %v\n", srv.addr, err)
		return 1
	}
	rep, err := bench(ctx, cfg, rdb, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	rep.command = strings.TrimSpace("cd bench && go run . " + strings.Join(args, " "))
	if err := rep.markdown(stdout, desc); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg        config
		goroutines = fs.String("goroutines", "1,64", "comma-separated goroutine counts of the decisions tables")
		fills      = fs.String("fill", "10,100000", "comma-separated entry counts in the window for the latency table")
		only       = fs.String("run", "", "measure only the limiters whose name matches this regexp (the ceiling always runs)")
		fleet      = fs.String("fleet", "1,8,32", "comma-separated process counts of the fleet table (processes of one goroutine each); \"none\": no fleet table")
	)
	fs.BoolVar(&cfg.fleetOnly, "fleet-only", false, "measure only the fleet table")
	fs.StringVar(&cfg.redisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL to measure against (default $REDIS_URL; empty: start a redis-server from PATH)")
	fs.DurationVar(&cfg.dur, "d", time.Second, "duration of each round of each decisions measurement")
	fs.IntVar(&cfg.rounds, "rounds", 3, "interleaved rounds of each decisions measurement; the table shows the median round's decisions/s")
	fs.DurationVar(&cfg.warmup, "warmup", 100*time.Millisecond, "warm-up before each round of each decisions measurement, not counted")
	fs.DurationVar(&cfg.window, "window", time.Second, "sliding window of the decisions measurements")
	fs.IntVar(&cfg.count, "count", 6000, "decisions in each phase (admitted, refused) of the window-size table, split across the rounds")
	fs.StringVar(&cfg.sqliteDir, "sqlite-dir", "", "directory for the SQLite file (default: a temporary directory)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	var err error
	if cfg.goroutines, err = intList("goroutines", *goroutines, 1); err != nil {
		return cfg, err
	}
	if cfg.fills, err = intList("fill", *fills, 0); err != nil {
		return cfg, err
	}
	if *fleet != "none" {
		if cfg.fleet, err = intList("fleet", *fleet, 1); err != nil {
			return cfg, err
		}
	}
	if cfg.fleetOnly && len(cfg.fleet) == 0 {
		return cfg, fmt.Errorf("bench: -fleet-only with -fleet none measures nothing")
	}
	if *only != "" {
		if cfg.only, err = regexp.Compile(*only); err != nil {
			return cfg, fmt.Errorf("bench: -run: %w", err)
		}
	}
	switch {
	case cfg.dur <= 0:
		return cfg, fmt.Errorf("bench: -d %v: must be > 0", cfg.dur)
	case cfg.warmup < 0:
		return cfg, fmt.Errorf("bench: -warmup %v: must be >= 0", cfg.warmup)
	case cfg.window < time.Millisecond:
		return cfg, fmt.Errorf("bench: -window %v: must be at least 1ms", cfg.window)
	case cfg.rounds < 1:
		return cfg, fmt.Errorf("bench: -rounds %d: must be >= 1", cfg.rounds)
	case cfg.count < 1:
		return cfg, fmt.Errorf("bench: -count %d: must be >= 1", cfg.count)
	}
	return cfg, nil
}

// intList parses "1,64" into ints of at least lo.
func intList(name, s string, lo int) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo {
			return nil, fmt.Errorf("bench: -%s %q: want comma-separated integers >= %d", name, s, lo)
		}
		out = append(out, n)
	}
	return out, nil
}
