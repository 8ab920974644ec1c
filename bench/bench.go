package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// config is what one run measures; the flags in main set it.
type config struct {
	redisURL   string        // empty: start a redis-server
	dur        time.Duration // each round of each decisions measurement
	warmup     time.Duration // before each round, not counted
	goroutines []int
	window     time.Duration // sliding window of the decisions measurements
	fills      []int         // entries in the window for the latency measurement
	count      int           // decisions per phase of the window-size table
	only       *regexp.Regexp
	sqliteDir  string // empty: a temporary directory
	rounds     int    // interleaved rounds of each decisions measurement
	fleet      []int  // process counts of the fleet table (none: no table)
	fleetOnly  bool   // measure the fleet table only
}

// row is one line of a decisions table.
type row struct {
	name, algo string
	cost       int64
	s          *sample
	ceiling    *sample // the ceiling at the same number of goroutines
}

// report is everything one run measured.
type report struct {
	cfg         config
	machine     machine
	decisions   []row // Redis limiters
	refuse      []row // the refuse-heavy phase: a spent budget
	local       []row // in-process stores
	window      []row // quota latency by entries in the window
	memory      []memRow
	elapsed     time.Duration
	prefix      string // of every key the run wrote (and deleted)
	command     string // how the run was started, for the record
	fleet       []*fleetCell
	fleetSQLite *fleetCell
}

// runner holds what the measurements share.
type runner struct {
	cfg      config
	rdb      *redis.Client
	prefix   string // every key this run writes starts with it
	progress io.Writer
	ceilings map[int]*sample
	ceiling  contender
	seq      int // numbers the measurements, so each has keys of its own
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// bench runs every measurement against rdb and returns the report. Keys
// live under a prefix unique to the run; it deletes them before returning.
func bench(ctx context.Context, cfg config, rdb *redis.Client, progress io.Writer) (_ *report, err error) {
	start := time.Now()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	r := &runner{cfg: cfg, rdb: rdb, prefix: "qbench:" + hex.EncodeToString(rnd[:]) + ":", progress: progress, ceilings: map[int]*sample{}}
	defer func() {
		// a fresh context: the run's may be cancelled (SIGINT)
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if derr := deleteKeys(cctx, rdb, r.prefix+"*", "rate:"+r.prefix+"*"); derr != nil && err == nil {
			err = fmt.Errorf("bench: delete the run's keys: %w", derr)
		}
	}()
	r.ceiling = ceiling(rdb, r.prefix)
	rep := &report{cfg: cfg, machine: describe(ctx, rdb), prefix: r.prefix}
	dir := cfg.sqliteDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "quotactl-bench-sqlite-"); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	if len(cfg.fleet) > 0 {
		fleetDB := filepath.Join(dir, "fleet-"+hex.EncodeToString(rnd[:])+".db")
		rep.fleet, rep.fleetSQLite, err = r.fleet(ctx, cfg.fleet, fleetDB)
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(fleetDB + suffix)
		}
		if err != nil {
			return nil, err
		}
	}
	if cfg.fleetOnly {
		rep.machine.loadAfter = loadavg()
		rep.elapsed = time.Since(start)
		return rep, nil
	}

	// the store as New makes it (decisions that wait together share
	// pipelines, and those of one budget one script run), and one that
	// sends each decision alone, one script each
	rs := redisstore.New(rdb, redisstore.WithPrefix(r.prefix+"quota:"))
	alone := redisstore.New(rdb, redisstore.WithPrefix(r.prefix+"quota:"), redisstore.WithoutPipelining())
	redisContenders := []contender{
		quotaTake("quota redisstore Take", "sliding log, one entry per call, running sum; decisions that wait together share a pipeline and one script run", false, rs, quotaBudget(cfg.window)),
		quotaTake("quota redisstore Take, daily", "daily budget: the running sum decides, the log keeps each entry; batched as above", false, rs, dailyBudget),
		quotaTake("quota redisstore Take, one script each", "as Take, each decision sent alone (WithoutPipelining)", false, alone, quotaBudget(cfg.window)),
		quotaTake("quota redisstore Take, daily, one script each", "as Take, daily, each decision sent alone (WithoutPipelining)", false, alone, dailyBudget),
		quotaLeased("quota redisstore Take, leases B=10", "leases of 10 units: one store call per block, decisions in process", rs, cfg.window, 10),
		quotaLeased("quota redisstore Take, leases B=100", "leases of 100 units: one store call per block, decisions in process", rs, cfg.window, 100),
		quotaLeased("quota redisstore Take, leases adaptive", "leases sized to the local rate (≤ 5% of the limit, ≤ a tenth of the window)", rs, cfg.window, 0),
		perUnit(rdb, r.prefix, cfg.window),
		redisRate(rdb, r.prefix, cfg.window),
		ululeIncr(rdb, r.prefix, cfg.window),
	}
	if rep.decisions, err = r.table(ctx, redisContenders, true); err != nil {
		return nil, err
	}

	refusing := []contender{
		quotaSpent("quota redisstore Take", "spent daily budget: every call a store decision (refusals that wait together share one script run)", rs),
		quotaSpent("quota redisstore Take, one script each", "spent daily budget: every call a store round trip and a script run (WithoutPipelining)", alone),
		quotaSpent("quota redisstore Take, local refusals", "spent daily budget: refused in process until the reset (re-checked once a second)", rs, quota.WithLocalRefusals(0)),
		redisRateSpent(rdb, r.prefix),
	}
	if rep.refuse, err = r.refuseTable(ctx, refusing); err != nil {
		return nil, err
	}

	dbPath := filepath.Join(dir, "bench-"+hex.EncodeToString(rnd[:])+".db")
	ss, err := sqlitestore.Open(dbPath)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = ss.Close()
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(dbPath + suffix)
		}
	}()
	localContenders := []contender{
		quotaTake("quota MemoryStore Take", "same log in process memory, one mutex", true, quota.NewMemoryStore(), quotaBudget(cfg.window)),
		quotaTake("quota sqlitestore Take", "same log in an SQLite file (WAL, BEGIN IMMEDIATE)", true, ss, quotaBudget(cfg.window)),
		xrate(),
	}
	if rep.local, err = r.table(ctx, localContenders, false); err != nil {
		return nil, err
	}

	if rep.window, err = r.windowSizes(ctx, rs); err != nil {
		return nil, err
	}
	if rep.memory, err = r.day(ctx); err != nil {
		return nil, err
	}
	rep.machine.loadAfter = loadavg()
	rep.elapsed = time.Since(start)
	return rep, nil
}

func (r *runner) logf(format string, args ...any) {
	if r.progress != nil {
		fmt.Fprintf(r.progress, format+"\n", args...)
	}
}

// cell is one measurement of a decisions table: a contender at one cost
// and goroutine count, measured once per round.
type cell struct {
	c      contender
	cost   int64
	g      int
	fn     op
	rounds []*sample
}

// ceilingAt returns the ceiling at g goroutines, measuring it (alone) if no
// table measured it.
func (r *runner) ceilingAt(ctx context.Context, g int) (*sample, error) {
	if s, ok := r.ceilings[g]; ok {
		return s, nil
	}
	if _, err := r.measureCells(ctx, []*cell{{c: r.ceiling, g: g}}); err != nil {
		return nil, err
	}
	return r.ceilings[g], nil
}

// table measures each contender at cost 1 and 100 and every goroutine
// count, and (with ceiling) the ceiling at each goroutine count, in
// interleaved rounds.
func (r *runner) table(ctx context.Context, cs []contender, ceiling bool) ([]row, error) {
	var cells []*cell
	for _, g := range r.cfg.goroutines {
		if ceiling {
			cells = append(cells, &cell{c: r.ceiling, g: g})
		}
		for _, c := range cs {
			if r.cfg.only != nil && !r.cfg.only.MatchString(c.name) {
				continue
			}
			for _, cost := range []int64{1, 100} {
				cells = append(cells, &cell{c: c, cost: cost, g: g})
			}
		}
	}
	rows, err := r.measureCells(ctx, cells)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if rows[i].ceiling, err = r.ceilingAt(ctx, rows[i].s.goroutines); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// refuseTable measures each contender at cost 1 and every goroutine count
// against a spent budget, with the ceiling, in interleaved rounds: every
// decision must be refused.
func (r *runner) refuseTable(ctx context.Context, cs []contender) ([]row, error) {
	var cells []*cell
	for _, g := range r.cfg.goroutines {
		cells = append(cells, &cell{c: r.ceiling, g: g})
		for _, c := range cs {
			if r.cfg.only == nil || r.cfg.only.MatchString(c.name) {
				cells = append(cells, &cell{c: c, cost: 1, g: g})
			}
		}
	}
	rows, err := r.measureCells(ctx, cells)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if rows[i].name != r.ceiling.name && rows[i].s.refused != rows[i].s.ops {
			return nil, fmt.Errorf("bench: %s on a spent budget: %d of %d decisions admitted", rows[i].name, rows[i].s.ops-rows[i].s.refused, rows[i].s.ops)
		}
		rows[i].ceiling = r.ceilings[rows[i].s.goroutines]
	}
	return rows, nil
}

// measureCells measures every cell once per round, round after round, so a
// burst of load on the host hits every cell of a round rather than all
// rounds of one cell. Ceiling cells are recorded in r.ceilings.
func (r *runner) measureCells(ctx context.Context, cells []*cell) ([]row, error) {
	for _, cl := range cells {
		r.seq++
		id := strconv.Itoa(r.seq) + "-" + nonWord.ReplaceAllString(cl.c.name, "-") +
			"-c" + strconv.FormatInt(cl.cost, 10) + "-g" + strconv.Itoa(cl.g)
		fn, err := cl.c.setup(ctx, id, max(cl.cost, 1))
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", cl.c.name, err)
		}
		cl.fn = fn
	}
	for round := range r.cfg.rounds {
		for _, cl := range cells {
			if r.cfg.warmup > 0 {
				if _, err := measure(ctx, cl.g, r.cfg.warmup, 0, cl.fn); err != nil {
					return nil, fmt.Errorf("bench: %s (warm-up): %w", cl.c.name, err)
				}
			}
			measureFn := r.measureRedis
			if cl.c.local {
				measureFn = measure
			}
			s, err := measureFn(ctx, cl.g, r.cfg.dur, 0, cl.fn)
			if err != nil {
				return nil, fmt.Errorf("bench: %s, cost %d, %d goroutines: %w", cl.c.name, cl.cost, cl.g, err)
			}
			cl.rounds = append(cl.rounds, s)
			r.logf("round %d/%d  %-34s cost %3d  %2d goroutines  %9.0f decisions/s  p50 %-10v p99 %-10v server %5.1fµs  refused %d",
				round+1, r.cfg.rounds, cl.c.name, cl.cost, cl.g, s.perSecond(), s.percentile(50), s.percentile(99), s.serverPerDecision(), s.refused)
		}
	}
	rows := make([]row, 0, len(cells))
	for _, cl := range cells {
		s := combine(cl.rounds)
		if cl.c.name == r.ceiling.name {
			r.ceilings[cl.g] = s
		}
		rows = append(rows, row{name: cl.c.name, algo: cl.c.algo, cost: cl.cost, s: s})
	}
	return rows, nil
}

// measureRedis is measure, plus the time Redis spent executing scripts
// meanwhile (INFO commandstats before and after).
func (r *runner) measureRedis(ctx context.Context, goroutines int, dur time.Duration, count int, fn op) (*sample, error) {
	before, err := readScriptStats(ctx, r.rdb)
	if err != nil {
		return nil, err
	}
	s, err := measure(ctx, goroutines, dur, count, fn)
	if err != nil {
		return nil, err
	}
	after, err := readScriptStats(ctx, r.rdb)
	if err != nil {
		return nil, err
	}
	s.serverUsec, s.serverCalls = after.usec-before.usec, after.calls-before.calls
	return s, nil
}

// windowSizes measures quota decisions with few and with many entries in
// the window. For each fill: a budget over a day, pre-filled with fill
// entries of 1 unit, then count admitted decisions (the window grows to its
// limit, fill+count), then count refused ones (the window is full: each
// refusal finds its RetryAfter from the oldest entries). Each phase runs in
// rounds that alternate between the fills, so a burst of host load hits
// them alike.
func (r *runner) windowSizes(ctx context.Context, store quota.Store) ([]row, error) {
	ceil, err := r.ceilingAt(ctx, 1)
	if err != nil {
		return nil, err
	}
	per := (r.cfg.count + r.cfg.rounds - 1) / r.cfg.rounds // decisions per round
	type filled struct {
		fill          int
		fn            op
		admit, refuse []*sample
	}
	var fs []*filled
	for _, fill := range r.cfg.fills {
		name := "w" + strconv.Itoa(fill)
		lim, err := quota.New(store, "bench-window", []quota.Budget{{Name: name, Limit: int64(fill + per*r.cfg.rounds), Window: quota.Sliding(24 * time.Hour)}})
		if err != nil {
			return nil, err
		}
		cred := quota.Credential{Secret: r.prefix + "window-" + name}
		f := &filled{fill: fill, fn: takeOp(lim, cred, quota.Units(name, 1))}
		if fill > 0 {
			pre, err := measure(ctx, slicesMax(r.cfg.goroutines), 0, fill, f.fn)
			if err != nil {
				return nil, fmt.Errorf("bench: pre-fill %d entries: %w", fill, err)
			}
			if pre.refused != 0 {
				return nil, fmt.Errorf("bench: pre-fill %d entries: %d refused", fill, pre.refused)
			}
		}
		if err := r.checkUsed(ctx, lim, cred, int64(fill)); err != nil {
			return nil, err
		}
		r.logf("pre-filled %d entries", fill)
		fs = append(fs, f)
	}
	for _, refusing := range []bool{false, true} {
		for range r.cfg.rounds {
			for _, f := range fs {
				s, err := r.measureRedis(ctx, 1, 0, per, f.fn)
				if err != nil {
					return nil, err
				}
				if refusing && s.refused != s.ops {
					return nil, fmt.Errorf("bench: %d entries: %d of %d decisions admitted over the limit", f.fill, s.ops-s.refused, s.ops)
				}
				if !refusing && s.refused != 0 {
					return nil, fmt.Errorf("bench: %d entries: %d of %d decisions refused under the limit", f.fill, s.refused, s.ops)
				}
				if refusing {
					f.refuse = append(f.refuse, s)
				} else {
					f.admit = append(f.admit, s)
				}
			}
		}
	}
	var rows []row
	for _, f := range fs {
		admit, refuse := combine(f.admit), combine(f.refuse)
		name := fmt.Sprintf("quota redisstore Take, %s entries in window", thousands(float64(f.fill)))
		rows = append(rows,
			row{name: name, algo: "admitted: appends one entry", cost: 1, s: admit, ceiling: ceil},
			row{name: name, algo: "window full: refused, RetryAfter from the oldest entry", cost: 1, s: refuse, ceiling: ceil})
		r.logf("%-46s admitted p50 %v p99 %v server %.1fµs | refused p50 %v p99 %v server %.1fµs", name,
			admit.percentile(50), admit.percentile(99), admit.serverPerDecision(),
			refuse.percentile(50), refuse.percentile(99), refuse.serverPerDecision())
	}
	return rows, nil
}

// checkUsed fails unless cred's only budget counts want units.
func (r *runner) checkUsed(ctx context.Context, lim *quota.Limiter, cred quota.Credential, want int64) error {
	st, err := lim.Status(ctx, cred)
	if err != nil {
		return err
	}
	if len(st) != 1 || st[0].Used != want {
		return fmt.Errorf("bench: window holds %+v, want %d units used", st, want)
	}
	return nil
}

func slicesMax(xs []int) int {
	m := 1
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// machine describes where a run ran.
type machine struct {
	cpu, goVersion, redisVersion, osArch string
	nproc                                int
	loadBefore, loadAfter                string
	when                                 time.Time
}

func describe(ctx context.Context, rdb redis.UniversalClient) machine {
	return machine{
		cpu:          cpuModel(),
		nproc:        runtime.NumCPU(),
		goVersion:    runtime.Version(),
		redisVersion: version(ctx, rdb),
		osArch:       runtime.GOOS + "/" + runtime.GOARCH,
		loadBefore:   loadavg(),
		when:         time.Now().UTC(),
	}
}
