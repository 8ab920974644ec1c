// Package redisstore is a backend.Store on Redis, for budgets shared by many
// processes on many hosts. It works with a standalone server, Sentinel (a
// failover client) and Cluster, through redis.UniversalClient.
//
// Each decision is decided inside one Lua script run (EVALSHA, falling back
// to EVAL when the server has lost the script), so it is atomic across every
// budget a charge names. Decisions that concurrent callers make while others
// are under way share pipelines, and those of one budget share one script
// run that decides them one after another (WithPipelining, on by default). The log of one (api, credential, budget) is a sorted set with one
// member per call whatever its cost ("NONCE:COST", "NONCE:h:COST" for a
// lease's held block, scored by the µs it was
// recorded), next to a running sum and an exhausted-until key. All keys of
// one account share the hash tag "{API/ACCOUNT}" (ACCOUNT: the owner's name,
// or the fingerprint of a credential that is its own owner), so a multi-budget
// charge touches one Cluster slot. Keys expire when idle: a log lives until
// its newest entry leaves the window.
//
// Each owner also has a store-loss marker (KEYPREFIX{API/OWNER}:mark) that
// the same scripts keep, so that a Redis that lost acknowledged state (a
// restart without persistence, FLUSHALL, eviction, a failover that missed
// the last writes) is noticed by the next decision on that owner instead of
// silently granting spent units again: see quota.WithStoreLoss. Open (not
// New) refuses a server whose maxmemory-policy can evict the store's keys,
// and WithReplicas makes each decision wait for replicas.
//
// The store's clock is Redis TIME, unless a request carries a Now (a test's
// injected clock). Redis knows no time zones: for a daily (monthly) window
// the Go side passes the local midnights (of the 1st) around its estimate of
// now, and the script picks the day (month) that holds its own now.
//
// Credentials reach the store as fingerprints only; no secret is ever
// written to Redis.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
	"github.com/redis/go-redis/v9"
)

// Store is a backend.Store and backend.StateStore on Redis. It is safe for
// concurrent use. Make one with New; the zero value is not usable.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	// guard runs each command in its own goroutine so that a context
	// deadline is honoured even when the client ignores contexts (go-redis
	// does unless ContextTimeoutEnabled is set).
	guard bool
	// skew is the Redis clock minus the host clock (ns), learned only when
	// they were found more than a day apart; it corrects the estimate of
	// Redis's now used to pick a calendar window's boundaries.
	skew atomic.Int64

	// caches of script arguments, guarded by boxMu
	boxMu sync.RWMutex
	boxes map[backend.Budget]boxed
	days  map[backend.Window]*dayBounds

	// marks remembers each owner's store-loss marker (loss.go).
	marks marks
	// own is the marker field (w:BUCKET) of this store's admissions
	// (loss.go: ownField)
	own string

	allowEviction  bool          // WithAllowEviction
	replicas       int           // WithReplicas: WAIT for this many
	replicaTimeout time.Duration // and this long

	pipe *pipeliner // WithPipelining

	general bool // tests only: every take runs take.lua's general path
	// tests only: a one-debit take runs batch.lua with one decision first
	// (decide, as take.lua's fast path does), counting what it decided
	probe *atomic.Int64
}

var (
	_ backend.Store      = (*Store)(nil)
	_ backend.StateStore = (*Store)(nil)
)

// Option configures a Store in New.
type Option func(*Store)

// WithPrefix sets the prefix of every key the store writes. Default:
// "quota:". Give each application sharing a Redis its own prefix. The prefix
// must not hold '{' or '}', which would make it the Cluster hash tag of every
// key.
func WithPrefix(prefix string) Option { return func(s *Store) { s.prefix = prefix } }

// New returns a Store on client, with the key prefix "quota:" unless
// WithPrefix says otherwise. The client may be a *redis.Client (standalone,
// or Sentinel through redis.NewFailoverClient), a *redis.ClusterClient, or
// any redis.UniversalClient. The store does not own the client: Close leaves
// it open.
//
// Every call honours its context's deadline. A client built with
// ContextTimeoutEnabled does that itself, and is the cheaper choice; for any
// other client the store waits for the reply in a separate goroutine and
// gives up at the deadline with an error wrapping backend.ErrStoreUnavailable
// (and the context's error). Either way a decision abandoned at its deadline
// may still be recorded by the server: the failure errs towards counting.
//
// Decisions that concurrent callers make while others are under way leave
// together in pipelines, DefaultLanes in flight, and those of one budget
// are decided by one script run (WithPipelining; WithoutPipelining sends
// each alone).
//
// The server must be Redis 5 or later (scripts replicate their effects), or
// a compatible one. New does not talk to the server: Open does the same and
// also refuses an unsafe eviction policy, and is what most callers want.
func New(client redis.UniversalClient, opts ...Option) *Store {
	s := &Store{rdb: client, prefix: "quota:", boxes: make(map[backend.Budget]boxed), days: make(map[backend.Window]*dayBounds), own: ownField(),
		pipe: &pipeliner{lanes: DefaultLanes}}
	for _, o := range opts {
		o(s)
	}
	s.guard = !honoursContext(client)
	return s
}

// honoursContext reports whether client applies context deadlines to its
// network I/O itself.
func honoursContext(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// Close implements backend.Store. The store owns nothing: the client stays
// open for its owner to close.
func (s *Store) Close() error { return nil }

// Prefix returns the store's key prefix.
func (s *Store) Prefix() string { return s.prefix }

// keys returns the log, sum and exhausted-until keys of each budget of one
// credential, prefix{api/fp}:log:budget, ..., then, with keep, the keep key
// of each budget (see lua/lib/log.lua), built in one allocation.
func (s *Store) keys(api, fp string, budgets int, name func(int) string, keep ...bool) []string {
	kinds := [4]string{":log:", ":sum:", ":exh:", ":keep:"}
	nk := 3
	if len(keep) > 0 && keep[0] {
		nk = 4
	}
	tagLen := len(s.prefix) + len(api) + len(fp) + 3
	size := 0
	for i := range budgets {
		size += 3*(tagLen+5+len(name(i))) + (nk-3)*(tagLen+6+len(name(i)))
	}
	var b strings.Builder
	b.Grow(size)
	write := func(i int, kind string) {
		b.WriteString(s.prefix)
		b.WriteByte('{')
		b.WriteString(api)
		b.WriteByte('/')
		b.WriteString(fp)
		b.WriteByte('}')
		b.WriteString(kind)
		b.WriteString(name(i))
	}
	for i := range budgets {
		for _, kind := range kinds[:3] {
			write(i, kind)
		}
	}
	if nk == 4 {
		for i := range budgets {
			write(i, kinds[3])
		}
	}
	all := b.String()
	out := make([]string, 0, nk*budgets+1) // room for the marker key
	off := 0
	for i := range budgets {
		n := tagLen + 5 + len(name(i))
		for range 3 {
			out = append(out, all[off:off+n])
			off += n
		}
	}
	if nk == 4 {
		for i := range budgets {
			n := tagLen + 6 + len(name(i))
			out = append(out, all[off:off+n])
			off += n
		}
	}
	return out
}

// CredentialTag returns the hash tag shared by every key of one account of
// api: "{API/ACCOUNT}", where account is an owner name or the fingerprint of
// a credential that is its own owner.
func CredentialTag(api, fingerprint string) string { return "{" + api + "/" + fingerprint + "}" }

func (s *Store) catalogKey(parts ...string) string { return s.prefix + strings.Join(parts, "") }

// unavailable wraps a Redis or network error for op.
func unavailable(op string, err error) error {
	return fmt.Errorf("redisstore: %s: %w: %w", op, backend.ErrStoreUnavailable, err)
}

// failed is unavailable for an error met under ctx: when ctx has ended
// (a client that honours contexts reports only "i/o timeout"), the error
// also wraps ctx.Err(), so errors.Is(err, context.DeadlineExceeded) holds.
func failed(ctx context.Context, op string, err error) error {
	if ctx == nil {
		return invalid("%s: nil context", op)
	}
	cerr := ctx.Err()
	if d, ok := ctx.Deadline(); ok && cerr == nil && !time.Now().Before(d) {
		cerr = context.DeadlineExceeded // the socket deadline fired first
	}
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("redisstore: %s: %w: %w (%w)", op, backend.ErrStoreUnavailable, err, cerr)
	}
	return unavailable(op, err)
}

// errNilContext is what run and do return for a nil context (failed names
// the operation instead).
var errNilContext = fmt.Errorf("redisstore: %w: nil context", backend.ErrInvalid)

func invalid(format string, args ...any) error {
	return fmt.Errorf("redisstore: %w: "+format, append([]any{backend.ErrInvalid}, args...)...)
}

// run runs script through s's client: EVALSHA, or EVAL when the server
// does not have the script. When the client ignores contexts, it waits for
// the reply in another goroutine so that ctx's deadline still holds.
func (s *Store) run(ctx context.Context, sc *redis.Script, keys []string, args []any) ([]any, error) {
	if ctx == nil {
		return nil, errNilContext // failed says it as ErrInvalid
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !s.guard || ctx.Done() == nil {
		return s.reloadOn(replySlice(sc.Run(ctx, s.rdb, keys, args...)))
	}
	type result struct {
		v   []any
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := s.reloadOn(replySlice(sc.Run(ctx, s.rdb, keys, args...)))
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// reloadOn passes a script's reply on, and, when a Cluster client could
// not reach the node that serves the keys, asks it to reload the slot map:
// go-redis reloads it on MOVED or READONLY, or once a minute
// (ClusterStateReloadInterval), not when the node is gone. After a master
// was killed and its replica promoted, every decision on its slots failed
// with ErrStoreUnavailable, dialing the dead master, for up to a minute.
func (s *Store) reloadOn(v []any, err error) ([]any, error) {
	if err != nil {
		if c, ok := s.rdb.(*redis.ClusterClient); ok {
			var rerr redis.Error
			if !errors.As(err, &rerr) && !errors.Is(err, context.Canceled) {
				c.ReloadState(context.Background())
			}
		}
	}
	return v, err
}

func replySlice(cmd *redis.Cmd) ([]any, error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	a, ok := v.([]any)
	if !ok || len(a) < 2 {
		return nil, fmt.Errorf("unexpected script reply %T %v", v, v)
	}
	return a, nil
}

// do runs f (a few plain commands) honouring ctx's deadline like run.
func (s *Store) do(ctx context.Context, f func(context.Context) error) error {
	if ctx == nil {
		return errNilContext
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !s.guard || ctx.Done() == nil {
		return f(ctx)
	}
	ch := make(chan error, 1)
	go func() { ch <- f(ctx) }()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func num(v any) (int64, error) {
	switch n := v.(type) {
	case int64:
		return n, nil
	}
	return 0, fmt.Errorf("unexpected script reply element %T %v", v, v)
}

func ints(a []any) ([]int64, error) {
	out := make([]int64, len(a))
	for i, v := range a {
		n, err := num(v)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

func usTime(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}
