package sqlitestore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// The multi-process tests re-execute this test binary as child processes
// (testkit.Child) in one of the roles below, given their settings as JSON:
// the childCfg of runChild's roles, the thresholdChild of "threshold".
// TestMain sends a child to its role before any test runs.
func TestMain(m *testing.M) {
	roles := map[string]func(string) int{"threshold": runThresholdChild, "trueup": runTrueUpChild}
	for _, role := range []string{"kill", "inspect", "charge", "bench"} {
		roles[role] = func(cfg string) int { return runChild(role, cfg) }
	}
	testkit.RunChild(roles)
	os.Exit(m.Run())
}

// childCfg is what a child process is told to do.
type childCfg struct {
	Path       string
	Limit      int64
	Goroutines int
	Seed       uint64
	Refusals   int       // charge: each goroutine stops after this many refusals
	N          int       // bench: decisions per process
	Clock      time.Time // the injected, fixed clock; zero: the host clock
	ReadOnly   bool      // open WithReadOnly
}

// childLine is one line a child prints.
type childLine struct {
	Event string `json:"event"` // ready, ok, refused, error, done
	ID    string `json:"id,omitempty"`
	Cost  int64  `json:"cost,omitempty"`
	Used  int64  `json:"used,omitempty"` // after the charge; at the refusal
	N     int    `json:"n,omitempty"`
	Err   string `json:"err,omitempty"`
}

var (
	childBudget = "units"
	childKey    = quota.Credential{Secret: "multi-process-key", Label: "mp"}
)

func runChild(role, js string) int {
	var cfg childCfg
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout) // one write(2) per line, no buffering
	emit := func(l childLine) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(l)
	}
	var sopts []sqlitestore.Option
	if cfg.ReadOnly {
		sopts = append(sopts, sqlitestore.WithReadOnly())
	}
	st, err := sqlitestore.Open(cfg.Path, sopts...)
	if err != nil {
		emit(childLine{Event: "error", Err: err.Error()})
		return 2
	}
	defer st.Close()
	var opts []quota.Option
	if !cfg.Clock.IsZero() {
		opts = append(opts, quota.WithClock(func() time.Time { return cfg.Clock }))
	}
	l, err := quota.New(st, "mp", []quota.Budget{{Name: childBudget, Limit: cfg.Limit, Window: quota.Sliding(24 * time.Hour)}}, opts...)
	if err != nil {
		emit(childLine{Event: "error", Err: err.Error()})
		return 2
	}
	ctx := context.Background()
	switch role {
	case "kill":
		// Charge until killed, printing each reservation once Take has
		// returned it (so once it is committed).
		for g := range cfg.Goroutines {
			go func() {
				rng := rand.New(rand.NewPCG(cfg.Seed, uint64(g)))
				for {
					r, err := l.Take(ctx, childKey, quota.Units(childBudget, 1+rng.Int64N(100)))
					if err != nil {
						emit(childLine{Event: "error", Err: err.Error()})
						continue
					}
					emit(childLine{Event: "ok", ID: r.ID(), Cost: r.Usage[0].Cost})
				}
			}()
		}
		select {}
	case "inspect":
		// Read the usage once, print it, and stop.
		us, err := l.Status(ctx, childKey)
		if err != nil {
			emit(childLine{Event: "error", Err: err.Error()})
			return 2
		}
		emit(childLine{Event: "ok", Used: us[0].Used})
		return 0
	case "charge", "bench":
		emit(childLine{Event: "ready"})
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil { // "go"
			return 2
		}
		var wg sync.WaitGroup
		for g := range cfg.Goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if role == "bench" {
					ch := quota.Units(childBudget, 1)
					for range cfg.N / cfg.Goroutines {
						if _, err := l.Take(ctx, childKey, ch); err != nil {
							emit(childLine{Event: "error", Err: err.Error()})
							return
						}
					}
					return
				}
				rng := rand.New(rand.NewPCG(cfg.Seed, uint64(g)))
				for refusals := 0; refusals < cfg.Refusals; {
					cost := 1 + rng.Int64N(100)
					r, err := l.Take(ctx, childKey, quota.Units(childBudget, cost))
					var ee *quota.ExhaustedError
					switch {
					case err == nil:
						emit(childLine{Event: "ok", ID: r.ID(), Cost: cost, Used: r.Usage[0].Used})
					case errors.As(err, &ee):
						refusals++
						emit(childLine{Event: "refused", Cost: ee.Cost, Used: ee.Used})
					default:
						emit(childLine{Event: "error", Err: err.Error()})
						return
					}
				}
			}()
		}
		wg.Wait()
		emit(childLine{Event: "done", N: cfg.N})
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown child role", role)
	return 2
}

// child is a running child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startChild(t testing.TB, role string, cfg childCfg) *child {
	t.Helper()
	js, _ := json.Marshal(cfg)
	cmd := testkit.Child(t, role, string(js))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
}

// next returns the child's next complete line; io.EOF when its output
// ended (a line cut short by the child's death is dropped).
func (c *child) next() (childLine, error) {
	s, err := c.out.ReadString('\n')
	if err != nil {
		return childLine{}, io.EOF
	}
	var l childLine
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return l, fmt.Errorf("child printed %q: %v", s, err)
	}
	return l, nil
}

// startAll starts n children of role, waits until each is ready, and
// releases them together.
func startAll(t testing.TB, n int, role string, cfg childCfg) []*child {
	t.Helper()
	cs := make([]*child, n)
	for i := range cs {
		cfg.Seed = uint64(i + 1)
		cs[i] = startChild(t, role, cfg)
	}
	for i, c := range cs {
		l, err := c.next()
		if err != nil || l.Event != "ready" {
			t.Fatalf("child %d: %+v, %v; want ready", i, l, err)
		}
	}
	return cs
}

func release(t testing.TB, cs []*child) {
	t.Helper()
	for _, c := range cs {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMultiProcess: 4 processes x 16 goroutines charge one budget of one
// credential at a fixed instant, with random costs of 1 to 100 units,
// until each goroutine has been refused several times.
//
// Since the clock does not move, used only grows; so:
//   - no overspend: the granted costs add up to what the store says is
//     used, and to no more than the limit;
//   - serialisable: sorted by the usage each grant reported, every grant's
//     usage is the previous one plus its cost (no two decisions saw the
//     same state), and every refusal reported a usage that really existed;
//   - no refusal while the budget could pay: a refusal is right only if the
//     usage it saw plus its cost exceeds the limit, and, since used only
//     grows, only if its cost exceeds what is left at the end.
func TestMultiProcess(t *testing.T) {
	const procs, goroutines, limit = 4, 16, 150000
	path := t.TempDir() + "/shared.db" // created by the children, concurrently
	cs := startAll(t, procs, "charge", childCfg{Path: path, Limit: limit, Goroutines: goroutines, Refusals: 8, Clock: t0})
	release(t, cs)

	type grant struct {
		id         string
		cost, used int64
		proc       int
	}
	var grants []grant
	var refusals []childLine
	perProc := make([]int, procs)
	for i, c := range cs {
		for {
			l, err := c.next()
			if err == io.EOF {
				t.Fatalf("child %d ended without done", i)
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Event == "done" {
				break
			}
			switch l.Event {
			case "ok":
				grants = append(grants, grant{l.ID, l.Cost, l.Used, i})
				perProc[i]++
			case "refused":
				refusals = append(refusals, l)
			default:
				t.Fatalf("child %d: %+v", i, l)
			}
		}
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}

	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := quota.New(st, "mp", []quota.Budget{{Name: childBudget, Limit: limit, Window: quota.Sliding(24 * time.Hour)}},
		quota.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	us, err := l.Status(ctx, childKey)
	if err != nil {
		t.Fatal(err)
	}
	used := us[0].Used
	entries, err := l.Entries(ctx, childKey, childBudget)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d grants (per process %v), %d refusals, used %d of %d", len(grants), perProc, len(refusals), used, limit)

	// No overspend.
	var sum, entrySum int64
	for _, g := range grants {
		sum += g.cost
	}
	for _, e := range entries {
		entrySum += e.Cost
	}
	if sum != used || entrySum != used || len(entries) != len(grants) || used > limit {
		t.Fatalf("granted %d units in %d charges; store: used %d, %d entries of %d units; limit %d",
			sum, len(grants), used, len(entries), entrySum, limit)
	}
	// Serialisable.
	slices.SortFunc(grants, func(a, b grant) int { return int(a.used - b.used) })
	seen := map[int64]bool{0: true}
	prev, switches := int64(0), 0
	for i, g := range grants {
		if g.used != prev+g.cost {
			t.Fatalf("grant %s of %d units reported used %d after %d: two decisions overlapped", g.id, g.cost, g.used, prev)
		}
		prev = g.used
		seen[g.used] = true
		if i > 0 && g.proc != grants[i-1].proc {
			switches++
		}
	}
	// No refusal while the budget could pay.
	if len(refusals) != procs*goroutines*8 {
		t.Fatalf("%d refusals, want %d", len(refusals), procs*goroutines*8)
	}
	for _, r := range refusals {
		if r.Used+r.Cost <= limit {
			t.Fatalf("refused %d units at used %d: the budget could pay", r.Cost, r.Used)
		}
		if !seen[r.Used] {
			t.Fatalf("refusal saw used %d, a state no grant produced", r.Used)
		}
		if r.Cost <= limit-used {
			t.Fatalf("refused %d units, yet %d were still free at the end", r.Cost, limit-used)
		}
	}
	// The processes really ran side by side: each was granted charges,
	// and the serial order passes from one process to another many times.
	for i, n := range perProc {
		if n == 0 {
			t.Fatalf("process %d was granted nothing: the processes did not overlap (%v)", i, perProc)
		}
	}
	if switches < 2*procs {
		t.Fatalf("the serial order changed process only %d times: the processes did not overlap", switches)
	}
	t.Logf("the serial order changed process %d times", switches)
}

// TestSIGKILL: a process charging in a loop is killed with SIGKILL at a
// random point. Every reservation it printed (so had committed) is in the
// database, refundable by its ID, the running sum matches the entries, and
// PRAGMA integrity_check says ok.
func TestSIGKILL(t *testing.T) {
	const goroutines = 4
	path := t.TempDir() + "/killed.db"
	c := startChild(t, "kill", childCfg{Path: path, Limit: 1 << 50, Goroutines: goroutines, Clock: t0})
	killAfter := 150 + rand.IntN(150)
	var printed []childLine
	for {
		l, err := c.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if l.Event != "ok" {
			t.Fatalf("child: %+v", l)
		}
		printed = append(printed, l)
		if len(printed) == killAfter {
			if err := c.cmd.Process.Kill(); err != nil { // SIGKILL on Unix
				t.Fatal(err)
			}
		}
	}
	err := c.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.String() != "signal: killed" {
		t.Fatalf("child ended with %v, want signal: killed", err)
	}

	db := rawDB(t, path)
	var check string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v", check, err)
	}
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := quota.New(st, "mp", []quota.Budget{{Name: childBudget, Limit: 1 << 50, Window: quota.Sliding(24 * time.Hour)}},
		quota.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	entries, err := l.Entries(ctx, childKey, childBudget)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		at    int64
		nonce string
	}
	have := map[key]int64{}
	var sum int64
	for _, e := range entries {
		have[key{e.At.UnixMicro(), e.Nonce}] = e.Cost
		sum += e.Cost
	}
	for _, p := range printed {
		parts := strings.Split(p.ID, "/")
		ts, nonce, _ := strings.Cut(parts[len(parts)-1], ".")
		us, err := strconv.ParseInt(ts, 32, 64)
		if err != nil {
			t.Fatalf("reservation ID %q: %v", p.ID, err)
		}
		if cost, ok := have[key{us, nonce}]; !ok || cost != p.Cost {
			t.Fatalf("printed reservation %s (%d units) is not in the database after SIGKILL", p.ID, p.Cost)
		}
	}
	// At most one charge per goroutine can have committed without being
	// printed.
	if len(entries) < len(printed) || len(entries) > len(printed)+goroutines {
		t.Fatalf("%d entries after printing %d reservations", len(entries), len(printed))
	}
	us, err := l.Status(ctx, childKey)
	if err != nil || us[0].Used != sum {
		t.Fatalf("Status = %+v, %v; want used %d, the sum of the entries", us, err, sum)
	}
	// Refundable by ID, as `quotactl refund ID` would.
	var refunded int64
	for i := 0; i < len(printed); i += 10 {
		r, err := quota.ParseReservationID(printed[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Refund(ctx, r); err != nil {
			t.Fatalf("Refund(%s): %v", printed[i].ID, err)
		}
		refunded += printed[i].Cost
	}
	if us, err := l.Status(ctx, childKey); err != nil || us[0].Used != sum-refunded {
		t.Fatalf("after refunds: %+v, %v; want used %d", us, err, sum-refunded)
	}
	t.Logf("killed after %d printed reservations; %d entries", len(printed), len(entries))
}

// BenchmarkTakeProcesses: 4 processes, each with one goroutine, make b.N
// decisions between them on one credential's budget, on the host clock.
// Process start-up is outside the timing.
func BenchmarkTakeProcesses(b *testing.B) {
	benchProcesses(b, 4, 1)
}

// BenchmarkTakeProcesses4x4: as BenchmarkTakeProcesses with 4 goroutines in
// each process.
func BenchmarkTakeProcesses4x4(b *testing.B) {
	benchProcesses(b, 4, 4)
}

func benchProcesses(b *testing.B, procs, goroutines int) {
	path := b.TempDir() + "/bench.db"
	st, err := sqlitestore.Open(path) // create it before the clock runs
	if err != nil {
		b.Fatal(err)
	}
	st.Close()
	per := max(b.N/procs/goroutines, 1) * goroutines
	cs := startAll(b, procs, "bench", childCfg{Path: path, Limit: 1 << 50, Goroutines: goroutines, N: per})
	b.ResetTimer()
	release(b, cs)
	for i, c := range cs {
		l, err := c.next()
		if err != nil || l.Event != "done" {
			b.Fatalf("child %d: %+v, %v", i, l, err)
		}
	}
	b.StopTimer()
	for _, c := range cs {
		_ = c.cmd.Wait()
	}
	b.ReportMetric(float64(per*procs)/b.Elapsed().Seconds(), "decisions/s")
}
