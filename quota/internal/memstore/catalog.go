package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/quotactl/quotactl/quota/backend"
)

func (s *Store) api(name string) *memAPI {
	a := s.apis[name]
	if a == nil {
		a = &memAPI{budgets: map[string]backend.Budget{}, creds: map[string]backend.CredentialInfo{}}
		s.apis[name] = a
	}
	return a
}

// DefineBudgets implements Store.
func (s *Store) DefineBudgets(ctx context.Context, api string, budgets []backend.Budget) error {
	if err := backend.CheckName("api", api); err != nil {
		return err
	}
	for _, b := range budgets {
		if err := b.Validate(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.api(api)
	for _, b := range budgets {
		a.budgets[b.Name] = b
	}
	return nil
}

// DeleteBudget implements Store.
func (s *Store) DeleteBudget(ctx context.Context, api, budget string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apis[api]
	if a == nil || a.budgets[budget] == (backend.Budget{}) {
		return fmt.Errorf("%w: budget %s/%s", backend.ErrNotFound, api, budget)
	}
	delete(a.budgets, budget)
	return nil
}

// UpdateCredential implements Store: the store's mutex makes the change
// atomic.
func (s *Store) UpdateCredential(ctx context.Context, api string, u backend.CredentialUpdate) (backend.CredentialInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var creds []backend.CredentialInfo
	if a := s.apis[api]; a != nil {
		creds = slices.Collect(maps.Values(a.creds))
	}
	ch, info, err := backend.ApplyCredentialUpdate(api, creds, u)
	if err != nil {
		return backend.CredentialInfo{}, err
	}
	a := s.api(api)
	for _, c := range ch.Put {
		a.creds[c.ID] = c
	}
	for _, id := range ch.Delete {
		delete(a.creds, id)
	}
	return info, nil
}

// List implements Store.
func (s *Store) List(ctx context.Context) ([]backend.APIInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]backend.APIInfo, 0, len(s.apis))
	for _, name := range slices.Sorted(maps.Keys(s.apis)) {
		a := s.apis[name]
		info := backend.APIInfo{Name: name, Budgets: []backend.Budget{}, Credentials: []backend.CredentialInfo{}}
		for _, b := range slices.Sorted(maps.Keys(a.budgets)) {
			info.Budgets = append(info.Budgets, a.budgets[b])
		}
		for _, id := range slices.Sorted(maps.Keys(a.creds)) {
			info.Credentials = append(info.Credentials, a.creds[id].Filled())
		}
		out = append(out, info)
	}
	return out, nil
}
