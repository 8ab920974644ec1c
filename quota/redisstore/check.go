package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrUnsafeConfig is wrapped by Open's error when the Redis server is
// configured so that it may drop the limiter's keys and forget spent units:
// a maxmemory-policy other than noeviction while maxmemory is set. The
// message names the setting and the server.
var ErrUnsafeConfig = errors.New("redisstore: unsafe redis configuration")

// WithAllowEviction lets Open accept a server whose maxmemory-policy may
// evict the limiter's keys. Default: such a server is refused. Evicted
// state is still found by the next decision on the owner (the store-loss
// marker) and, unless the limiter trusts the store, counts as spent.
func WithAllowEviction() Option { return func(s *Store) { s.allowEviction = true } }

// WithReplicas makes every decision wait until n replicas have acknowledged
// it (Redis WAIT n timeout, sent in the same round trip as the decision),
// so that an admitted charge survives a failover. A decision that fewer
// replicas acknowledged within timeout is an error wrapping
// backend.ErrStoreUnavailable; it stays recorded on the master (it counts:
// the conservative choice). Default: 0, no waiting. A timeout <= 0 means
// one second (WAIT never waits for ever here). The client's read timeout
// must exceed timeout. Works on a standalone or Sentinel client and on a
// Cluster client (WAIT goes to the master of the owner's slot); Open
// refuses other clients.
func WithReplicas(n int, timeout time.Duration) Option {
	if timeout <= 0 {
		timeout = time.Second
	}
	return func(s *Store) { s.replicas, s.replicaTimeout = n, timeout }
}

// Open returns New(client, opts...) after checking the server, so that an
// unsafe configuration fails at once: a maxmemory-policy that can evict the
// limiter's keys (allkeys-* evict any key; volatile-* evict keys with a
// TTL, which every log has) while maxmemory is set is an error wrapping
// ErrUnsafeConfig unless WithAllowEviction, checked on every master of a
// Cluster. The policy is read with CONFIG GET, or, where CONFIG is not
// permitted (managed Redis), from INFO memory's maxmemory and
// maxmemory_policy fields; a server that answers neither is accepted (the
// store-loss marker still finds evicted state). An unreachable server gives
// an error wrapping backend.ErrStoreUnavailable. WithReplicas(n) with n < 0 is
// an error wrapping backend.ErrInvalid.
func Open(ctx context.Context, client redis.UniversalClient, opts ...Option) (*Store, error) {
	s := New(client, opts...)
	if s.replicas < 0 {
		return nil, invalid("replicas %d: want n >= 0", s.replicas)
	}
	if s.replicas > 0 {
		switch client.(type) {
		case *redis.Client, *redis.ClusterClient:
		default:
			return nil, invalid("replicas: WAIT needs a *redis.Client or *redis.ClusterClient, not %T", client)
		}
	}
	if s.allowEviction {
		return s, nil
	}
	check := func(ctx context.Context, c *redis.Client) error { return checkEviction(ctx, c) }
	var err error
	switch c := client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Ring:
		err = c.ForEachShard(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	default:
		err = checkEvictionCmd(ctx, client, "the server")
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func checkEviction(ctx context.Context, c *redis.Client) error {
	return checkEvictionCmd(ctx, c, c.Options().Addr)
}

// checkEvictionCmd reads one server's maxmemory and maxmemory-policy and
// refuses a policy that can evict the limiter's keys.
func checkEvictionCmd(ctx context.Context, c redis.Cmdable, addr string) error {
	var (
		maxmemory int64
		policy    string
		known     bool
	)
	cfg, cerr := c.ConfigGet(ctx, "maxmemory*").Result()
	if cerr == nil && cfg["maxmemory-policy"] != "" {
		policy, known = cfg["maxmemory-policy"], true
		maxmemory, _ = strconv.ParseInt(cfg["maxmemory"], 10, 64)
	} else {
		if isNetwork(cerr) {
			return unavailable("open: config get on "+addr, cerr)
		}
		info, ierr := c.Info(ctx, "memory").Result()
		if isNetwork(ierr) {
			return unavailable("open: info memory on "+addr, ierr)
		}
		if ierr == nil {
			for line := range strings.SplitSeq(info, "\n") {
				k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
				switch k {
				case "maxmemory":
					maxmemory, _ = strconv.ParseInt(v, 10, 64)
				case "maxmemory_policy":
					policy, known = v, true
				}
			}
		}
	}
	if !known || policy == "noeviction" || maxmemory == 0 {
		return nil
	}
	what := "any key"
	if strings.HasPrefix(policy, "volatile-") {
		what = "keys with a TTL, as every log and sum of the limiter has"
	}
	return fmt.Errorf("%w: maxmemory-policy is %s with maxmemory %d on %s: Redis evicts %s when memory runs out, forgetting spent units; "+
		"set maxmemory-policy noeviction (writes then fail instead, and the limiter fails closed), or accept eviction with "+
		"?allow_eviction=true (redisstore.WithAllowEviction): evicted state is then found and counts as spent",
		ErrUnsafeConfig, policy, maxmemory, addr, what)
}

// isNetwork reports whether err is a failure to reach the server rather
// than the server's refusal of a command.
func isNetwork(err error) bool {
	if err == nil {
		return false
	}
	var re redis.Error
	return !errors.As(err, &re)
}
