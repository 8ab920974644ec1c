package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota/backend"
)

// The catalog lives outside the credentials' hash tags, one command (or a
// non-transactional pipeline) at a time, which Cluster allows:
//
//	PREFIX apis            set of API names
//	PREFIX budgets:API     hash budget name -> JSON of backend.Budget
//	PREFIX creds:API       hash fingerprint -> label, or label NUL owner
//
// A credential that is its own owner is stored as its label alone, the form
// written before owners existed, so such stores read unchanged. Changes to
// one API's credentials (UpdateCredential) are one optimistic transaction
// (WATCH, MULTI, EXEC) on its creds hash: one key, so one Cluster slot.

// DefineBudgets implements backend.Store: it records budget definitions for
// api, replacing any of the same name.
func (s *Store) DefineBudgets(ctx context.Context, api string, budgets []backend.Budget) error {
	if err := backend.CheckName("api", api); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	fields := make([]any, 0, 2*len(budgets))
	for _, b := range budgets {
		if err := backend.ValidateBudgets([]backend.Budget{b}); err != nil {
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

// DeleteBudget implements backend.Store: it removes a budget definition (not
// its logs, which expire on their own). A budget that is not defined gives
// an error wrapping backend.ErrNotFound.
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
		return fmt.Errorf("redisstore: %w: budget %s/%s", backend.ErrNotFound, api, budget)
	}
	return nil
}

// UpdateCredential implements backend.Store: it reads the API's credentials
// and writes the change in one transaction on the creds hash (WATCH, then
// MULTI/EXEC, retried when another process changed the hash in between), so
// two processes never give one label to two credentials.
func (s *Store) UpdateCredential(ctx context.Context, api string, u backend.CredentialUpdate) (backend.CredentialInfo, error) {
	if err := backend.CheckName("api", api); err != nil {
		return backend.CredentialInfo{}, fmt.Errorf("redisstore: %w", err)
	}
	key := s.catalogKey("creds:", api)
	var (
		out      backend.CredentialInfo
		applyErr error
	)
	err := s.do(ctx, func(ctx context.Context) error {
		for range maxCatalogRetries {
			applyErr = nil
			err := s.rdb.Watch(ctx, func(tx *redis.Tx) error {
				vals, err := tx.HGetAll(ctx, key).Result()
				if err != nil {
					return err
				}
				creds := make([]backend.CredentialInfo, 0, len(vals))
				for id, v := range vals {
					creds = append(creds, decodeCred(id, v))
				}
				ch, info, err := backend.ApplyCredentialUpdate(api, creds, u)
				if err != nil {
					applyErr = err
					return nil
				}
				out = info
				if len(ch.Put) == 0 && len(ch.Delete) == 0 {
					return nil
				}
				_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
					for _, c := range ch.Put {
						p.HSet(ctx, key, c.ID, encodeCred(c))
					}
					if len(ch.Delete) > 0 {
						p.HDel(ctx, key, ch.Delete...)
					}
					return nil
				})
				return err
			}, key)
			if errors.Is(err, redis.TxFailedErr) {
				continue
			}
			if err != nil {
				return err
			}
			if applyErr != nil {
				return nil
			}
			return s.rdb.SAdd(ctx, s.catalogKey("apis"), api).Err()
		}
		return fmt.Errorf("the catalog of %q changed under %d attempts in a row", api, maxCatalogRetries)
	})
	if err != nil {
		return backend.CredentialInfo{}, failed(ctx, "update credential", err)
	}
	if applyErr != nil {
		return backend.CredentialInfo{}, fmt.Errorf("redisstore: %w", applyErr)
	}
	return out, nil
}

// maxCatalogRetries bounds the optimistic retries of one catalog change.
const maxCatalogRetries = 64

// encodeCred is the creds hash value of c (stored form).
func encodeCred(c backend.CredentialInfo) string {
	c = c.StoredForm()
	if c.Owner == "" {
		return c.Label
	}
	return c.Label + "\x00" + c.Owner
}

// decodeCred reads a creds hash value: "label" (its own owner, also the
// form written before owners existed) or "label NUL owner".
func decodeCred(id, v string) backend.CredentialInfo {
	if i := strings.LastIndexByte(v, 0); i >= 0 && backend.CheckName("owner", v[i+1:]) == nil {
		return backend.CredentialInfo{ID: id, Label: v[:i], Owner: v[i+1:]}
	}
	return backend.CredentialInfo{ID: id, Label: v}
}

// List implements backend.Store: every API the store knows, sorted by name,
// with its budgets and credentials (each sorted too).
func (s *Store) List(ctx context.Context) ([]backend.APIInfo, error) {
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
	out := make([]backend.APIInfo, 0, len(names))
	for i, api := range names {
		info := backend.APIInfo{Name: api, Budgets: []backend.Budget{}, Credentials: []backend.CredentialInfo{}}
		bs := budgets[i].Val()
		for _, name := range slices.Sorted(maps.Keys(bs)) {
			var b backend.Budget
			if err := json.Unmarshal([]byte(bs[name]), &b); err != nil {
				return nil, fmt.Errorf("redisstore: list: budget %s/%s: bad definition %q: %w", api, name, bs[name], errors.Join(backend.ErrInvalid, err))
			}
			info.Budgets = append(info.Budgets, b)
		}
		cs := creds[i].Val()
		for _, id := range slices.Sorted(maps.Keys(cs)) {
			info.Credentials = append(info.Credentials, decodeCred(id, cs[id]).Filled())
		}
		out = append(out, info)
	}
	return out, nil
}
