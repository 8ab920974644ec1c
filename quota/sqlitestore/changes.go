package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/quotactl/quotactl/quota/backend"
)

// changesSQL is the table of backend.ChangeVersioner: one row per API and
// owner whose budgets were ever adjusted or exhausted, its version bumped
// by each, in the same transaction. Rows are never dropped (one small row
// per owner), so a version never comes back. It is added to files of any
// schema version at open, as leases is (same schema version: an addition
// that older builds ignore; an older build sharing the file does not bump
// it, so its changes reach open leases only when they end).
const changesSQL = `CREATE TABLE IF NOT EXISTS changes (
	api     TEXT    NOT NULL,
	owner   TEXT    NOT NULL,
	version INTEGER NOT NULL,
	PRIMARY KEY (api, owner)
) WITHOUT ROWID;`

// bumpSQL changes one owner's version.
const bumpSQL = `INSERT INTO changes (api, owner, version) VALUES (?, ?, 1)
	ON CONFLICT (api, owner) DO UPDATE SET version = version + 1`

// ensureTables creates the tables added to the schema without a new schema
// version (leases, changes) in a file made before they existed.
func (s *Store) ensureTables(ctx context.Context, conn *sql.Conn) error {
	if err := s.ensureLeases(ctx, conn); err != nil {
		return err
	}
	if err := s.ensureUnit(ctx, conn); err != nil {
		return err
	}
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'changes'`).Scan(&n); err != nil {
		return s.openErr(err)
	}
	if n > 0 {
		return nil
	}
	if _, err := conn.ExecContext(ctx, changesSQL); err != nil {
		return s.openErr(err)
	}
	return nil
}

var _ backend.ChangeVersioner = (*Store)(nil)

// ChangeVersion implements backend.ChangeVersioner: one row read, in a read
// transaction. A file without the table (opened read-only, never opened
// by this build for writing) has no change recorded: 0.
func (s *Store) ChangeVersion(ctx context.Context, api, owner string) (int64, error) {
	if owner == "" {
		return 0, fmt.Errorf("sqlitestore: change version: %w: empty credential", backend.ErrInvalid)
	}
	var v int64
	err := s.read(ctx, "change version", func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT version FROM changes WHERE api = ? AND owner = ?`, api, owner).Scan(&v)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			v = 0
			return nil
		case err != nil && s.readOnly && strings.Contains(err.Error(), "no such table"):
			v = 0
			return nil
		}
		return err
	})
	return v, err
}
