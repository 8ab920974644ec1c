package sqlitestore

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// schemaVersion is the PRAGMA user_version of the schema this package writes.
const schemaVersion = 4

// readVersion is the oldest schema a read-only store reads: version 4
// added only what writes use (entries.held).
const readVersion = 3

//go:embed schema.sql
var schemaSQL string

//go:embed schema_v4.sql
var schemaV4SQL string

// migrateV1 brings a version 1 database (written before owners existed) to
// version 2 in place: every credential recorded is its own owner (an empty owner),
// so its logs, kept under its fingerprint, stay its account's.
const migrateV1 = `ALTER TABLE creds ADD COLUMN owner TEXT NOT NULL DEFAULT ''; PRAGMA user_version = 2;`

// ErrNotDatabase is returned by Open for a file that is not an SQLite
// database. errors.Is(err, backend.ErrInvalid) also holds for it.
var ErrNotDatabase error = &sentinel{"file is not an SQLite database"}

// checkHeader refuses an existing, non-empty file that does not start with
// the SQLite header, before SQLite opens (and might write to) it.
func checkHeader(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlitestore: open %s: %w: %w", path, backend.ErrStoreUnavailable, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return fmt.Errorf("sqlitestore: open %s: %w: is a directory", path, backend.ErrInvalid)
	}
	var hdr [16]byte
	n, err := io.ReadFull(f, hdr[:])
	switch {
	case n == 0 && (err == io.EOF):
		return nil // an empty file is an empty database
	case err != nil && err != io.ErrUnexpectedEOF:
		return fmt.Errorf("sqlitestore: open %s: %w: %w", path, backend.ErrStoreUnavailable, err)
	case string(hdr[:n]) != "SQLite format 3\x00":
		return fmt.Errorf("sqlitestore: open %s: %w", path, ErrNotDatabase)
	}
	return nil
}

// checkWritable refuses, before SQLite opens it, an existing file this
// process may not write. SQLite would open it, fail every decision with
// "attempt to write a readonly database", and create the WAL and shared
// memory beside it as this process's user: files that the owner of the
// database, if they are not readable and writable by the owner too, cannot
// use, so that every process of the owner fails the same way until they
// are deleted.
func checkWritable(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case err == nil:
		return f.Close()
	case errors.Is(err, os.ErrNotExist):
		return nil // created by Open
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("sqlitestore: open %s: %w: %s is not writable by this process (uid %d): %w; "+
			"run as a user who may write it, or open it read-only (WithReadOnly; quotactl's inspecting commands do)",
			path, backend.ErrStoreUnavailable, path, os.Geteuid(), err)
	}
	return nil // anything else: SQLite says what
}

// init checks the file's schema version, then switches it to WAL and
// creates the schema if it is new, on a connection of its own that waits
// for other processes in SQLite's busy handler. Nothing is written before
// the checks.
func (s *Store) init(dsn string) error {
	ctx := context.Background()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return s.openErr(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return s.openErr(err)
	}
	defer conn.Close()
	v, err := s.check(ctx, conn)
	if err != nil {
		return err
	}
	// WAL is a property of the file: once one process set it, every
	// connection uses it.
	var mode string
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return s.openErr(err)
	}
	if mode != "wal" {
		if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode); err != nil {
			return s.openErr(err)
		}
		if mode != "wal" {
			return fmt.Errorf("sqlitestore: open %s: %w: cannot switch to WAL journal mode (still %q)", s.path, backend.ErrStoreUnavailable, mode)
		}
	}
	if v == schemaVersion {
		return s.ensureTables(ctx, conn)
	}
	// Another process may be creating the schema too: decide under the
	// write lock.
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return s.openErr(err)
	}
	defer tx.Rollback()
	var cur int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&cur); err != nil {
		return s.openErr(err)
	}
	if cur == 0 {
		if _, err := tx.ExecContext(ctx, schemaSQL); err != nil {
			return s.openErr(err)
		}
	}
	if cur == 1 {
		if _, err := tx.ExecContext(ctx, migrateV1); err != nil {
			return s.openErr(err)
		}
	}
	if cur < 3 {
		if _, err := tx.ExecContext(ctx, schemaV3SQL); err != nil {
			return s.openErr(err)
		}
	}
	if cur < 4 {
		if _, err := tx.ExecContext(ctx, schemaV4SQL); err != nil {
			return s.openErr(err)
		}
		// Before version 4 the blocks of open leases were told apart by
		// their stamp alone, past now: those are marked held.
		if _, err := tx.ExecContext(ctx, `UPDATE entries SET held = 1 WHERE at > ?`, s.now(time.Time{}).UnixMicro()); err != nil {
			return s.openErr(err)
		}
	}
	if cur < schemaVersion {
		if _, err := tx.ExecContext(ctx, `PRAGMA user_version = `+strconv.Itoa(schemaVersion)); err != nil {
			return s.openErr(err)
		}
	}
	if err := tx.Commit(); err != nil {
		return s.openErr(err)
	}
	return s.ensureTables(ctx, conn)
}

// check reads the schema version, and refuses a newer one or another
// program's database, in one read transaction so that a process creating
// the schema at the same time is seen either wholly or not at all.
func (s *Store) check(ctx context.Context, conn *sql.Conn) (int, error) {
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, s.openErr(err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return 0, s.openErr(err)
	}
	if v > schemaVersion {
		return 0, fmt.Errorf("sqlitestore: open %s: %w: database schema version %d is newer than this build supports (%d); upgrade quotactl",
			s.path, backend.ErrInvalid, v, schemaVersion)
	}
	if v == 0 {
		var name string
		err := tx.QueryRowContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' LIMIT 1`).Scan(&name)
		if err == nil {
			return 0, fmt.Errorf("sqlitestore: open %s: %w: an SQLite database of another program (it has table %q and no sqlitestore schema)",
				s.path, backend.ErrInvalid, name)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, s.openErr(err)
		}
	}
	return v, nil
}
