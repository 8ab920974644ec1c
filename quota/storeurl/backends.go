package storeurl

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

func openSQLite(s *Spec, readOnly bool) (quota.Store, error) {
	var opts []sqlitestore.Option
	if readOnly {
		opts = append(opts, sqlitestore.WithReadOnly())
	}
	if s.busyTimeout != nil {
		opts = append(opts, sqlitestore.WithBusyTimeout(*s.busyTimeout))
	}
	// sqlitestore's errors name the path and say what is wrong (not a
	// database, newer schema, cannot lock); they need no more context.
	return sqlitestore.Open(s.Path, opts...)
}

// redisStore is a redisstore.Store that owns its client: storeurl made the
// client, so closing the store closes it too.
type redisStore struct {
	*redisstore.Store
	client redis.UniversalClient
}

var (
	_ quota.Store      = (*redisStore)(nil)
	_ quota.StateStore = (*redisStore)(nil)
)

// newRedisStore opens a redisstore.Store on c with the URL's options; Open
// checks the server's eviction policy.
func newRedisStore(ctx context.Context, c redis.UniversalClient, s *Spec) (quota.Store, error) {
	var opts []redisstore.Option
	if s.Prefix != "" {
		opts = append(opts, redisstore.WithPrefix(s.Prefix))
	}
	if s.AllowEviction {
		opts = append(opts, redisstore.WithAllowEviction())
	}
	if s.Replicas > 0 {
		opts = append(opts, redisstore.WithReplicas(s.Replicas, s.ReplicaTimeout))
	}
	switch {
	case s.Pipelining > 0:
		opts = append(opts, redisstore.WithPipelining(s.Pipelining))
	case s.Pipelining < 0:
		opts = append(opts, redisstore.WithoutPipelining())
	}
	st, err := redisstore.Open(ctx, c, opts...)
	if err != nil {
		return nil, err
	}
	return &redisStore{Store: st, client: c}, nil
}

// Close closes the store and its client.
func (s *redisStore) Close() error { return errors.Join(s.Store.Close(), s.client.Close()) }
