package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/quotactl/quotactl/quota/backend"
)

// SaveState implements StateStore.
func (s *Store) SaveState(ctx context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state[key] = slices.Clone(value)
	return nil
}

// LoadState implements StateStore.
func (s *Store) LoadState(ctx context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.state[key]
	if !ok {
		return nil, fmt.Errorf("%w: state %q", backend.ErrNotFound, key)
	}
	return slices.Clone(v), nil
}

// AppendRecord implements StateStore.
func (s *Store) AppendRecord(ctx context.Context, stream string, rec []byte, keep int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := append(s.records[stream], slices.Clone(rec))
	if keep > 0 && len(r) > keep {
		r = slices.Clone(r[len(r)-keep:])
	}
	s.records[stream] = r
	return nil
}

// Records implements StateStore.
func (s *Store) Records(ctx context.Context, stream string, limit int) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.records[stream]
	var out [][]byte
	for i := len(r) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		out = append(out, slices.Clone(r[i]))
	}
	return out, nil
}

// Streams implements StateStore.
func (s *Store) Streams(ctx context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.records {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}
