package storeurl

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
)

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

func (s *Spec) openRedis(ctx context.Context) (quota.Store, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("storeurl: %s: %w: %s", s.String(), quota.ErrStoreUnavailable, scrub(err.Error(), []string{s.password, s.sentinelPassword}))
	}
	st, err := newRedisStore(ctx, c, s)
	if err != nil {
		_ = c.Close()
		if errors.Is(err, quota.ErrStoreUnavailable) {
			return nil, fmt.Errorf("storeurl: %s: %s", s.String(), scrub(err.Error(), []string{s.password, s.sentinelPassword}))
		}
		return nil, fmt.Errorf("storeurl: %s: %w", s.String(), err)
	}
	return st, nil
}
