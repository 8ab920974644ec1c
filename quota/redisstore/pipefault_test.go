package redisstore_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestPipelinedNoScriptAbandonedIsNotResent: a pipelined decision that
// met NOSCRIPT (the server lost its scripts: nothing ran) and whose caller
// gave up before it was sent again is not sent again: the caller was told
// its context's error, so the store must not record it.
func TestPipelinedNoScriptAbandonedIsNotResent(t *testing.T) {
	srv := redistest.Server(t)
	c := srv.Client(t)
	h := &afterPipe{}
	c.AddHook(redistest.Hook{Pipeline: h.pipeline})
	st := redisstore.New(c, redisstore.WithPrefix(redistest.Prefix(t)), redisstore.WithPipelining(1))
	redisstore.ForcePipeline(st) // even a decision made alone goes in a pipeline
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
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
	cctx, cancel := context.WithCancel(ctx)
	returned := make(chan error, 1)
	h.set(func() {
		// the pipeline came back with NOSCRIPT; the caller gives up and
		// returns before its decision could be sent again
		cancel()
		<-h.wait
	})
	h.wait = make(chan struct{})
	go func() {
		_, err := l.Take(cctx, secret, quota.Units("units", 30))
		returned <- err
		close(h.wait)
	}()
	if err := <-returned; !errors.Is(err, context.Canceled) {
		t.Fatalf("Take = %v; want context.Canceled", err)
	}
	// let the sender finish: another decision goes through the one lane
	if _, err := l.Take(ctx, secret, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	us, err := l.Status(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Used != 2 {
		t.Fatalf("the store counts %d units; want 2: the abandoned decision of 30 was sent after its caller gave up", us[0].Used)
	}
}

// afterPipe runs f once, after the first pipeline of script calls returns.
type afterPipe struct {
	mu   sync.Mutex
	f    func()
	wait chan struct{}
}

func (h *afterPipe) set(f func()) { h.mu.Lock(); h.f = f; h.mu.Unlock() }
func (h *afterPipe) pipeline(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
	err := next(ctx, cmds)
	h.mu.Lock()
	f := h.f
	h.f = nil
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return err
}

// TestPipelinedRetryAbandonedIsNotResent: a pipeline fails on a connection
// the server closed (it restarted) and go-redis sends it again on a new
// one; a caller that gave up before that second send was told its
// context's error, so its decision must not be sent again and recorded.
// Without pipelining go-redis retries under the caller's own context and
// stops when it ends.
func TestPipelinedRetryAbandonedIsNotResent(t *testing.T) {
	srv := redistest.Server(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: 3, PoolSize: 1})
	t.Cleanup(func() { _ = c.Close() })
	st := redisstore.New(c, redisstore.WithPrefix(redistest.Prefix(t)), redisstore.WithPipelining(1))
	redisstore.ForcePipeline(st) // even a decision made alone goes in a pipeline
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Take(ctx, secret, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	// the server closes the store's pooled connection
	raw := srv.Client(t)
	if err := raw.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan struct{})
	h := &dialGate{f: func(dctx context.Context) {
		// the first send failed; before go-redis sends it again the
		// caller gives up and returns
		cancel()
		<-gone
		select { // the pipeline's context, if it follows its callers
		case <-dctx.Done():
		case <-time.After(time.Second):
		}
	}}
	c.AddHook(redistest.Hook{Dial: h.dial})
	var takeErr error
	go func() {
		_, takeErr = l.Take(cctx, secret, quota.Units("units", 30))
		close(gone)
	}()
	<-gone
	if !errors.Is(takeErr, context.Canceled) {
		t.Fatalf("Take = %v; want context.Canceled", takeErr)
	}
	h.off()
	if _, err := l.Take(ctx, secret, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	us, err := l.Status(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Used != 2 {
		t.Fatalf("the store counts %d units; want 2: the decision of 30 whose caller gave up before go-redis sent it again was recorded", us[0].Used)
	}
}

// dialGate runs f once, in the dial of a new connection.
type dialGate struct {
	mu sync.Mutex
	f  func(context.Context)
}

func (h *dialGate) off() { h.mu.Lock(); h.f = nil; h.mu.Unlock() }
func (h *dialGate) dial(ctx context.Context, network, addr string, next redis.DialHook) (net.Conn, error) {
	h.mu.Lock()
	f := h.f
	h.f = nil
	h.mu.Unlock()
	if f != nil {
		f(ctx)
	}
	return next(ctx, network, addr)
}
