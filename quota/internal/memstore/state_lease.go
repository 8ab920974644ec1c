package memstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// memLease is a lease on one key in a Store; token stays after the
// lease ends so that tokens keep growing.
type memLease struct {
	holder  string
	token   int64
	expires int64 // µs; 0: not held
}

func (l *memLease) live(now int64) bool { return l != nil && l.expires > now }

func (l *memLease) lease(key string) backend.StateLease {
	return backend.StateLease{Key: key, Holder: l.holder, Token: l.token, Expires: time.UnixMicro(l.expires)}
}

// AcquireLease implements StateStore.
func (s *Store) AcquireLease(ctx context.Context, req *backend.StateLeaseRequest) (backend.StateLease, error) {
	if err := backend.CheckStateLease("acquire lease", req); err != nil {
		return backend.StateLease{}, err
	}
	now := nowOr(req.Now).UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.leases[req.Key]
	if l.live(now) {
		return backend.StateLease{}, &backend.StateLeaseHeldError{Held: l.lease(req.Key)}
	}
	if l == nil {
		l = &memLease{}
		s.leases[req.Key] = l
	}
	l.holder, l.token, l.expires = req.Holder, l.token+1, now+req.TTL.Microseconds()
	return l.lease(req.Key), nil
}

// RenewLease implements StateStore.
func (s *Store) RenewLease(ctx context.Context, req *backend.StateLeaseRequest) (backend.StateLease, error) {
	if err := backend.CheckStateLease("renew lease", req); err != nil {
		return backend.StateLease{}, err
	}
	now := nowOr(req.Now).UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.leases[req.Key]
	if !l.live(now) || l.token != req.Token {
		return backend.StateLease{}, fmt.Errorf("%w: %q token %d", backend.ErrLeaseLost, req.Key, req.Token)
	}
	l.expires = now + req.TTL.Microseconds()
	return l.lease(req.Key), nil
}

// ReleaseLease implements StateStore.
func (s *Store) ReleaseLease(ctx context.Context, req *backend.StateLeaseRequest) error {
	if err := backend.CheckStateLease("release lease", req); err != nil {
		return err
	}
	now := nowOr(req.Now).UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.leases[req.Key]
	if !l.live(now) || l.token != req.Token {
		return fmt.Errorf("%w: %q token %d", backend.ErrLeaseLost, req.Key, req.Token)
	}
	l.holder, l.expires = "", 0
	return nil
}

// LoadLease implements StateStore.
func (s *Store) LoadLease(ctx context.Context, req *backend.StateLeaseRequest) (backend.StateLease, error) {
	if err := backend.CheckStateLease("load lease", req); err != nil {
		return backend.StateLease{}, err
	}
	now := nowOr(req.Now).UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.leases[req.Key]
	if !l.live(now) {
		return backend.StateLease{}, fmt.Errorf("%w: no live lease on %q", backend.ErrNotFound, req.Key)
	}
	return l.lease(req.Key), nil
}

// SaveStateFenced implements StateStore.
func (s *Store) SaveStateFenced(ctx context.Context, key string, value []byte, token int64) error {
	if err := backend.CheckStateLease("save state fenced", &backend.StateLeaseRequest{Key: key}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.leases[key]; l != nil && l.token > token {
		return fmt.Errorf("%w: %q: token %d, a lease with token %d was granted since", backend.ErrLeaseLost, key, token, l.token)
	}
	s.state[key] = slices.Clone(value)
	return nil
}
