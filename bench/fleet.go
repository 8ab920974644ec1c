package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// The fleet section: N processes of one goroutine each, all charging one
// owner, the shape of a fleet of single-threaded workers (cron runs, pods).
// No batch forms there: each decision is alone. Each process is this
// binary run again as a child (fleetEnv names its job): it makes its
// limiter, warms up, says it is ready (a line on stdout), waits for the
// parent's go (a line on stdin), decides for the round's duration and
// prints what it measured. The parent reads Redis's INFO commandstats
// once every child is ready, before its go, and after every child ended.

// fleetEnv carries a child's job (fleetJob as JSON); set, the binary is a
// fleet child.
const fleetEnv = "QBENCH_FLEET_CHILD"

// fleetKinds are the limiters of the fleet table, in its column order:
// "leased" is quota daily with WithLeases (adaptive blocks), what a fleet
// can use instead of a store call per decision.
var fleetKinds = []string{"noop", "daily", "sliding", "rate", "leased"}

// fleetJob is one child's job.
type fleetJob struct {
	Kind   string // a fleetKinds, or "sqlite"
	Addr   string // Redis
	Prefix string // of the run's keys
	ID     string // of the owner every process charges
	SQLite string // the SQLite file (Kind sqlite)
	Dur    time.Duration
	Warmup time.Duration
}

// fleetResult is what a child prints.
type fleetResult struct {
	Ops, Refused int64
	P50, P99     time.Duration
}

// fleetOp makes the decision of job's kind, as the decisions tables make
// it: a budget that never runs out, daily or sliding over an hour, and
// redis_rate at the same hour's rate.
func fleetOp(ctx context.Context, job fleetJob, rdb *redis.Client) (op, func(), error) {
	hour := []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Sliding(time.Hour)}}
	var c contender
	closeFn := func() {}
	switch job.Kind {
	case "noop":
		c = ceiling(rdb, job.Prefix)
	case "daily":
		c = quotaTake("", "", false, redisstore.New(rdb, redisstore.WithPrefix(job.Prefix+"quota:")), dailyBudget)
	case "sliding":
		c = quotaTake("", "", false, redisstore.New(rdb, redisstore.WithPrefix(job.Prefix+"quota:")), hour)
	case "rate":
		c = redisRate(rdb, job.Prefix, time.Hour)
	case "leased":
		c = quotaTake("", "", false, redisstore.New(rdb, redisstore.WithPrefix(job.Prefix+"quota:")), dailyBudget, quota.WithLeases(quota.LeaseOptions{}))
	case "sqlite":
		ss, err := sqlitestore.Open(job.SQLite)
		if err != nil {
			return nil, nil, err
		}
		closeFn = func() { _ = ss.Close() }
		c = quotaTake("", "", true, ss, hour)
	default:
		return nil, nil, fmt.Errorf("bench: unknown fleet kind %q", job.Kind)
	}
	fn, err := c.setup(ctx, job.ID, 1)
	if err != nil {
		closeFn()
		return nil, nil, err
	}
	return fn, closeFn, nil
}

// fleetChild runs the job in the environment: ready on stdout, the go
// from stdin, then its result to stdout; it returns the exit code.
func fleetChild(ctx context.Context, spec string, stdin io.Reader, stdout, stderr io.Writer) int {
	var job fleetJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fmt.Fprintf(stderr, "bench: fleet child: %v\n", err)
		return 2
	}
	rdb := redis.NewClient(&redis.Options{Addr: job.Addr, PoolSize: 2, ContextTimeoutEnabled: true})
	defer rdb.Close()
	fn, closeFn, err := fleetOp(ctx, job, rdb)
	if err != nil {
		fmt.Fprintf(stderr, "bench: fleet child %s: %v\n", job.Kind, err)
		return 1
	}
	defer closeFn()
	if _, err := measure(ctx, 1, job.Warmup, 0, fn); err != nil {
		fmt.Fprintf(stderr, "bench: fleet child %s (warm-up): %v\n", job.Kind, err)
		return 1
	}
	fmt.Fprintln(stdout, "ready")
	if _, err := bufio.NewReader(stdin).ReadString('\n'); err != nil {
		fmt.Fprintf(stderr, "bench: fleet child %s: no go: %v\n", job.Kind, err)
		return 1
	}
	s, err := measure(ctx, 1, job.Dur, 0, fn)
	if err != nil {
		fmt.Fprintf(stderr, "bench: fleet child %s: %v\n", job.Kind, err)
		return 1
	}
	_ = json.NewEncoder(stdout).Encode(fleetResult{Ops: s.ops, Refused: s.refused, P50: s.percentile(50), P99: s.percentile(99)})
	return 0
}

// fleetCell is one (kind, processes) measurement, its rounds combined.
type fleetCell struct {
	kind      string
	procs     int
	perSecond []float64 // per round
	usec      []float64 // Redis µs per decision, per round (-1: no Redis)
	p99       []time.Duration
}

func (c *fleetCell) median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return median(s)
}

// fleet measures the fleet table: for each round, for each process count,
// each kind, one after another (interleaved: a burst of host load hits
// every cell of a round), then the SQLite row (8 processes, one file).
func (r *runner) fleet(ctx context.Context, procs []int, sqlitePath string) (cells []*fleetCell, sqlite *fleetCell, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("bench: fleet: %w", err)
	}
	addr := r.rdb.Options().Addr
	for _, n := range procs {
		for _, k := range fleetKinds {
			cells = append(cells, &fleetCell{kind: k, procs: n})
		}
	}
	sqlite = &fleetCell{kind: "sqlite", procs: 8}
	r.seq++
	id := fmt.Sprintf("%d-fleet", r.seq) // one owner for every process
	for round := range r.cfg.rounds {
		for _, c := range append(slices.Clone(cells), sqlite) {
			job := fleetJob{Kind: c.kind, Addr: addr, Prefix: r.prefix, ID: id + "-" + c.kind, SQLite: sqlitePath,
				Dur: r.cfg.dur, Warmup: r.cfg.warmup}
			per, usec, p99, err := r.fleetRound(ctx, exe, job, c.procs)
			if err != nil {
				return nil, nil, fmt.Errorf("bench: fleet %s, %d processes: %w", c.kind, c.procs, err)
			}
			c.perSecond, c.usec, c.p99 = append(c.perSecond, per), append(c.usec, usec), append(c.p99, p99)
			r.logf("round %d/%d  fleet %-8s %2d processes  %9.0f decisions/s  Redis %5.1fµs  p99 %v", round+1, r.cfg.rounds, c.kind, c.procs, per, usec, p99)
		}
	}
	return cells, sqlite, nil
}

// fleetRound runs n children of job at once and returns their decisions
// per second together, Redis's script µs per decision and the worst p99.
func (r *runner) fleetRound(ctx context.Context, exe string, job fleetJob, n int) (float64, float64, time.Duration, error) {
	spec, err := json.Marshal(job)
	if err != nil {
		return 0, 0, 0, err
	}
	type child struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *bufio.Reader
		stderr bytes.Buffer // (a buffer: Wait returns once it is fully copied)
	}
	kids := make([]*child, 0, n)
	// on an early return, every child started goes, its pipes read
	defer func() {
		for _, k := range kids {
			if k.cmd.ProcessState == nil {
				_ = k.cmd.Process.Kill()
				_, _ = io.Copy(io.Discard, k.stdout)
				_ = k.cmd.Wait()
			}
		}
	}()
	for range n {
		k := &child{cmd: exec.CommandContext(ctx, exe)}
		k.cmd.Env = append(os.Environ(), fleetEnv+"="+string(spec))
		k.cmd.Stderr = &k.stderr
		if k.stdin, err = k.cmd.StdinPipe(); err != nil {
			return 0, 0, 0, err
		}
		out, err := k.cmd.StdoutPipe()
		if err != nil {
			return 0, 0, 0, err
		}
		k.stdout = bufio.NewReader(out)
		setDeathSignal(k.cmd)
		if err := k.cmd.Start(); err != nil {
			return 0, 0, 0, err
		}
		kids = append(kids, k)
	}
	// wait until every child is ready (made its limiter, warmed up)
	for _, k := range kids {
		if line, err := k.stdout.ReadString('\n'); err != nil || line != "ready\n" {
			_, _ = io.Copy(io.Discard, k.stdout)
			_ = k.cmd.Wait()
			return 0, 0, 0, fmt.Errorf("child not ready (%q, %v): %s", line, err, strings.TrimSpace(k.stderr.String()))
		}
	}
	var before scriptStats
	if job.Kind != "sqlite" {
		if before, err = readScriptStats(ctx, r.rdb); err != nil {
			return 0, 0, 0, err
		}
	}
	for _, k := range kids {
		_, _ = io.WriteString(k.stdin, "go\n")
		_ = k.stdin.Close()
	}
	var ops int64
	var worst time.Duration
	var first error
	for _, k := range kids {
		// the result, read to the end before Wait (which closes the pipe)
		out, rerr := io.ReadAll(k.stdout)
		err := k.cmd.Wait()
		if (err != nil || rerr != nil) && first == nil {
			first = fmt.Errorf("child: %v %v: %s", err, rerr, strings.TrimSpace(k.stderr.String()))
			continue
		}
		var res fleetResult
		if err := json.Unmarshal(out, &res); err != nil && first == nil {
			first = fmt.Errorf("child's result %q: %v", out, err)
			continue
		}
		if res.Refused > 0 && first == nil {
			first = fmt.Errorf("%d decisions refused: the budget must never run out", res.Refused)
		}
		ops += res.Ops
		worst = max(worst, res.P99)
	}
	if first != nil {
		return 0, 0, 0, first
	}
	usec := -1.0
	if job.Kind != "sqlite" {
		after, err := readScriptStats(ctx, r.rdb)
		if err != nil {
			return 0, 0, 0, err
		}
		if ops > 0 {
			usec = float64(after.usec-before.usec) / float64(ops)
		}
	}
	return float64(ops) / job.Dur.Seconds(), usec, worst, nil
}

// fleetTable writes the fleet section's table.
func fleetTable(b io.Writer, cells []*fleetCell, sqlite *fleetCell) {
	by := map[string]*fleetCell{}
	var procs []int
	for _, c := range cells {
		by[fmt.Sprint(c.kind, c.procs)] = c
		if !slices.Contains(procs, c.procs) {
			procs = append(procs, c.procs)
		}
	}
	fmt.Fprintln(b, "| processes | no-op EVALSHA decisions/s | quota daily | quota sliding 1 h | redis_rate | quota daily / redis_rate | quota sliding / redis_rate | Redis µs per decision: no-op / daily / sliding / redis_rate | quota daily, leased: decisions/s, Redis µs per decision |")
	fmt.Fprintln(b, "|---:|---:|---:|---:|---:|---:|---:|---|---|")
	for _, n := range procs {
		noop, daily, sliding, rate, leased := by[fmt.Sprint("noop", n)], by[fmt.Sprint("daily", n)], by[fmt.Sprint("sliding", n)], by[fmt.Sprint("rate", n)], by[fmt.Sprint("leased", n)]
		x := func(c *fleetCell) string {
			v := c.median(c.perSecond)
			return fmt.Sprintf("%s (%.2fx)", thousands(v), v/noop.median(noop.perSecond))
		}
		vs := func(a, b *fleetCell) string { return fmt.Sprintf("%.2fx", a.median(a.perSecond)/b.median(b.perSecond)) }
		us := func(c *fleetCell) string { return fmt.Sprintf("%.1f", c.median(c.usec)) }
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %s / %s / %s / %s | %s, %.3f |\n", n, thousands(noop.median(noop.perSecond)),
			x(daily), x(sliding), x(rate), vs(daily, rate), vs(sliding, rate), us(noop), us(daily), us(sliding), us(rate),
			thousands(leased.median(leased.perSecond)), leased.median(leased.usec))
	}
	if sqlite != nil {
		fmt.Fprintf(b, "\nSQLite: %d processes of one goroutine each, one file, one owner, a sliding 1 h budget: %s decisions/s (median of %d rounds, p99 %v).\n",
			sqlite.procs, thousands(sqlite.median(sqlite.perSecond)), len(sqlite.perSecond), slices.Max(sqlite.p99))
	}
}
