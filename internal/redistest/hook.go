package redistest

import (
	"context"
	"net"

	"github.com/redis/go-redis/v9"
)

// Hook is a go-redis hook made of functions, for tests that count, hold or
// break what a client sends: Dial runs in place of each new connection's
// dial, Process in place of each command, Pipeline in place of each
// pipeline (and transaction); each calls next to go on. A nil function
// lets its calls through. Add it with the client's AddHook:
//
//	var sent atomic.Int64
//	c.AddHook(redistest.Hook{Process: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
//		sent.Add(1)
//		return next(ctx, cmd)
//	}})
type Hook struct {
	Dial     func(ctx context.Context, network, addr string, next redis.DialHook) (net.Conn, error)
	Process  func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error
	Pipeline func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error
}

var _ redis.Hook = Hook{}

// DialHook implements redis.Hook.
func (h Hook) DialHook(next redis.DialHook) redis.DialHook {
	if h.Dial == nil {
		return next
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return h.Dial(ctx, network, addr, next)
	}
}

// ProcessHook implements redis.Hook.
func (h Hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	if h.Process == nil {
		return next
	}
	return func(ctx context.Context, cmd redis.Cmder) error { return h.Process(ctx, cmd, next) }
}

// ProcessPipelineHook implements redis.Hook.
func (h Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	if h.Pipeline == nil {
		return next
	}
	return func(ctx context.Context, cmds []redis.Cmder) error { return h.Pipeline(ctx, cmds, next) }
}
