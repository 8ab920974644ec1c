package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// Leases of backend.StateStore, under the prefix like every key, and in the
// Cluster slot of the state key PREFIX state:KEY they fence: their hash tag
// "{...}" holds the whole state key, which hashes as the state key itself.
//
//	PREFIX lease{PREFIX state:KEY}   string "TOKEN:EXPIRES:HOLDER", PX until it ends
//	PREFIX token{PREFIX state:KEY}   string, the last fencing token granted
//
// A grant's token is at least its now in µs, so tokens keep growing when
// Redis loses its data (the counter with it) while a paused holder still
// carries an old token.

func (s *Store) leaseKeys(key string) []string {
	st := s.catalogKey("state:", key)
	return []string{s.prefix + "lease{" + st + "}", s.prefix + "token{" + st + "}"}
}

// lease runs lease.lua's operation op.
func (s *Store) lease(ctx context.Context, op string, req *backend.StateLeaseRequest) (ok bool, l backend.StateLease, err error) {
	if err := backend.CheckStateLease(op+" lease", req); err != nil {
		return false, l, fmt.Errorf("redisstore: %w", err)
	}
	reply, err := s.run(ctx, leaseScript, s.leaseKeys(req.Key), []any{nowArg(req.Now), op, req.TTL.Microseconds(), req.Token, req.Holder})
	if err != nil {
		return false, l, failed(ctx, op+" lease", err)
	}
	st, err := num(reply[0])
	if err != nil {
		return false, l, failed(ctx, op+" lease", err)
	}
	if len(reply) < 5 {
		return st == 1, l, nil
	}
	tok, err1 := num(reply[2])
	exp, err2 := num(reply[3])
	holder, ok3 := reply[4].(string)
	if err1 != nil || err2 != nil || !ok3 {
		return false, l, failed(ctx, op+" lease", fmt.Errorf("unexpected script reply %v", reply))
	}
	return st == 1, backend.StateLease{Key: req.Key, Holder: holder, Token: tok, Expires: time.UnixMicro(exp)}, nil
}

// AcquireLease implements backend.StateStore: a script reads the lease key
// and, unless a live lease is there, sets it with SET NX PX and the next
// token (INCR, raised to the script's now in µs if below).
func (s *Store) AcquireLease(ctx context.Context, req *backend.StateLeaseRequest) (backend.StateLease, error) {
	ok, l, err := s.lease(ctx, "acquire", req)
	switch {
	case err != nil:
		return backend.StateLease{}, err
	case !ok:
		return backend.StateLease{}, fmt.Errorf("redisstore: %w", &backend.StateLeaseHeldError{Held: l})
	}
	return l, nil
}

// RenewLease implements backend.StateStore.
func (s *Store) RenewLease(ctx context.Context, req *backend.StateLeaseRequest) (backend.StateLease, error) {
	ok, l, err := s.lease(ctx, "renew", req)
	switch {
	case err != nil:
		return backend.StateLease{}, err
	case !ok:
		return backend.StateLease{}, fmt.Errorf("redisstore: renew lease: %w: %q token %d", backend.ErrLeaseLost, req.Key, req.Token)
	}
	return l, nil
}

// ReleaseLease implements backend.StateStore: compare and delete, in a script.
func (s *Store) ReleaseLease(ctx context.Context, req *backend.StateLeaseRequest) error {
	ok, _, err := s.lease(ctx, "release", req)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("redisstore: release lease: %w: %q token %d", backend.ErrLeaseLost, req.Key, req.Token)
	}
	return nil
}

// LoadLease implements backend.StateStore.
func (s *Store) LoadLease(ctx context.Context, req *backend.StateLeaseRequest) (backend.StateLease, error) {
	ok, l, err := s.lease(ctx, "load", req)
	switch {
	case err != nil:
		return backend.StateLease{}, err
	case !ok:
		return backend.StateLease{}, fmt.Errorf("redisstore: %w: no live lease on %q", backend.ErrNotFound, req.Key)
	}
	return l, nil
}

// SaveStateFenced implements backend.StateStore: a script compares token with
// the last one granted on key and sets the state key only if none is newer.
func (s *Store) SaveStateFenced(ctx context.Context, key string, value []byte, token int64) error {
	if err := backend.CheckStateLease("save state fenced", &backend.StateLeaseRequest{Key: key}); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	k := s.leaseKeys(key)
	reply, err := s.run(ctx, fencedScript, []string{s.catalogKey("state:", key), k[1]}, []any{"", token, value})
	if err != nil {
		return failed(ctx, "save state fenced", err)
	}
	st, err1 := num(reply[0])
	last, err2 := num(reply[2])
	if err1 != nil || err2 != nil {
		return failed(ctx, "save state fenced", fmt.Errorf("unexpected script reply %v", reply))
	}
	if st != 1 {
		return fmt.Errorf("redisstore: save state %q: %w: token %d, a lease with token %d was granted since", key, backend.ErrLeaseLost, token, last)
	}
	return nil
}
