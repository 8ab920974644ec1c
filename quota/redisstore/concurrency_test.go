package redisstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// checkHammer checks the results of everyone who charged the budget against
// its final state: the accepted units are exactly what the store counts, no
// more than the limit, and every refusal was right (its cost did not fit in
// what was used then, nor in what is left at the end; used only grows under
// a fixed clock). Then the budget must admit exactly what is left.
func checkHammer(t *testing.T, l *quota.Limiter, limit int64, results []hammerResult) {
	t.Helper()
	var accepted int64
	refusals := 0
	for _, r := range results {
		accepted += r.Accepted
		refusals += len(r.Refused)
		for _, e := range r.Errors {
			t.Errorf("unexpected error: %s", e)
		}
	}
	us, err := l.Status(context.Background(), secret)
	if err != nil {
		t.Fatal(err)
	}
	final := us[0].Used
	if final != accepted || final > limit {
		t.Fatalf("store counts %d units, callers were granted %d, limit %d", final, accepted, limit)
	}
	if refusals == 0 {
		t.Fatalf("no charge was refused: the test never reached the limit")
	}
	for _, r := range results {
		for _, f := range r.Refused {
			used, cost, lim := f[0], f[1], f[2]
			if lim != limit || used+cost <= limit || used > final || cost <= limit-final {
				t.Fatalf("wrong refusal: used %d + cost %d vs limit %d (final used %d)", used, cost, lim, final)
			}
		}
	}
	left := limit - final
	if left > 0 {
		if _, err := l.Take(context.Background(), secret, quota.Units("units", left)); err != nil {
			t.Fatalf("the last %d units were refused: %v", left, err)
		}
	}
	if _, err := l.Take(context.Background(), secret, quota.Units("units", 1)); err == nil {
		t.Fatalf("a full budget admitted one more unit")
	}
	t.Logf("%d callers: %d units granted of %d, %d refusals", len(results), accepted, limit, refusals)
}

// TestConcurrentGoroutines: 64 goroutines charge one budget with random
// costs under a fixed clock.
func TestConcurrentGoroutines(t *testing.T) {
	const limit = 20000
	st := redisstore.New(redistest.Client(t), redisstore.WithPrefix(redistest.Prefix(t)))
	l, err := quota.New(st, "api", concurrencyBudget(limit), quota.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	res := hammer(l, 1, 64, 12) // 768 charges of ~50: about twice the limit
	checkHammer(t, l, limit, []hammerResult{res})
}

// TestConcurrentProcesses: several OS processes (this test binary,
// re-executed as workers) and this one's goroutines charge one budget in the
// shared Redis at once, each store sending every decision alone
// (WithoutPipelining).
func TestConcurrentProcesses(t *testing.T) { concurrentProcesses(t, -1) }

// TestConcurrentProcessesPipelined is TestConcurrentProcesses with every
// process's store pipelining its decisions (WithPipelining(4), the
// default), those of the budget that wait together decided in batches: 80
// goroutines in 5 processes.
func TestConcurrentProcessesPipelined(t *testing.T) { concurrentProcesses(t, 4) }

func concurrentProcesses(t *testing.T, lanes int) {
	const (
		limit      = 30000
		procs      = 4
		goroutines = 16
		attempts   = 12
	)
	kind, addr := redistest.Shared(t)
	t.Logf("workers use %s at %s", kind, addr)
	prefix := redistest.Prefix(t)
	opts := []redisstore.Option{redisstore.WithPrefix(prefix)}
	switch {
	case lanes > 0:
		opts = append(opts, redisstore.WithPipelining(lanes))
	case lanes < 0:
		opts = append(opts, redisstore.WithoutPipelining())
	}
	st := redisstore.New(redistest.Client(t), opts...)
	l, err := quota.New(st, "api", concurrencyBudget(limit), quota.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	results := make([]hammerResult, procs+1)
	var wg sync.WaitGroup
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := testkit.Child(t, "hammer", fmt.Sprintf("%s %s %d %d %d %d %d %d", addr, prefix, limit, 100+p, goroutines, attempts, t0.UnixMicro(), lanes))
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Errorf("worker %d: %v: %s", p, err, errb.String())
				return
			}
			if err := json.Unmarshal(out.Bytes(), &results[p]); err != nil {
				t.Errorf("worker %d: bad output %q: %v", p, out.String(), err)
			}
		}()
	}
	results[procs] = hammer(l, 1, goroutines, attempts)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for p, r := range results[:procs] {
		if r.Accepted == 0 && len(r.Refused) == 0 {
			t.Fatalf("worker %d made no charge", p)
		}
	}
	checkHammer(t, l, limit, results)
}
