package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// leasesSQL is the leases table of schema.sql, for a file whose schema was
// created before the table existed (same schema version: the table is an
// addition older builds ignore).
var leasesSQL = schemaSQL[strings.Index(schemaSQL, "CREATE TABLE IF NOT EXISTS leases"):]

// ensureLeases creates the leases table in a file made before it existed.
func (s *Store) ensureLeases(ctx context.Context, conn *sql.Conn) error {
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'leases'`).Scan(&n); err != nil {
		return s.openErr(err)
	}
	if n > 0 {
		return nil
	}
	if _, err := conn.ExecContext(ctx, leasesSQL); err != nil {
		return s.openErr(err)
	}
	return nil
}

type leaseRow struct {
	holder           string
	token, expiresUs int64
}

func (r leaseRow) lease(key string) backend.StateLease {
	return backend.StateLease{Key: key, Holder: r.holder, Token: r.token, Expires: time.UnixMicro(r.expiresUs)}
}

func getLease(ctx context.Context, tx *sql.Tx, key string) (r leaseRow, found bool, err error) {
	err = tx.QueryRowContext(ctx, `SELECT holder, token, expires FROM leases WHERE key = ?`, key).Scan(&r.holder, &r.token, &r.expiresUs)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

// AcquireLease implements backend.StateStore: in one immediate transaction,
// it reads the key's lease row and, unless a live lease is there, writes
// the new holder with the next token.
func (s *Store) AcquireLease(ctx context.Context, req *backend.StateLeaseRequest) (backend.StateLease, error) {
	if err := backend.CheckStateLease("acquire lease", req); err != nil {
		return backend.StateLease{}, fmt.Errorf("sqlitestore: %w", err)
	}
	var out backend.StateLease
	var held *backend.StateLeaseHeldError
	err := s.write(ctx, "acquire lease", func(tx *sql.Tx) error {
		now := nowOr(req.Now).UnixMicro() // under the write lock (see Store.now)
		r, _, err := getLease(ctx, tx, req.Key)
		if err != nil {
			return err
		}
		if r.expiresUs > now {
			held = &backend.StateLeaseHeldError{Held: r.lease(req.Key)}
			return nil
		}
		r = leaseRow{holder: req.Holder, token: r.token + 1, expiresUs: now + req.TTL.Microseconds()}
		_, err = tx.ExecContext(ctx, `INSERT INTO leases (key, holder, token, expires) VALUES (?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, token = excluded.token, expires = excluded.expires`,
			req.Key, r.holder, r.token, r.expiresUs)
		out = r.lease(req.Key)
		return err
	})
	switch {
	case err != nil:
		return backend.StateLease{}, err
	case held != nil:
		return backend.StateLease{}, fmt.Errorf("sqlitestore: %w", held)
	}
	return out, nil
}

// RenewLease implements backend.StateStore.
func (s *Store) RenewLease(ctx context.Context, req *backend.StateLeaseRequest) (backend.StateLease, error) {
	if err := backend.CheckStateLease("renew lease", req); err != nil {
		return backend.StateLease{}, fmt.Errorf("sqlitestore: %w", err)
	}
	var out backend.StateLease
	lost := false
	err := s.write(ctx, "renew lease", func(tx *sql.Tx) error {
		now := nowOr(req.Now).UnixMicro() // under the write lock (see Store.now)
		r, _, err := getLease(ctx, tx, req.Key)
		if err != nil {
			return err
		}
		if r.expiresUs <= now || r.token != req.Token {
			lost = true
			return nil
		}
		r.expiresUs = now + req.TTL.Microseconds()
		_, err = tx.ExecContext(ctx, `UPDATE leases SET expires = ? WHERE key = ?`, r.expiresUs, req.Key)
		out = r.lease(req.Key)
		return err
	})
	switch {
	case err != nil:
		return backend.StateLease{}, err
	case lost:
		return backend.StateLease{}, fmt.Errorf("sqlitestore: renew lease: %w: %q token %d", backend.ErrLeaseLost, req.Key, req.Token)
	}
	return out, nil
}

// ReleaseLease implements backend.StateStore: the row keeps its token.
func (s *Store) ReleaseLease(ctx context.Context, req *backend.StateLeaseRequest) error {
	if err := backend.CheckStateLease("release lease", req); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	var n int64
	err := s.write(ctx, "release lease", func(tx *sql.Tx) error {
		now := nowOr(req.Now).UnixMicro() // under the write lock (see Store.now)
		res, err := tx.ExecContext(ctx, `UPDATE leases SET holder = '', expires = 0 WHERE key = ? AND token = ? AND expires > ?`, req.Key, req.Token, now)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	switch {
	case err != nil:
		return err
	case n == 0:
		return fmt.Errorf("sqlitestore: release lease: %w: %q token %d", backend.ErrLeaseLost, req.Key, req.Token)
	}
	return nil
}

// LoadLease implements backend.StateStore.
func (s *Store) LoadLease(ctx context.Context, req *backend.StateLeaseRequest) (backend.StateLease, error) {
	if err := backend.CheckStateLease("load lease", req); err != nil {
		return backend.StateLease{}, fmt.Errorf("sqlitestore: %w", err)
	}
	now := nowOr(req.Now).UnixMicro()
	var r leaseRow
	err := s.read(ctx, "load lease", func(tx *sql.Tx) (err error) {
		r, _, err = getLease(ctx, tx, req.Key)
		return err
	})
	if err != nil {
		return backend.StateLease{}, err
	}
	if r.expiresUs <= now {
		return backend.StateLease{}, fmt.Errorf("sqlitestore: %w: no live lease on %q", backend.ErrNotFound, req.Key)
	}
	return r.lease(req.Key), nil
}

// SaveStateFenced implements backend.StateStore: the token check and the write
// are one immediate transaction.
func (s *Store) SaveStateFenced(ctx context.Context, key string, value []byte, token int64) error {
	if err := backend.CheckStateLease("save state fenced", &backend.StateLeaseRequest{Key: key}); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	if value == nil {
		value = []byte{}
	}
	var newer int64
	err := s.write(ctx, "save state fenced", func(tx *sql.Tx) error {
		r, _, err := getLease(ctx, tx, key)
		if err != nil {
			return err
		}
		if r.token > token {
			newer = r.token
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO state (key, value) VALUES (?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
		return err
	})
	switch {
	case err != nil:
		return err
	case newer != 0:
		return fmt.Errorf("sqlitestore: save state %q: %w: token %d, a lease with token %d was granted since", key, backend.ErrLeaseLost, token, newer)
	}
	return nil
}
