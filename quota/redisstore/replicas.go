package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// errReplicas is wrapped by a decision that fewer replicas than
// WithReplicas asks acknowledged in time.
var errReplicas = errors.New("fewer replicas acknowledged the decision than asked")

// runWait is run followed by WAIT replicas timeout on the same connection,
// in one round trip (a pipeline): WAIT counts the replicas that have
// acknowledged every write of that connection, the script's included. It
// returns the script's reply, and short (wrapping errReplicas) when fewer
// replicas acknowledged it than asked; err is any other failure.
func (s *Store) runWait(ctx context.Context, sc *redis.Script, keys []string, args []any) (reply []any, short, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if !s.guard || ctx.Done() == nil {
		return s.evalWait(ctx, sc, keys, args)
	}
	type result struct {
		v          []any
		short, err error
	}
	ch := make(chan result, 1)
	go func() {
		v, short, err := s.evalWait(ctx, sc, keys, args)
		ch <- result{v, short, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.short, r.err
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

func (s *Store) evalWait(ctx context.Context, sc *redis.Script, keys []string, args []any) ([]any, error, error) {
	var c *redis.Client
	switch cl := s.rdb.(type) {
	case *redis.Client:
		c = cl
	case *redis.ClusterClient:
		var err error
		if c, err = cl.MasterForKey(ctx, keys[0]); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("WAIT for replicas needs a *redis.Client or *redis.ClusterClient, not %T", s.rdb)
	}
	ms := max(s.replicaTimeout.Milliseconds(), 1) // WAIT n 0 would wait for ever
	for attempt := 0; ; attempt++ {
		p := c.Pipeline()
		var eval *redis.Cmd
		if attempt == 0 {
			eval = sc.EvalSha(ctx, p, keys, args...)
		} else {
			eval = sc.Eval(ctx, p, keys, args...)
		}
		wait := p.Do(ctx, "WAIT", s.replicas, ms)
		_, _ = p.Exec(ctx)
		if err := eval.Err(); err != nil {
			if attempt == 0 && redis.HasErrorPrefix(err, "NOSCRIPT") {
				continue
			}
			return nil, nil, err
		}
		reply, err := replySlice(eval)
		if err != nil {
			return nil, nil, err
		}
		got, err := wait.Int64()
		if err != nil {
			return reply, fmt.Errorf("%w: WAIT %d %d: %w (the decision is recorded on the master and counts)", errReplicas, s.replicas, ms, err), nil
		}
		if got < int64(s.replicas) {
			return reply, fmt.Errorf("%w: %d of %d within %v (the decision is recorded on the master and counts)", errReplicas, got, s.replicas, s.replicaTimeout), nil
		}
		return reply, nil, nil
	}
}
