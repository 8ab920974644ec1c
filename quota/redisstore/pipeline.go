package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// WithPipelining sets how many pipelines the store keeps in flight for the
// decisions concurrent callers make at once: DefaultLanes unless set;
// lanes <= 0 means DefaultLanes. Pipelining is on by default (see New);
// WithoutPipelining turns it off.
//
// A decision made while nothing waits and a lane is free goes at once, as
// without pipelining. The decisions that wait while the lanes are busy
// leave together, in one pipeline per lane (up to maxPipelined each), so
// they share the round trip and the system calls on both ends, which on a
// busy Redis cost more than the script itself. Those of one budget of one
// owner that decide (lua/lib/decide.lua) can decide (most: a single-budget charge on a log in
// order) go in one run of batch.lua, which decides them one after another
// at the same instant, each atomic and exact as alone, and pays the
// commands every decision makes (TIME, the reads of the marker and the
// sum, the writes of the log, the sum and the marker) once for all of
// them. The others go one script each.
//
// A caller whose context ends while its decision waits for a lane returns
// the context's error, and the decision is not sent. Once sent, a decision
// abandoned at its deadline may still be recorded, as without pipelining.
// A store with WithReplicas does not pipeline its decisions (each waits
// for its replicas on its own connection).
func WithPipelining(lanes int) Option {
	if lanes <= 0 {
		lanes = DefaultLanes
	}
	return func(s *Store) { s.pipe = &pipeliner{lanes: lanes} }
}

// WithoutPipelining makes the store send each decision alone, one script
// call and one round trip each, whatever other callers do at the same
// moment.
func WithoutPipelining() Option { return func(s *Store) { s.pipe = nil } }

// DefaultLanes is how many pipelines a store keeps in flight unless
// WithPipelining says otherwise.
const DefaultLanes = 4

// Lanes reports how many pipelines s keeps in flight for the decisions of
// concurrent callers (WithPipelining), or 0 when it sends each decision
// alone (WithoutPipelining, or WithReplicas).
func (s *Store) Lanes() int {
	if s.pipe == nil || s.replicas > 0 {
		return 0
	}
	return s.pipe.lanes
}

// maxPipelined bounds the decisions of one pipeline.
const maxPipelined = 128

// pipeliner queues script calls for WithPipelining.
type pipeliner struct {
	lanes  int
	mu     sync.Mutex
	queue  []*pipedCall
	flying int // pipelines being sent

	gate    atomic.Pointer[chan struct{}] // tests: senders wait for it to close
	batched atomic.Int64                  // decisions batch.lua decided
}

// pipedCall is one script call waiting for, or riding in, a pipeline.
type pipedCall struct {
	ctx   context.Context
	sc    *redis.Script
	keys  []string
	args  []any
	reply []any
	err   error
	done  chan struct{}
}

// runPiped is run through the pipeliner.
func (s *Store) runPiped(ctx context.Context, sc *redis.Script, keys []string, args []any) ([]any, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := s.pipe
	p.mu.Lock()
	if p.flying < p.lanes && len(p.queue) == 0 && p.gate.Load() == nil {
		// nothing waits and a lane is free: the call goes at once, as
		// without pipelining (no pipeline of one, no hand-off to another
		// goroutine); calls that queue meanwhile leave when it is back
		p.flying++
		p.mu.Unlock()
		v, err := s.run(ctx, sc, keys, args)
		p.mu.Lock()
		if len(p.queue) > 0 {
			p.mu.Unlock()
			go s.sendPiped(nil) // the lane passes to the queue
		} else {
			p.flying--
			p.mu.Unlock()
		}
		return v, err
	}
	c := &pipedCall{ctx: ctx, sc: sc, keys: keys, args: args, done: make(chan struct{})}
	p.queue = append(p.queue, c)
	lead := p.flying < p.lanes
	if lead {
		p.flying++
	}
	p.mu.Unlock()
	switch {
	case lead && ctx.Done() == nil:
		// a caller that cannot give up sends what waits itself, until
		// its own reply is in; then a goroutine sends the rest
		s.sendPiped(c)
	case lead:
		go s.sendPiped(nil)
	}
	select {
	case <-c.done:
		return c.reply, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// sendPiped sends pipelines until the queue is empty. With own, it runs on
// that caller's goroutine until own is answered, and goes on in a
// goroutine of its own.
func (s *Store) sendPiped(own *pipedCall) {
	p := s.pipe
	for {
		if g := p.gate.Load(); g != nil {
			<-*g
		}
		p.mu.Lock()
		if len(p.queue) == 0 {
			p.flying--
			p.mu.Unlock()
			return
		}
		n := min(len(p.queue), maxPipelined)
		batch := make([]*pipedCall, n)
		copy(batch, p.queue)
		p.queue = append(p.queue[:0], p.queue[n:]...)
		p.mu.Unlock()
		s.sendBatch(batch)
		if own != nil {
			select {
			case <-own.done:
				go s.sendPiped(nil)
				return
			default:
			}
		}
	}
}

// sendBatch sends batch in one pipeline and answers every call of it.
func (s *Store) sendBatch(batch []*pipedCall) {
	live := batch[:0]
	var last time.Time
	bounded := true
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err // abandoned before it was sent: not recorded
			close(c.done)
			continue
		}
		live = append(live, c)
		if d, ok := c.ctx.Deadline(); !ok {
			bounded = false
		} else if d.After(last) {
			last = d
		}
	}
	if len(live) == 0 {
		return
	}
	// the pipeline lives as long as its longest-lived caller wants it;
	// each caller gives up at its own deadline (runPiped)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if bounded {
		ctx, cancel = context.WithDeadline(ctx, last)
		defer cancel()
	}
	// and it ends once every caller has given up: go-redis sends a
	// pipeline again after a network error (a connection the server
	// closed), and a decision whose caller was told it failed must not
	// be sent after that (a caller that cannot give up keeps it going)
	var waiting atomic.Int64
	waiting.Store(int64(len(live)))
	for _, c := range live {
		stop := context.AfterFunc(c.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	// the decisions of one budget that wait together go as one batch
	// (batch.lua); those it leaves, and the rest, one script each
	rest := s.sendRound(ctx, live, true)
	for len(rest) > 0 {
		live = rest[:0]
		for _, c := range rest {
			if err := c.ctx.Err(); err != nil {
				c.err = err // abandoned before it was sent: not recorded
				close(c.done)
				continue
			}
			live = append(live, c)
		}
		rest = s.sendRound(ctx, live, false)
	}
}

// sendRound sends calls in one pipeline and answers each, except those a
// batch left undecided, which it returns to be sent one by one. With
// batch, calls of one budget that batch.lua can decide go together.
func (s *Store) sendRound(ctx context.Context, calls []*pipedCall, batch bool) (rest []*pipedCall) {
	if len(calls) == 0 {
		return nil
	}
	alone, groups := calls, [][]*pipedCall(nil)
	if batch {
		alone, groups = groupCalls(calls)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(alone))
	for i, c := range alone {
		cmds[i] = c.sc.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	gcmds := make([]*redis.Cmd, len(groups))
	for i, g := range groups {
		keys, args := batchArgs(g)
		gcmds[i] = batchScript.EvalSha(ctx, pipe, keys, args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for i, c := range alone {
		v, err := replySlice(cmds[i])
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// the server lost its scripts (a restart, SCRIPT FLUSH): this
			// one goes alone, loading the script (nothing ran), unless its
			// caller gave up meanwhile: it was told so, and a decision
			// abandoned before it is sent is never recorded
			if cerr := c.ctx.Err(); cerr != nil {
				v, err = nil, cerr
			} else {
				v, err = replySlice(c.sc.Run(c.ctx, s.rdb, c.keys, c.args...))
			}
		}
		c.reply, c.err = s.reloadOn(v, err)
		close(c.done)
	}
	for i, g := range groups {
		replies, err := batchReplies(gcmds[i], len(g))
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// nothing ran: these go one by one (those whose callers gave
			// up are not sent: sendBatch), and the batch script is loaded
			// for the batches to come; a load that fails (a Cluster shard
			// down) is tried again at the next NOSCRIPT
			_ = batchScript.Load(ctx, s.rdb).Err()
			rest = append(rest, g...)
			continue
		}
		if err != nil {
			for _, c := range g {
				c.reply, c.err = s.reloadOn(nil, err)
				close(c.done)
			}
			continue
		}
		for j, v := range replies {
			g[j].reply = v
			close(g[j].done)
		}
		s.pipe.batched.Add(int64(len(replies)))
		rest = append(rest, g[len(replies):]...)
	}
	return rest
}
