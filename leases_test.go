package quotactl_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

type leaseConfig struct {
	Backend string `json:"backend"` // "sqlite" or "redis"
	Target  string `json:"target"`  // the SQLite path, or the Redis address
	Prefix  string `json:"prefix"`
	Limit   int64  `json:"limit"`
	Block   int64  `json:"block"` // 0: adaptive
	// Pause > 0: after go, take Pause units, print "holding" and wait for
	// a second go (the parent adjusts the budget meanwhile), with leases
	// that outlive the pause
	Pause int64 `json:"pause"`
	// CheckEvery is the leases' LeaseOptions.CheckEvery (0: the default)
	CheckEvery time.Duration `json:"check_every"`
}

type leaseReport struct {
	Before   int64    `json:"before"` // admitted before the pause
	Admitted int64    `json:"admitted"`
	Refused  int64    `json:"refused"`
	Errors   []string `json:"errors"`
}

const leaseSecret = "lease-shared-secret"

func leaseBudgets(limit int64) []quota.Budget {
	return []quota.Budget{{Name: "units", Limit: limit, Window: quota.Sliding(time.Hour)}}
}

// leaseChild is the main of a worker of TestLeasesAcrossProcesses (the
// child role "lease", given its leaseConfig as JSON). It reports ready,
// waits for the parent's go, spends the shared budget from 8 goroutines
// under leases until the store has nothing left, settles its leases
// (Close) and prints what it admitted.
func leaseChild(raw string) error {
	var cfg leaseConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fmt.Errorf("bad config: %v", err)
	}
	store, closeClient, err := openLeaseStore(cfg)
	if err != nil {
		return err
	}
	defer closeClient()
	defer store.Close()
	life := 200 * time.Millisecond
	if cfg.Pause > 0 {
		life = time.Minute // the lease stays open across the pause
	}
	l, err := quota.New(store, "api", leaseBudgets(cfg.Limit), quota.WithLeases(quota.LeaseOptions{Block: cfg.Block, MaxTime: life, CheckEvery: cfg.CheckEvery}))
	if err != nil {
		return err
	}
	ctx := context.Background()
	// Connections and scripts ready, then wait for the parent's go, so
	// that the four processes race from the same start.
	if _, err := l.Status(ctx, quota.Credential{Secret: leaseSecret}); err != nil {
		return fmt.Errorf("status before start: %v", err)
	}
	fmt.Println("ready")
	stdin := bufio.NewReader(os.Stdin)
	wait := func() error {
		if line, err := stdin.ReadString('\n'); err != nil || strings.TrimSpace(line) != "go" {
			return fmt.Errorf("waiting for go on stdin: got %q, %v", line, err)
		}
		return nil
	}
	if err := wait(); err != nil {
		return err
	}
	var rep leaseReport
	if cfg.Pause > 0 {
		for range cfg.Pause {
			if _, err := l.Take(ctx, quota.Credential{Secret: leaseSecret}, quota.Units("units", 1)); err != nil {
				return fmt.Errorf("take before the pause: %v", err)
			}
		}
		rep.Before = cfg.Pause
		fmt.Println("holding")
		if err := wait(); err != nil {
			return err
		}
	}
	var admitted, refused atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				_, err := l.Take(ctx, quota.Credential{Secret: leaseSecret}, quota.Units("units", 1))
				var ee *quota.ExhaustedError
				switch {
				case err == nil:
					admitted.Add(1)
				case errors.As(err, &ee):
					refused.Add(1)
					if ee.RetryAfter > 30*time.Minute { // the hour's budget is all taken
						return
					}
				default:
					mu.Lock()
					rep.Errors = append(rep.Errors, err.Error())
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(ctx); err != nil {
		rep.Errors = append(rep.Errors, "close: "+err.Error())
	}
	rep.Admitted, rep.Refused = admitted.Load(), refused.Load()
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// openLeaseStore opens cfg's store; closeClient closes the Redis client
// beneath it, which closing the store leaves open.
func openLeaseStore(cfg leaseConfig) (store quota.Store, closeClient func(), err error) {
	switch cfg.Backend {
	case "sqlite":
		s, err := sqlitestore.Open(cfg.Target)
		if err != nil {
			return nil, nil, err
		}
		return s, func() {}, nil
	case "redis":
		c := redis.NewClient(&redis.Options{Addr: cfg.Target})
		return redisstore.New(c, redisstore.WithPrefix(cfg.Prefix)), func() { c.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown backend %q", cfg.Backend)
}

// leaseStore is openLeaseStore for the parent: an error fails the test,
// and the client is closed when the test ends.
func leaseStore(t *testing.T, cfg leaseConfig) quota.Store {
	t.Helper()
	store, closeClient, err := openLeaseStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeClient)
	return store
}

// TestLeasesAcrossProcesses: 4 processes (the test binary re-run) share one
// budget under leases of 10 and 100 units and adaptive ones, on SQLite and
// on Redis, each until the store has nothing left. Together they admit no
// unit over the limit, and once they have settled their leases the store
// counts exactly what they admitted.
//
// With an adjust midway: each process admits a few units and pauses,
// holding an open lease; an operator adjusts the budget to 1,000 used (what
// the upstream's console says, those few units included); then the
// processes spend what is left. They admit no more than the 3,000 the
// adjust left, and the store counts the 1,000, what they admitted after,
// and the few units they admitted before (kept with their blocks, counted
// twice: the conservative side).
//
// With an adjust near the limit (3,980 used, 20 left, while the processes
// hold about 130 unused units in open blocks of leases that last a
// minute): the processes admit at most the 20 units left, since each
// lease checks the owner's change version before admitting past its
// CheckEvery (here 1µs: less than any pause the parent's adjust takes, so
// the check comes before the first admission after it) and ends on the
// change. Before the check existed they admitted the 130 from their
// blocks.
func TestLeasesAcrossProcesses(t *testing.T) {
	const limit = 4000
	for _, tc := range []struct {
		backend string
		adjust  int64 // 0: none
		near    bool  // the adjust leaves less than the open blocks hold
	}{{"sqlite", 0, false}, {"redis", 0, false}, {"sqlite", 1000, false}, {"redis", 1000, false},
		{"sqlite", limit - 20, true}, {"redis", limit - 20, true}} {
		backend := tc.backend
		name := backend
		switch {
		case tc.near:
			name += "/adjust-near-limit"
		case tc.adjust > 0:
			name += "/adjust-midway"
		}
		t.Run(name, func(t *testing.T) {
			// Every process first takes a few units and holds (its lease
			// open) until all do: on a loaded host one process could
			// otherwise drain the budget before the others are scheduled
			cfg := leaseConfig{Backend: backend, Limit: limit, Pause: 3}
			if tc.near {
				cfg.CheckEvery = time.Microsecond
			}
			switch backend {
			case "sqlite":
				cfg.Target = filepath.Join(t.TempDir(), "quota.db")
				s, err := sqlitestore.Open(cfg.Target) // create it before the race
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
			case "redis":
				kind, addr := redistest.Shared(t)
				t.Logf("workers use %s at %s", kind, addr)
				cfg.Target, cfg.Prefix = addr, redistest.Prefix(t)
			}
			reports := make([]leaseReport, 4)
			var cmds []*exec.Cmd
			var outs []*bufio.Reader
			var ins []io.WriteCloser
			var errbs []*bytes.Buffer
			for _, block := range []int64{10, 100, 0, 0} {
				c := cfg
				c.Block = block
				raw, _ := json.Marshal(c)
				cmd := testkit.Child(t, "lease", string(raw))
				errb := new(bytes.Buffer)
				cmd.Stderr = errb
				in, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds, outs, ins, errbs = append(cmds, cmd), append(outs, bufio.NewReader(out)), append(ins, in), append(errbs, errb)
			}
			for p, out := range outs {
				if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
					t.Fatalf("worker %d: want ready, got %q, %v\n%s", p, line, err, errbs[p].String())
				}
			}
			for _, in := range ins {
				if _, err := io.WriteString(in, "go\n"); err != nil {
					t.Fatal(err)
				}
			}
			for p, out := range outs {
				if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "holding" {
					t.Fatalf("worker %d: want holding, got %q, %v\n%s", p, line, err, errbs[p].String())
				}
			}
			if tc.adjust > 0 {
				store := leaseStore(t, cfg)
				op, err := quota.New(store, "api", leaseBudgets(limit))
				if err != nil {
					t.Fatal(err)
				}
				if err := op.Adjust(context.Background(), quota.Credential{Secret: leaseSecret}, "units", tc.adjust); err != nil {
					t.Fatal(err)
				}
				store.Close()
			}
			for _, in := range ins {
				if _, err := io.WriteString(in, "go\n"); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			for p := range cmds {
				wg.Go(func() {
					rest, _ := io.ReadAll(outs[p])
					if err := cmds[p].Wait(); err != nil {
						t.Errorf("worker %d: %v\n%s%s", p, err, rest, errbs[p].String())
						return
					}
					line := rest
					if i := bytes.IndexByte(line, '\n'); i >= 0 {
						line = line[:i]
					}
					if err := json.Unmarshal(line, &reports[p]); err != nil {
						t.Errorf("worker %d: bad output %q: %v", p, rest, err)
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			var total, before int64
			sharing := 0
			for p, r := range reports {
				if len(r.Errors) > 0 {
					t.Fatalf("worker %d: %+v", p, r)
				}
				if r.Admitted > 0 {
					sharing++
				}
				total += r.Admitted
				before += r.Before
				t.Logf("worker %d admitted %d (%d before the adjust), refused %d", p, r.Admitted, r.Before, r.Refused)
			}
			if tc.adjust == 0 {
				total += before // nothing set the units taken before the pause aside
			}
			if left := limit - tc.adjust; total > left {
				t.Fatalf("the processes admitted %d units together, when %d were left: %d over", total, left, total-left)
			}
			store := leaseStore(t, cfg)
			defer store.Close()
			l, err := quota.New(store, "api", leaseBudgets(limit))
			if err != nil {
				t.Fatal(err)
			}
			us, err := l.Status(context.Background(), quota.Credential{Secret: leaseSecret})
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.adjust + before + total; tc.adjust == 0 && us[0].Used != total || tc.adjust > 0 && us[0].Used != want {
				t.Fatalf("the store counts %d units after every lease was settled; the processes admitted %d (and %d before an adjust to %d)", us[0].Used, total, before, tc.adjust)
			}
			t.Logf("%s: after the adjust left %d, the 4 processes admitted %d", name, limit-tc.adjust, total)
			if tc.near {
				return // few units left: not all share, and they may admit none
			}
			if sharing < 4 {
				t.Fatalf("only %d of 4 processes admitted anything: the budget was not shared", sharing)
			}
			if left := limit - tc.adjust; total < left*9/10 {
				t.Fatalf("the processes admitted only %d of %d units", total, left)
			}
			t.Logf("%s: 4 processes admitted %s units of %d", backend, strconv.FormatInt(total, 10), limit)
		})
	}
}
