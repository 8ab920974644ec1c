package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// fail wraps an error of operation op: argument errors pass as they are,
// everything else (I/O, a lock not obtained within the busy timeout, a done
// context, a closed store) wraps backend.ErrStoreUnavailable.
func fail(op string, err error) error {
	if errors.Is(err, backend.ErrInvalid) || errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrCostExceedsLimit) ||
		errors.Is(err, backend.ErrLabelTaken) || errors.Is(err, backend.ErrUnknownCredential) {
		return err
	}
	if code, ok := sqliteCode(err); ok && code == 522 { // SQLITE_IOERR_SHORT_READ
		// What this looks like when the WAL was deleted under another
		// process that has not noticed yet: the shared memory describes
		// frames the new, empty WAL lacks.
		return fmt.Errorf("sqlitestore: %s: %w: %w (a file of the database is shorter than SQLite expects: "+
			"was its WAL deleted while another process had it open? That process copies its decisions back into "+
			"the database at its next decision, or when it closes the database; until then this one cannot decide)", op, backend.ErrStoreUnavailable, err)
	}
	return fmt.Errorf("sqlitestore: %s: %w: %w", op, backend.ErrStoreUnavailable, err)
}

// write runs fn in one BEGIN IMMEDIATE transaction on the write connection
// (see begin for how it waits for the lock).
func (s *Store) write(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	if ctx == nil {
		return fmt.Errorf("sqlitestore: %s: %w: nil context", op, backend.ErrInvalid)
	}
	if s.readOnly {
		return fmt.Errorf("sqlitestore: %s %s: %w: %w", op, s.path, backend.ErrInvalid, ErrReadOnly)
	}
	var tx *sql.Tx
	err := s.begin(ctx, func() (err error) {
		tx, err = s.w.BeginTx(ctx, nil)
		return err
	})
	if err != nil {
		return fail(op, err)
	}
	defer s.end()
	// Under the write lock: the file at the path is the one this Store
	// writes, or the decision is refused (see ErrReplaced).
	if err := s.ident.check(); err != nil {
		_ = tx.Rollback()
		return fail(op, s.lossFound(err))
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return fail(op, err)
	}
	if err := tx.Commit(); err != nil {
		return fail(op, err)
	}
	return nil
}

// decide runs fn in one BEGIN IMMEDIATE transaction on the decision
// connection, as write does on the other: the same gate, the same wait
// for the lock, the same identity check. A context done before the commit
// rolls the decision back.
func (s *Store) decide(ctx context.Context, op string, fn func(w *wtx) error) error {
	if ctx == nil {
		return fmt.Errorf("sqlitestore: %s: %w: nil context", op, backend.ErrInvalid)
	}
	if s.readOnly {
		return fmt.Errorf("sqlitestore: %s %s: %w: %w", op, s.path, backend.ErrInvalid, ErrReadOnly)
	}
	c := s.dc
	if err := s.begin(ctx, func() error {
		if c.inTx() { // a transaction a failed rollback left open
			_ = c.rollback.exec()
		}
		return c.begin.exec()
	}); err != nil {
		return fail(op, err)
	}
	defer s.end()
	if err := s.ident.check(); err != nil { // under the write lock, as in write
		if c.inTx() {
			_ = c.rollback.exec()
		}
		return fail(op, s.lossFound(err))
	}
	err := fn(&s.wtx)
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		if err = c.commit.exec(); err == nil {
			return nil
		}
	}
	if c.inTx() {
		_ = c.rollback.exec()
	}
	return fail(op, err)
}

// read runs fn in one read-only (deferred) transaction: a consistent
// snapshot that never waits for writers.
func (s *Store) read(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	if ctx == nil {
		return fmt.Errorf("sqlitestore: %s: %w: nil context", op, backend.ErrInvalid)
	}
	if err := s.ident.check(); err != nil {
		return fail(op, err)
	}
	tx, err := s.beginRead(ctx)
	if err != nil {
		return fail(op, err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return fail(op, err)
	}
	return nil
}

// now returns a decision's instant: the request's (a test's clock), else
// the host clock's, read by the caller under the write lock. Read before
// it, a decision that waited for the lock (another process's transaction,
// or this process's other decisions) would decide at an instant older than
// decisions already committed: after one of them pruned the log past that
// instant (a daily log, at the reset), it would count the day before as
// empty, and record its entry where nothing counts it.
func (s *Store) now(req time.Time) time.Time {
	if req.IsZero() && s.clock != nil {
		return s.clock().Truncate(time.Microsecond)
	}
	return nowOr(req)
}

func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().Truncate(time.Microsecond)
	}
	return t.Truncate(time.Microsecond)
}
