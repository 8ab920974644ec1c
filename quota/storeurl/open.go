package storeurl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// DefaultOpenTimeout is how long Open waits, by default, for a Redis form's
// server (and Sentinels) to answer its checks: ?open_timeout= changes it.
const DefaultOpenTimeout = 5 * time.Second

// Open opens the store s describes. See the package Open.
func (s *Spec) Open(ctx context.Context) (quota.Store, error) {
	switch s.Kind {
	case Memory:
		return quota.NewMemoryStore(), nil
	case SQLite:
		return openSQLite(s, false)
	case Redis, Sentinel, Cluster:
		return s.openRedis(ctx)
	}
	return nil, &Error{URL: s.String(), Reason: "unknown kind " + string(s.Kind)}
}

// OpenReadOnly opens the store s describes for inspection only. See the
// package OpenReadOnly.
func (s *Spec) OpenReadOnly(ctx context.Context) (quota.Store, error) {
	if s.Kind == SQLite {
		return openSQLite(s, true)
	}
	return s.Open(ctx)
}

// client makes the go-redis client for a Redis form.
func (s *Spec) client() (redis.UniversalClient, error) {
	// NewUniversalClient would pick the same clients, but only from
	// UniversalOptions: converting the options go-redis parsed for each form
	// into those would drop some, and a one-seed cluster would come out as a
	// plain client. So each form makes its own client directly.
	switch {
	case s.simple != nil:
		o := *s.simple
		return redis.NewClient(&o), nil
	case s.failover != nil:
		o := *s.failover
		return redis.NewFailoverClient(&o), nil
	case s.cluster != nil:
		o := *s.cluster
		return redis.NewClusterClient(&o), nil
	}
	return nil, &Error{URL: s.String(), Reason: "not parsed: use Parse"}
}

// openTimeout is the URL's open_timeout, else the default.
func (s *Spec) openTimeout() time.Duration {
	if s.OpenTimeout > 0 {
		return s.OpenTimeout
	}
	return DefaultOpenTimeout
}

// openRedis opens a Redis form: it checks that the server answers and its
// eviction policy, within open_timeout: the client's own retries (dial
// attempts within command retries within Sentinel lookups) could otherwise
// take minutes to give up.
func (s *Spec) openRedis(ctx context.Context) (quota.Store, error) {
	limit := s.openTimeout()
	octx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// unavailable is the error for a check that failed: the cause as text,
	// scrubbed of passwords, not a wrapped go-redis error
	unavailable := func(cause string) error {
		return fmt.Errorf("storeurl: %s: %w: %s", s.String(), quota.ErrStoreUnavailable, s.scrub(cause))
	}
	what := ""
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	var st quota.Store
	err = bounded(octx, func() error {
		if err := c.Ping(octx).Err(); err != nil {
			return err
		}
		var err error
		st, err = newRedisStore(octx, c, s)
		return err
	})
	if err == nil {
		return st, nil
	}
	_ = c.Close()
	switch {
	case errors.Is(err, redisstore.ErrUnsafeConfig) || errors.Is(err, quota.ErrInvalid):
		return nil, fmt.Errorf("storeurl: %s: %w", s.String(), err)
	case expired(octx) && !expired(ctx):
		// go-redis then says little ("context deadline exceeded", "i/o
		// timeout"): say which bound ran out
		return nil, unavailable(fmt.Sprintf("%sno answer within %v (open_timeout)", what, limit))
	}
	return nil, unavailable(what + err.Error())
}

// scrub hides the URL's passwords in msg.
func (s *Spec) scrub(msg string) string { return scrub(msg, []string{s.password, s.sentinelPassword}) }

// bounded runs f and waits for it until ctx ends: the go-redis clients Open
// makes do not apply ctx's deadline to their reads (ContextTimeoutEnabled
// is the URL's choice), so a server that accepts connections and answers
// nothing would hold f for the client's own timeouts, retried. An f left
// behind ends when the client is closed or its timeouts run out.
func bounded(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// expired reports whether ctx's deadline has passed (a socket deadline set
// from it may fire before ctx says so).
func expired(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(d)
}
