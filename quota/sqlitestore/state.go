package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/quotactl/quotactl/quota/backend"
)

// SaveState implements backend.StateStore.
func (s *Store) SaveState(ctx context.Context, key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	return s.write(ctx, "save state", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO state (key, value) VALUES (?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
		return err
	})
}

// LoadState implements backend.StateStore. A missing key gives an error
// wrapping backend.ErrNotFound.
func (s *Store) LoadState(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := s.read(ctx, "load state", func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT value FROM state WHERE key = ?`, key).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlitestore: load state %q: %w", key, backend.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// AppendRecord implements backend.StateStore: it appends rec to stream and
// deletes all but the newest keep records (keep <= 0 keeps every record).
func (s *Store) AppendRecord(ctx context.Context, stream string, rec []byte, keep int) error {
	if rec == nil {
		rec = []byte{}
	}
	return s.write(ctx, "append record", func(tx *sql.Tx) error {
		var seq int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) + 1 FROM records WHERE stream = ?`, stream).Scan(&seq); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO records (stream, seq, rec) VALUES (?, ?, ?)`, stream, seq, rec); err != nil {
			return err
		}
		if keep > 0 {
			if _, err := tx.ExecContext(ctx, `DELETE FROM records WHERE stream = ? AND seq <= ?`, stream, seq-int64(keep)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Records implements backend.StateStore: up to limit records of stream,
// newest first (limit <= 0: all).
func (s *Store) Records(ctx context.Context, stream string, limit int) ([][]byte, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	var out [][]byte
	err := s.read(ctx, "records", func(tx *sql.Tx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, `SELECT rec FROM records WHERE stream = ? ORDER BY seq DESC LIMIT ?`, stream, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r []byte
			if err := rows.Scan(&r); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Streams implements backend.StateStore: the names of the streams that start
// with prefix, sorted.
func (s *Store) Streams(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	err := s.read(ctx, "streams", func(tx *sql.Tx) error {
		out = nil
		// Names with the prefix sort together, right from the prefix on.
		rows, err := tx.QueryContext(ctx, `SELECT DISTINCT stream FROM records WHERE stream >= ? ORDER BY stream`, prefix)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				return err
			}
			if !strings.HasPrefix(name, prefix) {
				break
			}
			out = append(out, name)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
