package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
)

// The catalog lives outside the credentials' hash tags, one command (or a
// non-transactional pipeline) at a time, which Cluster allows:
//
//	PREFIX apis            set of API names
//	PREFIX budgets:API     hash budget name -> JSON of quota.Budget
//	PREFIX creds:API       hash fingerprint -> label

// DefineBudgets implements quota.Store: it records budget definitions for
// api, replacing any of the same name.
func (s *Store) DefineBudgets(ctx context.Context, api string, budgets []quota.Budget) error {
	if err := quota.CheckName("api", api); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	fields := make([]any, 0, 2*len(budgets))
	for _, b := range budgets {
		if err := quota.ValidateBudgets([]quota.Budget{b}); err != nil {
			return fmt.Errorf("redisstore: %w", err)
		}
		js, err := json.Marshal(b)
		if err != nil {
			return invalid("budget %q: %v", b.Name, err)
		}
		fields = append(fields, b.Name, string(js))
	}
	return s.do(ctx, func(ctx context.Context) error {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			if len(fields) > 0 {
				p.HSet(ctx, s.catalogKey("budgets:", api), fields...)
			}
			p.SAdd(ctx, s.catalogKey("apis"), api)
			return nil
		})
		if err != nil {
			return failed(ctx, "define budgets", err)
		}
		return nil
	})
}

// DeleteBudget implements quota.Store: it removes a budget definition (not
// its logs, which expire on their own). A budget that is not defined gives
// an error wrapping quota.ErrNotFound.
func (s *Store) DeleteBudget(ctx context.Context, api, budget string) error {
	var n int64
	err := s.do(ctx, func(ctx context.Context) (err error) {
		n, err = s.rdb.HDel(ctx, s.catalogKey("budgets:", api), budget).Result()
		return err
	})
	if err != nil {
		return failed(ctx, "delete budget", err)
	}
	if n == 0 {
		return fmt.Errorf("redisstore: %w: budget %s/%s", quota.ErrNotFound, api, budget)
	}
	return nil
}

// RememberCredential implements quota.Store: it records a fingerprint used
// with api and its label (a non-empty label replaces the old one).
func (s *Store) RememberCredential(ctx context.Context, api string, cred quota.CredentialInfo) error {
	if err := checkCred(api, cred.ID); err != nil {
		return err
	}
	return s.do(ctx, func(ctx context.Context) error {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			key := s.catalogKey("creds:", api)
			if cred.Label != "" {
				p.HSet(ctx, key, cred.ID, cred.Label)
			} else {
				p.HSetNX(ctx, key, cred.ID, "")
			}
			p.SAdd(ctx, s.catalogKey("apis"), api)
			return nil
		})
		if err != nil {
			return failed(ctx, "remember credential", err)
		}
		return nil
	})
}

// List implements quota.Store: every API the store knows, sorted by name,
// with its budgets and credentials (each sorted too).
func (s *Store) List(ctx context.Context) ([]quota.APIInfo, error) {
	var (
		names   []string
		budgets []*redis.MapStringStringCmd
		creds   []*redis.MapStringStringCmd
	)
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		names, err = s.rdb.SMembers(ctx, s.catalogKey("apis")).Result()
		if err != nil || len(names) == 0 {
			return err
		}
		slices.Sort(names)
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, api := range names {
				budgets = append(budgets, p.HGetAll(ctx, s.catalogKey("budgets:", api)))
				creds = append(creds, p.HGetAll(ctx, s.catalogKey("creds:", api)))
			}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, failed(ctx, "list", err)
	}
	out := make([]quota.APIInfo, 0, len(names))
	for i, api := range names {
		info := quota.APIInfo{Name: api, Budgets: []quota.Budget{}, Credentials: []quota.CredentialInfo{}}
		bs := budgets[i].Val()
		for _, name := range slices.Sorted(maps.Keys(bs)) {
			var b quota.Budget
			if err := json.Unmarshal([]byte(bs[name]), &b); err != nil {
				return nil, fmt.Errorf("redisstore: list: budget %s/%s: bad definition %q: %w", api, name, bs[name], errors.Join(quota.ErrInvalid, err))
			}
			info.Budgets = append(info.Budgets, b)
		}
		cs := creds[i].Val()
		for _, id := range slices.Sorted(maps.Keys(cs)) {
			info.Credentials = append(info.Credentials, quota.CredentialInfo{ID: id, Label: cs[id]})
		}
		out = append(out, info)
	}
	return out, nil
}
