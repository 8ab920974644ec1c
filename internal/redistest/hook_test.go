package redistest_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
)

// TestHook: each function of a Hook runs in place of the call it names,
// and a nil one lets its calls through.
func TestHook(t *testing.T) {
	ctx := context.Background()
	c := redistest.MiniClient(t, redistest.Mini(t))
	// go-redis sends commands of its own on a new connection (HELLO,
	// CLIENT SETINFO): count only the test's.
	var dials, cmds, pipes atomic.Int64
	c.AddHook(redistest.Hook{
		Dial: func(ctx context.Context, network, addr string, next redis.DialHook) (net.Conn, error) {
			dials.Add(1)
			return next(ctx, network, addr)
		},
		Process: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			switch cmd.Name() {
			case "set":
				cmds.Add(1)
			case "get":
				cmds.Add(1)
				return errors.New("held")
			}
			return next(ctx, cmd)
		},
		Pipeline: func(ctx context.Context, cs []redis.Cmder, next redis.ProcessPipelineHook) error {
			if cs[0].Name() == "incr" {
				pipes.Add(1)
			}
			return next(ctx, cs)
		},
	})
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, "k").Err(); err == nil || err.Error() != "held" {
		t.Fatalf("GET through a hook that refuses it: %v", err)
	}
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error { p.Incr(ctx, "n"); p.Incr(ctx, "n"); return nil }); err != nil {
		t.Fatal(err)
	}
	if dials.Load() == 0 || cmds.Load() != 2 || pipes.Load() != 1 {
		t.Fatalf("%d dials, %d commands, %d pipelines; want some, 2, 1", dials.Load(), cmds.Load(), pipes.Load())
	}

	// The empty Hook passes everything through.
	c.AddHook(redistest.Hook{})
	if n, err := c.Incr(ctx, "n").Result(); err != nil || n != 3 {
		t.Fatalf("INCR through an empty hook: %d, %v; want 3", n, err)
	}
}
