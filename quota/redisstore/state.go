package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quotactl/quotactl/quota/backend"
	"github.com/redis/go-redis/v9"
)

// backend.StateStore, for the jobs package's checkpoints and run history:
//
//	PREFIX state:KEY       string
//	PREFIX rec:STREAM      list, newest first (LPUSH, LTRIM to keep)
//	PREFIX streams         set of stream names

// SaveState implements backend.StateStore: it sets key to value.
func (s *Store) SaveState(ctx context.Context, key string, value []byte) error {
	err := s.do(ctx, func(ctx context.Context) error {
		return s.rdb.Set(ctx, s.catalogKey("state:", key), value, 0).Err()
	})
	if err != nil {
		return failed(ctx, "save state", err)
	}
	return nil
}

// LoadState implements backend.StateStore: key's value, or an error wrapping
// backend.ErrNotFound.
func (s *Store) LoadState(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := s.do(ctx, func(ctx context.Context) (err error) {
		v, err = s.rdb.Get(ctx, s.catalogKey("state:", key)).Bytes()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: %w: state %q", backend.ErrNotFound, key)
	}
	if err != nil {
		return nil, failed(ctx, "load state", err)
	}
	return v, nil
}

// AppendRecord implements backend.StateStore: it appends rec to stream,
// keeping the newest keep records (keep <= 0: all).
func (s *Store) AppendRecord(ctx context.Context, stream string, rec []byte, keep int) error {
	err := s.do(ctx, func(ctx context.Context) error {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			key := s.catalogKey("rec:", stream)
			p.LPush(ctx, key, rec)
			if keep > 0 {
				p.LTrim(ctx, key, 0, int64(keep)-1)
			}
			p.SAdd(ctx, s.catalogKey("streams"), stream)
			return nil
		})
		return err
	})
	if err != nil {
		return failed(ctx, "append record", err)
	}
	return nil
}

// Records implements backend.StateStore: up to limit records of stream,
// newest first (limit <= 0: all).
func (s *Store) Records(ctx context.Context, stream string, limit int) ([][]byte, error) {
	stop := int64(-1)
	if limit > 0 {
		stop = int64(limit) - 1
	}
	var vals []string
	err := s.do(ctx, func(ctx context.Context) (err error) {
		vals, err = s.rdb.LRange(ctx, s.catalogKey("rec:", stream), 0, stop).Result()
		return err
	})
	if err != nil {
		return nil, failed(ctx, "records", err)
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return out, nil
}

// Streams implements backend.StateStore: the names of the streams that start
// with prefix, sorted.
func (s *Store) Streams(ctx context.Context, prefix string) ([]string, error) {
	var names []string
	err := s.do(ctx, func(ctx context.Context) (err error) {
		names, err = s.rdb.SMembers(ctx, s.catalogKey("streams")).Result()
		return err
	})
	if err != nil {
		return nil, failed(ctx, "streams", err)
	}
	out := names[:0]
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}
