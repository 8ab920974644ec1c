// Package sqlitestore is the backend.Store for one host: one SQLite database
// file that every process on the host opens, with no server to run. It uses
// modernc.org/sqlite (pure Go, no cgo).
//
// Many processes may open the same file at once. The database runs in WAL
// mode, and every decision (Take, Refund, Exhaust, Adjust) is one BEGIN
// IMMEDIATE transaction, so decisions from all processes are serialised by
// SQLite's write lock: a multi-budget charge is all or nothing, and no two
// decisions see the same usage. Within a process, writes queue in Go for
// their turn, one transaction at a time; across processes they wait for the
// write lock, polling it every few hundred microseconds (not in SQLite's
// busy handler, whose sleeps grow to 100ms and let a busy process starve
// the others), up to the busy timeout (WithBusyTimeout, default 5s), after
// which the call fails with an error wrapping backend.ErrStoreUnavailable. A
// process that holds the lock back to back leaves it free for a moment
// every 20ms, so waiting processes get their turn. Reads (Usage, Entries,
// List, LoadState, Records, Streams) use a pool of read-only connections
// and never wait for writers.
//
// synchronous=NORMAL is used: in WAL mode a committed decision survives the
// process being killed (SIGKILL, a crash) and the file is never corrupted;
// only a power loss or kernel crash can lose the last few decisions.
//
// Each (API, credential, budget) log keeps a running sum of its entries, so
// a decision costs O(log n + expired entries), whatever the cost charged or
// the units in the window. A decision deletes the expired entries of the
// budgets it charges, and the logs of the credential's other budgets once
// nothing in them counts; every 1024 decisions (WithSweepEvery) a sweep
// deletes the logs of idle credentials, so the file does not grow with
// credentials no longer used.
//
// The clock is the host's unless a request carries a Now (an injected test
// clock, quota.WithClock). Times are stored in microseconds.
//
// The schema is versioned with PRAGMA user_version. Open creates the file
// and schema on first use, and refuses, without writing to it, a file that
// is not an SQLite database, one with another program's tables, or one with
// a newer schema.
package sqlitestore

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// errClosed is the error of a decision on a closed Store.
var errClosed = errors.New("store closed")

type sentinel struct{ msg string }

func (e *sentinel) Error() string        { return e.msg }
func (e *sentinel) Is(target error) bool { return target == backend.ErrInvalid }

// Store is a backend.Store and backend.StateStore kept in an SQLite file. It is
// safe for concurrent use by many goroutines, and many processes may open
// the same file. Open makes one; Close releases it.
type Store struct {
	clock      func() time.Time // the host clock, when a test replaces it
	path       string
	w          *sql.DB // one connection for writes other than decisions; every write is BEGIN IMMEDIATE
	r          *sql.DB // read-only connections, deferred transactions
	ri         *sql.DB // WithReadOnly: connections to the file opened immutable, one per read (see beginRead)
	dc         *conn   // the connection of decisions (see conn), used under the gate
	st         stmts   // prepared on dc
	wtx        wtx     // the decision under way, under the gate
	closed     bool    // dc is closed; read and written under the gate
	sweepEvery uint64
	sweepMax   int
	ops        atomic.Uint64
	busy       time.Duration
	gate       gate
	ident      ident
	readOnly   bool
	closeOnce  sync.Once
	closeErr   error
}

var (
	_ backend.Store      = (*Store)(nil)
	_ backend.StateStore = (*Store)(nil)
)

// Option configures a Store in Open.
type Option func(*config)

type config struct {
	busy       time.Duration
	sweepEvery int
	readConns  int
	readOnly   bool
}

// WithReadOnly opens the database read-only: nothing is ever written to
// the file, so a user who may read but not write it (a 0644 file of
// another user) can inspect it. The file must exist (an error wrapping
// backend.ErrNotFound says so otherwise) and hold the store's schema. Usage,
// Entries, List and the StateStore reads work; every write fails with an
// error wrapping ErrReadOnly. Each read sees what other processes have
// written until then, so a long-running reader (quotactl serve) stays
// current. quotactl's inspecting commands use it.
func WithReadOnly() Option { return func(c *config) { c.readOnly = true } }

// ErrReadOnly is wrapped (with backend.ErrInvalid) by every write to a Store
// opened WithReadOnly.
var ErrReadOnly = errors.New("sqlitestore: store opened read-only")

// WithBusyTimeout sets how long a write waits for another process holding
// the database's write lock before failing with an error wrapping
// backend.ErrStoreUnavailable. Default: 5s. d is rounded down to the
// millisecond; d <= 0 means fail at once.
func WithBusyTimeout(d time.Duration) Option { return func(c *config) { c.busy = d } }

// WithSweepEvery sets how many decisions a Store makes between sweeps that
// delete the logs of idle credentials (every entry expired, no exhaustion
// mark), so credentials no longer used do not keep growing the file.
// Default: 1024. n <= 0 turns the sweep off; a decision still drops the
// expired entries of the credential it is about.
func WithSweepEvery(n int) Option { return func(c *config) { c.sweepEvery = n } }

// WithReadConns sets how many read-only connections the Store may open for
// Usage, Entries, List and the StateStore reads. Default: 4.
func WithReadConns(n int) Option { return func(c *config) { c.readConns = max(n, 1) } }

// Open opens the SQLite database at path, creating the file and its schema
// if it does not exist (the directory must). Defaults: a busy timeout of 5s,
// a sweep of idle credentials every 1024 decisions, 4 read connections.
//
// A file that is not an SQLite database gives an error wrapping
// ErrNotDatabase (and backend.ErrInvalid) that names the path; so does, with
// backend.ErrInvalid, a database with a newer schema version or with tables
// of another program. In those cases nothing in the file is modified. A
// file that cannot be read or locked in time gives an error wrapping
// backend.ErrStoreUnavailable.
func Open(path string, opts ...Option) (*Store, error) {
	cfg := config{busy: 5 * time.Second, sweepEvery: 1024, readConns: 4}
	for _, o := range opts {
		o(&cfg)
	}
	if path == "" {
		return nil, fmt.Errorf("sqlitestore: open: %w: empty path", backend.ErrInvalid)
	}
	if err := checkHeader(path); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w: %w", path, backend.ErrStoreUnavailable, err)
	}
	if cfg.readOnly {
		return openReadOnly(path, abs, cfg)
	}
	if err := checkWritable(path); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Dir(abs)); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sqlitestore: open %s: %w: the directory %s does not exist (Open creates the file, not its directory)",
			path, backend.ErrStoreUnavailable, filepath.Dir(abs))
	}
	file := "file:" + (&url.URL{Path: abs}).EscapedPath() + "?_pragma=synchronous(NORMAL)"
	busy := "&_pragma=busy_timeout(" + strconv.FormatInt(max(cfg.busy.Milliseconds(), 0), 10) + ")"
	s := &Store{path: path, sweepMax: 256, busy: max(cfg.busy, 0), gate: newGate()}
	s.wtx.st = &s.st
	if cfg.sweepEvery > 0 {
		s.sweepEvery = uint64(cfg.sweepEvery)
	}
	// Processes opening a new file at once contend for it in ways SQLite
	// reports as SQLITE_BUSY without waiting (switching to WAL, reading a
	// schema being created): such steps are retried until the busy timeout.
	deadline := time.Now().Add(s.busy)
	if err := retryBusy(deadline, func() error { return s.init(file + busy + "&_txlock=immediate") }); err != nil {
		return nil, err
	}
	// The write connections wait for the write lock in Go (see begin),
	// not in SQLite's busy handler, whose sleeps grow to 100ms and let a
	// busy process starve the others.
	if s.w, err = sql.Open("sqlite", file+"&_pragma=busy_timeout(0)&_txlock=immediate"); err != nil {
		return nil, s.openErr(err)
	}
	// Two write connections, this one and the decisions' (see conn), which
	// the gate lets write one at a time: a process's writes queue in Go, and
	// it can never wait on itself.
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if s.r, err = sql.Open("sqlite", file+busy+"&_pragma=query_only(1)"); err != nil {
		s.w.Close()
		return nil, s.openErr(err)
	}
	s.r.SetMaxOpenConns(cfg.readConns)
	s.r.SetMaxIdleConns(cfg.readConns)
	// Decisions run on a connection of their own, without database/sql.
	if err := retryBusy(deadline, func() (err error) {
		if s.dc == nil {
			if s.dc, err = openConn(abs); err != nil {
				return err
			}
		}
		return s.st.prepare(s.dc)
	}); err != nil {
		s.Close()
		return nil, s.openErr(err)
	}
	// The write connections hold the file (and its WAL) open from here on:
	// remember which, to notice if they are deleted or replaced under it.
	if err := s.ident.remember(abs); err != nil {
		s.Close()
		return nil, s.openErr(err)
	}
	return s, nil
}

// openReadOnly opens an existing database with read-only connections only,
// creating no file. Each read chooses how to read the file as it is then
// (see beginRead): while a process has the database open (its WAL exists),
// through the WAL and its shared memory, read-only if need be; when none has
// (no WAL), on a connection of its own that opens the file immutable, which
// reads it without locks or shared memory: creating those would leave files
// behind, owned by the reader, that can lock the database's owner out. An
// immutable connection is never used again, since it would not see later
// writes. A writer starting during such a read may make it fail; it cannot
// make it count wrong.
func openReadOnly(path, abs string, cfg config) (*Store, error) {
	s := &Store{path: path, busy: max(cfg.busy, 0), gate: newGate(), readOnly: true}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sqlitestore: open %s read-only: %w: no database at this path", path, backend.ErrNotFound)
	}
	base := "file:" + (&url.URL{Path: abs}).EscapedPath() + "?mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(" +
		strconv.FormatInt(max(cfg.busy.Milliseconds(), 0), 10) + ")"
	var err error
	if s.r, err = sql.Open("sqlite", base); err != nil {
		return nil, s.openErr(err)
	}
	s.r.SetMaxOpenConns(cfg.readConns)
	s.r.SetMaxIdleConns(cfg.readConns)
	if s.ri, err = sql.Open("sqlite", base+"&immutable=1"); err != nil {
		s.r.Close()
		return nil, s.openErr(err)
	}
	s.ri.SetMaxOpenConns(cfg.readConns)
	s.ri.SetMaxIdleConns(0) // closed after each read
	s.ident.walPath = abs + "-wal"
	// Check the schema as the first read will read it, through the WAL
	// or not.
	dbs := []*sql.DB{s.r, s.ri}
	if !s.walExists() {
		dbs[0], dbs[1] = dbs[1], dbs[0]
	}
	var firstErr error
	for _, db := range dbs {
		conn, err := db.Conn(context.Background())
		if err == nil {
			var v int
			v, err = s.check(context.Background(), conn)
			conn.Close()
			if err == nil && v < readVersion {
				s.Close()
				return nil, fmt.Errorf("sqlitestore: open %s read-only: %w: no store schema yet (an empty database)", path, backend.ErrNotFound)
			}
		}
		if err == nil {
			if err := s.ident.remember(abs); err != nil {
				s.Close()
				return nil, s.openErr(err)
			}
			s.ident.wal, s.ident.shm = nil, nil // another process's WAL and shared memory may come and go
			return s, nil
		}
		if errors.Is(err, backend.ErrInvalid) {
			s.Close()
			return nil, err // not ours: say so, whatever the mode
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	s.Close()
	if _, ok := sqliteCode(firstErr); ok {
		return nil, s.openErr(firstErr)
	}
	return nil, firstErr
}

// walExists reports whether the database's WAL exists: whether a process
// has the database open, or had it and could not remove its WAL.
func (s *Store) walExists() bool {
	_, err := os.Stat(s.ident.walPath)
	return !errors.Is(err, os.ErrNotExist)
}

// beginRead begins a read-only transaction. A Store opened WithReadOnly
// reads the file as it is now, as openReadOnly says: through the WAL while
// one exists, else on a new immutable connection. The first statement
// (which reads the schema cookie, and the WAL's index) checks the WAL can
// be read; if it cannot (the last writer removed the WAL since the Stat,
// say, in a directory the reader may not write), the file is read alone.
func (s *Store) beginRead(ctx context.Context) (*sql.Tx, error) {
	opts := &sql.TxOptions{ReadOnly: true}
	if s.ri == nil {
		return s.r.BeginTx(ctx, opts)
	}
	if s.walExists() {
		tx, err := s.r.BeginTx(ctx, opts)
		if err != nil {
			return nil, err
		}
		var v int
		if err = tx.QueryRowContext(ctx, `PRAGMA schema_version`).Scan(&v); err == nil {
			return tx, nil
		}
		_ = tx.Rollback()
		if ctx.Err() != nil {
			return nil, err
		}
	}
	return s.ri.BeginTx(ctx, opts)
}

// openErr wraps an error met while opening.
func (s *Store) openErr(err error) error {
	code, ok := sqliteCode(err)
	if ok && code&0xff == 26 { // SQLITE_NOTADB
		return fmt.Errorf("sqlitestore: open %s: %w", s.path, ErrNotDatabase)
	}
	if ok && code == 1544 { // SQLITE_READONLY_DIRECTORY
		return fmt.Errorf("sqlitestore: open %s: %w: the directory %s is not writable by this process (uid %d), and SQLite must create %s-wal and %s-shm there: %w",
			s.path, backend.ErrStoreUnavailable, filepath.Dir(s.path), os.Geteuid(), filepath.Base(s.path), filepath.Base(s.path), err)
	}
	return fmt.Errorf("sqlitestore: open %s: %w: %w", s.path, backend.ErrStoreUnavailable, err)
}

// Path returns the path the Store was opened with.
func (s *Store) Path() string { return s.path }

// Close closes the database. It is safe to call more than once; calls after
// the first return the first's result. Operations after Close fail with an
// error wrapping backend.ErrStoreUnavailable.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.r != nil {
			errs = append(errs, s.r.Close())
		}
		if s.ri != nil {
			errs = append(errs, s.ri.Close())
		}
		if s.dc != nil {
			// Wait for the decision under way, if any, and refuse
			// those after.
			s.gate.sem <- struct{}{}
			if !s.readOnly {
				// A file deleted or replaced since the last decision:
				// what only this Store holds goes with it otherwise
				// (see lossFound).
				if err := s.ident.check(); err != nil {
					_ = s.lossFound(err)
				}
			}
			s.closed = true
			errs = append(errs, s.dc.close())
			<-s.gate.sem
		}
		if s.w != nil {
			errs = append(errs, s.w.Close())
		}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("sqlitestore: close %s: %w", s.path, err)
		}
	})
	return s.closeErr
}
