package redisstore_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/storetest"
)

// TestConformancePipelined runs the storetest suite on a store that sends
// its decisions in shared pipelines (WithPipelining), on a real Redis and
// on miniredis.
func TestConformancePipelined(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) quota.Store {
			return redisstore.New(redistest.Client(t), redisstore.WithPrefix(redistest.Prefix(t)), redisstore.WithPipelining(2))
		})
	})
	t.Run("miniredis", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) quota.Store {
			return redisstore.New(redistest.MiniClient(t, redistest.Mini(t)), redisstore.WithPipelining(2))
		})
	})
}

// TestConcurrentGoroutinesPipelined: 64 goroutines charge one budget with
// random costs through one pipelining store (so most decisions ride in
// pipelines with others, and are decided in batches): every unit granted
// is counted, none past the limit, and every refusal was right.
func TestConcurrentGoroutinesPipelined(t *testing.T) {
	const limit = 20000
	for _, lanes := range []int{1, 4} {
		st := redisstore.New(redistest.Client(t), redisstore.WithPrefix(redistest.Prefix(t)), redisstore.WithPipelining(lanes))
		if lanes == 1 {
			redisstore.ForcePipeline(st) // every decision queues, so batches form
		}
		l, err := quota.New(st, "api", concurrencyBudget(limit), quota.WithClock(func() time.Time { return t0 }))
		if err != nil {
			t.Fatal(err)
		}
		res := hammer(l, 1, 64, 12)
		checkHammer(t, l, limit, []hammerResult{res})
		// with one lane, forced, the decisions wait together and go in
		// batches (with 4, as they come: whether they wait depends on how
		// the scheduler overlaps them)
		if n := redisstore.Batched(st); lanes == 1 && n == 0 {
			t.Fatalf("lanes %d: no decision of 768 was decided in a batch", lanes)
		}
	}
}

// TestPipelinedDecisionsShareRoundTrips: decisions made at once by many
// goroutines ride together: far fewer pipelines than decisions reach the
// server. Counted on the client's side (a hook on go-redis's pipelines).
func TestPipelinedDecisionsShareRoundTrips(t *testing.T) {
	c := redistest.Client(t)
	h := &countPipes{}
	c.AddHook(redistest.Hook{Pipeline: h.pipeline})
	st := redisstore.New(c, redisstore.WithPrefix(redistest.Prefix(t)), redisstore.WithPipelining(1))
	redisstore.ForcePipeline(st) // no decision skips the queue, however the scheduler runs them
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 1 << 40, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Take(ctx, secret, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	h.reset()
	const g, each = 32, 20
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for range each {
				if _, err := l.Take(ctx, secret, quota.Units("units", 1)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// a batch decides several decisions in one script call
	pipes, cmds := h.counts()
	if cmds > g*each || cmds == 0 {
		t.Fatalf("%d decisions sent %d script calls", g*each, cmds)
	}
	if pipes >= g*each/2 {
		t.Fatalf("%d decisions of %d goroutines at once went in %d pipelines: they did not share round trips", g*each, g, pipes)
	}
	us, err := l.Status(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Used != g*each+1 {
		t.Fatalf("the store counts %d units, %d were admitted", us[0].Used, g*each+1)
	}
	t.Logf("%d decisions in %d pipelines, %d script calls (%d decided in batches)", g*each, pipes, cmds, redisstore.Batched(st))
}

type countPipes struct {
	mu          sync.Mutex
	pipes, cmds int
}

func (h *countPipes) reset() { h.mu.Lock(); h.pipes, h.cmds = 0, 0; h.mu.Unlock() }
func (h *countPipes) counts() (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pipes, h.cmds
}
func (h *countPipes) pipeline(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
	n := 0
	for _, c := range cmds {
		if c.Name() == "evalsha" {
			n++
		}
	}
	if n > 0 {
		h.mu.Lock()
		h.pipes++
		h.cmds += n
		h.mu.Unlock()
	}
	return next(ctx, cmds)
}

// TestPipelinedAbandonedIsNotSent: a decision whose caller gave up while it
// waited for a lane is not sent (nothing recorded); the caller gets its
// context's error.
func TestPipelinedAbandonedIsNotSent(t *testing.T) {
	c := redistest.Client(t)
	gate := &gatePipes{hold: make(chan struct{}), in: make(chan struct{}, 1)}
	c.AddHook(redistest.Hook{Pipeline: gate.pipeline})
	st := redisstore.New(c, redisstore.WithPrefix(redistest.Prefix(t)), redisstore.WithPipelining(1))
	redisstore.ForcePipeline(st) // even a decision made alone goes in a pipeline
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Take(ctx, secret, quota.Units("units", 1)); err != nil { // registers the credential
		t.Fatal(err)
	}
	gate.on()
	first := make(chan error, 1)
	go func() {
		_, err := l.Take(ctx, secret, quota.Units("units", 10))
		first <- err
	}()
	<-gate.in // the one lane is busy with the first decision
	cctx, cancel := context.WithCancel(ctx)
	second := make(chan error, 1)
	go func() {
		_, err := l.Take(cctx, secret, quota.Units("units", 20))
		second <- err
	}()
	waitQueued(t, st, 1)
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("a decision abandoned while it waited: %v, want context.Canceled", err)
	}
	close(gate.hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	us, err := l.Status(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Used != 11 {
		t.Fatalf("the store counts %d units; want 11: the abandoned decision of 20 was sent", us[0].Used)
	}
}

// gatePipes holds the first pipeline after on() until hold is closed.
type gatePipes struct {
	mu    sync.Mutex
	armed bool
	hold  chan struct{}
	in    chan struct{}
}

func (g *gatePipes) on() { g.mu.Lock(); g.armed = true; g.mu.Unlock() }
func (g *gatePipes) pipeline(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	if armed {
		g.in <- struct{}{}
		<-g.hold
	}
	return next(ctx, cmds)
}

// waitQueued waits until n decisions wait for a lane of st.
func waitQueued(t *testing.T, st *redisstore.Store, n int) {
	t.Helper()
	for !redisstore.PipelineQueued(st, n) {
		runtime.Gosched()
	}
}

// TestPipelinedAfterScriptFlush: decisions sent in a pipeline after the
// server lost its scripts (a restart, SCRIPT FLUSH) load it again and are
// decided, each once.
func TestPipelinedAfterScriptFlush(t *testing.T) {
	srv := redistest.Server(t)
	c := srv.Client(t)
	st := redisstore.New(c, redisstore.WithPrefix(redistest.Prefix(t)), redisstore.WithPipelining(1))
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 1000, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Take(ctx, secret, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := l.Take(ctx, secret, quota.Units("units", 1)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	us, err := l.Status(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Used != 17 {
		t.Fatalf("the store counts %d units after 17 admitted decisions", us[0].Used)
	}
}
