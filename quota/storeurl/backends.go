package storeurl

import (
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

func newRedisStore(c redis.UniversalClient, prefix string) quota.Store {
	var opts []redisstore.Option
	if prefix != "" {
		opts = append(opts, redisstore.WithPrefix(prefix))
	}
	return &redisStore{Store: redisstore.New(c, opts...), client: c}
}

// Close closes the store and its client.
func (s *redisStore) Close() error { return errors.Join(s.Store.Close(), s.client.Close()) }
