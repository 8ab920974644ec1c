package quotactl_test

// Reliability: many OS processes share one budget through Redis or SQLite,
// and none of them, alone or together, spends more than the limit.
// Credential secrecy is in secrecy_test.go and the table of bad inputs in
// badinput_test.go. The Redis fault tests (server killed, hung, restarted;
// scripts flushed under load) and the Redis Cluster tests test only the
// Redis store: they are in quota/redisstore (outage_test.go,
// cluster_test.go).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/internal/testkit/overspend"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// The children's protocol on stdout: one ready line once the store is
// open, then, after the parent writes goLine to stdin, one result line.
const (
	readyLine   = "QUOTACTL-CHILD-READY"
	resultLine  = "QUOTACTL-CHILD-RESULT "
	goLine      = "GO"
	childProcs  = 4
	childGorous = 16
	childCalls  = 16 // per goroutine: 4*16*16 = 1024 charges of 1..100 units, about 2.6 budgets
)

// childConfig tells a child process what to charge, and where.
type childConfig struct {
	Backend    string    `json:"backend"` // "redis", "sqlite", or "memory" (a private store: the broken setup)
	RedisURL   string    `json:"redis_url,omitempty"`
	Prefix     string    `json:"prefix,omitempty"`
	Path       string    `json:"path,omitempty"`
	Proc       int       `json:"proc"`
	Goroutines int       `json:"goroutines"`
	Calls      int       `json:"calls"`
	Seed       uint64    `json:"seed"`
	Now        time.Time `json:"now"`
	Units      int64     `json:"units"` // limit of "units"
	CallsLimit int64     `json:"calls_limit"`
	Secret     string    `json:"secret"`
}

// childResult is one child's report: what its callers were granted and
// refused, and what its own store says was used at the end.
type childResult struct {
	Proc int `json:"proc"`
	overspend.Spend
	Used map[string]int64 `json:"used"`
}

// spendChild is the main of a child process of the multi-process tests
// (the child role "spend", given its childConfig as JSON): it opens the
// store, reports ready, waits for the parent's go, and then charges from
// many goroutines at once.
func spendChild(js string) error {
	var cfg childConfig
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		return fmt.Errorf("bad config: %v", err)
	}
	var store quota.Store
	switch cfg.Backend {
	case "redis":
		opts, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return err
		}
		c := redis.NewClient(opts)
		defer c.Close()
		store = redisstore.New(c, redisstore.WithPrefix(cfg.Prefix))
	case "sqlite":
		s, err := sqlitestore.Open(cfg.Path)
		if err != nil {
			return err
		}
		store = s
	case "memory":
		store = quota.NewMemoryStore()
	default:
		return fmt.Errorf("unknown backend %q", cfg.Backend)
	}
	defer store.Close()
	budgets := overspend.Budgets(cfg.Units, cfg.CallsLimit)
	l, err := quota.New(store, "youtube", budgets, quota.WithClock(func() time.Time { return cfg.Now }))
	if err != nil {
		return err
	}
	cred := quota.Credential{Secret: cfg.Secret, Label: "shared-key"}
	// Touch the store (it records nothing) so connections and scripts are
	// ready before the race starts.
	if _, err := l.Status(context.Background(), cred); err != nil {
		return fmt.Errorf("status before start: %v", err)
	}
	fmt.Println(readyLine)
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != goLine {
		return fmt.Errorf("waiting for %q on stdin: got %q, %v", goLine, line, err)
	}

	var mu sync.Mutex
	res := childResult{Proc: cfg.Proc}
	var wg sync.WaitGroup
	for g := range cfg.Goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Proc*1000+g)))
			var mine overspend.Spend
			for range cfg.Calls {
				cost := rng.Int64N(100) + 1
				_, err := l.Take(context.Background(), cred, overspend.Charge(cost))
				mine.Record(cost, err)
			}
			mu.Lock()
			res.Add(mine)
			mu.Unlock()
		})
	}
	wg.Wait()
	if us, err := l.Status(context.Background(), cred); err != nil {
		res.Errors = append(res.Errors, "status after the run: "+err.Error())
	} else {
		res.Used = map[string]int64{}
		for _, u := range us {
			res.Used[u.Budget] = u.Used
		}
	}
	out, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Println(resultLine + string(out))
	return nil
}

// child is one re-executed test binary.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  chan struct{}
	result chan childResult
	stderr testkit.Buffer
	other  strings.Builder // stdout lines that are not part of the protocol
	done   chan struct{}   // closed once stdout is drained
}

// runChildren starts n children with cfg (Proc set to 0..n-1), waits until
// every one has its store open, lets them all go at once, and returns their
// reports. Any child that fails, crashes, reports a race or errors fails
// the test with its output.
func runChildren(t *testing.T, n int, cfg childConfig) []childResult {
	t.Helper()
	kids := make([]*child, n)
	for i := range kids {
		c := cfg
		c.Proc = i
		js, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		k := &child{ready: make(chan struct{}), result: make(chan childResult, 1), done: make(chan struct{})}
		k.cmd = testkit.Child(t, "spend", string(js))
		k.cmd.Stderr = &k.stderr
		if k.stdin, err = k.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		out, err := k.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := k.cmd.Start(); err != nil {
			t.Fatalf("start child %d: %v", i, err)
		}
		go k.read(out)
		kids[i] = k
	}
	fail := func(format string, args ...any) {
		t.Helper()
		var b strings.Builder
		fmt.Fprintf(&b, format, args...)
		for i, k := range kids {
			_ = k.cmd.Process.Kill()
			<-k.done
			_ = k.cmd.Wait() // its stderr is all copied once Wait returns
			fmt.Fprintf(&b, "\n--- child %d stdout:\n%s--- child %d stderr:\n%s", i, k.other.String(), i, k.stderr.String())
		}
		t.Fatal(b.String())
	}
	timeout := time.NewTimer(90 * time.Second)
	defer timeout.Stop()
	for i, k := range kids {
		select {
		case <-k.ready:
		case <-k.done:
			fail("child %d exited before it was ready", i)
		case <-timeout.C:
			fail("child %d not ready after 90s", i)
		}
	}
	for _, k := range kids { // all at once: they race for the same budget
		_, _ = io.WriteString(k.stdin, goLine+"\n")
	}
	results := make([]childResult, n)
	for i, k := range kids {
		select {
		case results[i] = <-k.result:
		case <-k.done:
			select {
			case results[i] = <-k.result:
			default:
				fail("child %d exited without a result", i)
			}
		case <-timeout.C:
			fail("child %d gave no result after 90s", i)
		}
		<-k.done
		if err := k.cmd.Wait(); err != nil {
			fail("child %d: %v", i, err)
		}
		if len(results[i].Errors) > 0 {
			fail("child %d: %d calls failed with an error other than ErrExhausted, e.g. %s",
				i, len(results[i].Errors), results[i].Errors[0])
		}
	}
	return results
}

// read follows the child's stdout protocol.
func (k *child) read(out io.Reader) {
	defer close(k.done)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == readyLine:
			close(k.ready)
		case strings.HasPrefix(line, resultLine):
			var r childResult
			if err := json.Unmarshal([]byte(line[len(resultLine):]), &r); err != nil {
				k.other.WriteString("bad result line: " + err.Error() + "\n")
				continue
			}
			k.result <- r
		default:
			k.other.WriteString(line + "\n")
		}
	}
}

// TestMultiProcessNoOverspend runs 4 OS processes of 16 goroutines each,
// charging random costs of 1 to 100 units (and one "call") to one shared
// credential at one fixed instant, against Redis and against one SQLite
// file. Together they ask for about 2.6 times the budget. The parent then
// checks, from the children's reports and the store: granted units never
// exceed the limit, equal what the store says was used, and no charge was
// refused while the budget could still have paid for it.
//
// The "private stores" case shows the check can fail: each process with its
// own memory store (no shared state, as a per-process limiter would be)
// grants all its callers ask, some 2.6 budgets in all, and overspend.Check
// reports the overspend.
func TestMultiProcessNoOverspend(t *testing.T) {
	const units, calls = 20000, 1200
	budgets := overspend.Budgets(units, calls)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	base := childConfig{
		Goroutines: childGorous, Calls: childCalls, Seed: seed, Now: t0,
		Units: units, CallsLimit: calls, Secret: "AIzaSy-multiprocess-key",
	}
	cred := quota.Credential{Secret: base.Secret}

	check := func(t *testing.T, store quota.Store, cfg childConfig) {
		results := runChildren(t, childProcs, cfg)
		l, err := quota.New(store, "youtube", budgets, quota.WithClock(fixedClock))
		if err != nil {
			t.Fatal(err)
		}
		used := overspend.Used(t, l, cred)
		var all overspend.Spend
		var perChild []int
		granting := 0
		for _, r := range results {
			all.Add(r.Spend)
			perChild = append(perChild, len(r.Accepted))
			if len(r.Accepted) > 0 {
				granting++
			}
		}
		t.Logf("charges granted per process: %v", perChild)
		if granting < 2 {
			t.Errorf("only %d process was granted anything (%v): the processes did not compete", granting, perChild)
		}
		var granted int64
		for _, c := range all.Accepted {
			granted += c
		}
		t.Logf("%d processes x %d goroutines: %d charges granted (%d units, store says %v), %d refused; limit %d units, %d calls",
			childProcs, childGorous, len(all.Accepted), granted, used, len(all.Refused), units, calls)
		if len(all.Refused) == 0 || used["units"] < units-100 && used["calls"] < calls {
			t.Fatalf("the run never reached the limit (used %v): it proves nothing", used)
		}
		for _, p := range overspend.Check(budgets, used, all) {
			t.Error(p)
		}
	}

	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		kind, addr := redistest.Shared(t)
		cfg := base
		cfg.Backend, cfg.Prefix = "redis", redistest.Prefix(t)
		cfg.RedisURL = "redis://" + addr
		if kind == redistest.KindURL {
			cfg.RedisURL = os.Getenv(redistest.EnvURL)
		}
		check(t, redisstore.New(redistest.Client(t), redisstore.WithPrefix(cfg.Prefix)), cfg)
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		cfg := base
		cfg.Backend, cfg.Path = "sqlite", filepath.Join(t.TempDir(), "quota.db")
		// The parent opens the file first, so the children race on
		// charges, not on creating the schema.
		s, err := sqlitestore.Open(cfg.Path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		check(t, s, cfg)
	})
	t.Run("private stores overspend", func(t *testing.T) {
		t.Parallel()
		cfg := base
		cfg.Backend = "memory"
		results := runChildren(t, childProcs, cfg)
		var all overspend.Spend
		used := map[string]int64{}
		for _, r := range results {
			all.Add(r.Spend)
			for b, n := range r.Used {
				used[b] += n
			}
		}
		problems := overspend.Check(budgets, used, all)
		if len(problems) == 0 || !strings.HasPrefix(problems[0], "overspend:") {
			t.Fatalf("%d processes with private stores granted %d units in all, and overspend.Check saw nothing wrong: %q",
				childProcs, used["units"], problems)
		}
		t.Logf("as expected without a shared store: %s", problems[0])
	})
}
