package sqlitestore

import (
	"errors"
	"fmt"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// conn is the connection decisions (Take, Refund, Settle, Exhaust, Adjust,
// the sweep) run on: SQLite's C API as modernc.org/sqlite/lib exposes it,
// the library the database/sql driver wraps, without database/sql or the
// driver in between. Through them every statement costs a dozen or more
// Go allocations (the transaction's context, boxed arguments, a Rows with
// its column names and types, a Result); here it costs none: integers are
// bound and read as they are, text is copied into C memory owned by the
// conn, and a stored string is compared where SQLite holds it.
//
// A conn is not safe for concurrent use: the Store's gate serialises every
// use, Close included.
type conn struct {
	tls   *libc.TLS
	db    uintptr // sqlite3*
	out   uintptr // C memory for a pointer SQLite returns (sqlite3_open_v2, sqlite3_prepare_v2)
	buf   uintptr // C memory text arguments are copied into (bound SQLITE_TRANSIENT: SQLite copies them on)
	bufN  int
	stmts []*stmt
	// begin, commit and rollback: the transaction's statements, prepared
	// once like the others.
	begin, commit, rollback *stmt
}

// cmem returns the address p of C memory (SQLite's allocator's, never Go's)
// as a pointer Go code can read and write through. The garbage collector
// ignores such a pointer; vet's unsafeptr check, which is about Go memory
// that a uintptr no longer keeps alive, does not apply to it.
func cmem(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// sqliteError is an error SQLite returned on a conn. Its Code is the
// (extended) result code, as the driver's sqlite.Error has it.
type sqliteError struct {
	code int
	msg  string
}

// errNoMem is SQLITE_NOMEM met outside SQLite: no C memory for an argument.
var errNoMem error = &sqliteError{code: sqlite3.SQLITE_NOMEM, msg: "out of memory (7)"}

func (e *sqliteError) Error() string { return e.msg }

// Code returns the SQLite result code.
func (e *sqliteError) Code() int { return e.code }

// sqliteCode returns the SQLite result code err carries (from a conn or the
// driver), and whether it carries one.
func sqliteCode(err error) (int, bool) {
	var c interface{ Code() int }
	if errors.As(err, &c) {
		return c.Code(), true
	}
	return 0, false
}

// openConn opens the database file at path (absolute, not a URI),
// read-write, without creating it: Open has created it and its schema on
// other connections. Like the write connection of database/sql, it has no
// busy handler (begin waits for the lock) and synchronous=NORMAL.
func openConn(path string) (*conn, error) {
	c := &conn{tls: libc.NewTLS()}
	if c.out = sqlite3.Xsqlite3_malloc64(c.tls, 8); c.out == 0 {
		c.tls.Close()
		return nil, errNoMem
	}
	name := c.cstring(path)
	if name == 0 {
		_ = c.close()
		return nil, errNoMem
	}
	rc := sqlite3.Xsqlite3_open_v2(c.tls, name, c.out, sqlite3.SQLITE_OPEN_READWRITE|sqlite3.SQLITE_OPEN_FULLMUTEX, 0)
	c.db = *(*uintptr)(cmem(c.out))
	if rc != sqlite3.SQLITE_OK {
		err := c.err(rc)
		_ = c.close()
		return nil, err
	}
	sqlite3.Xsqlite3_extended_result_codes(c.tls, c.db, 1)
	if err := c.exec(`PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 0`); err != nil {
		_ = c.close()
		return nil, err
	}
	return c, nil
}

// cstring copies s, NUL-terminated, into the conn's buffer and returns it
// (0 if memory ran out); valid until the next use of the buffer.
func (c *conn) cstring(s string) uintptr {
	if len(s)+1 > c.bufN {
		n := max(len(s)+1, 2*c.bufN, 256)
		p := sqlite3.Xsqlite3_realloc64(c.tls, c.buf, uint64(n))
		if p == 0 {
			return 0
		}
		c.buf, c.bufN = p, n
	}
	b := unsafe.Slice((*byte)(cmem(c.buf)), len(s)+1)
	copy(b, s)
	b[len(s)] = 0
	return c.buf
}

// err returns the error of result code rc on c, with SQLite's message.
func (c *conn) err(rc int32) error {
	str := libc.GoString(sqlite3.Xsqlite3_errstr(c.tls, rc))
	msg := str
	if c.db != 0 {
		if m := libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db)); m != str {
			msg = str + ": " + m
		}
	}
	msg = fmt.Sprintf("%s (%d)", msg, rc)
	if rc&0xff == sqlite3.SQLITE_BUSY {
		msg += " (SQLITE_BUSY)" // as the driver says it
	}
	return &sqliteError{code: int(rc), msg: msg}
}

// exec runs sql, one or more statements without arguments or results.
func (c *conn) exec(sql string) error {
	p := c.cstring(sql)
	if p == 0 {
		return errNoMem
	}
	if rc := sqlite3.Xsqlite3_exec(c.tls, c.db, p, 0, 0, 0); rc != sqlite3.SQLITE_OK {
		return c.err(rc)
	}
	return nil
}

// prepare compiles one statement, kept until close.
func (c *conn) prepare(sql string) (*stmt, error) {
	p := c.cstring(sql)
	if p == 0 {
		return nil, errNoMem
	}
	rc := sqlite3.Xsqlite3_prepare_v2(c.tls, c.db, p, -1, c.out, 0)
	if rc != sqlite3.SQLITE_OK {
		return nil, c.err(rc)
	}
	s := &stmt{c: c, p: *(*uintptr)(cmem(c.out))}
	c.stmts = append(c.stmts, s)
	return s, nil
}

// inTx reports whether a transaction is open on c.
func (c *conn) inTx() bool { return sqlite3.Xsqlite3_get_autocommit(c.tls, c.db) == 0 }

// finalize finalises the statements prepared since c had n.
func (c *conn) finalize(n int) {
	for _, s := range c.stmts[n:] {
		sqlite3.Xsqlite3_finalize(c.tls, s.p)
	}
	c.stmts = c.stmts[:n]
}

// close finalises the statements and closes the connection.
func (c *conn) close() error {
	var err error
	c.finalize(0)
	if c.db != 0 {
		if rc := sqlite3.Xsqlite3_close_v2(c.tls, c.db); rc != sqlite3.SQLITE_OK {
			err = c.err(rc)
		}
		c.db = 0
	}
	sqlite3.Xsqlite3_free(c.tls, c.buf)
	sqlite3.Xsqlite3_free(c.tls, c.out)
	c.buf, c.bufN, c.out = 0, 0, 0
	c.tls.Close()
	return err
}

// stmt is a statement prepared on a conn. The way to run one:
//
//	s.int(1, id)                 // bind every parameter, numbered from 1
//	for s.next() { s.col(0) }    // or s.exec(), for a statement without rows
//	err := s.done()              // reset it for the next run; the first error
//
// A statement that is not run to its end holds its read of the database
// until done: every run must end with done (exec does it).
type stmt struct {
	c   *conn
	p   uintptr // sqlite3_stmt*
	err error
}

// int binds v to parameter i (from 1).
func (s *stmt) int(i int, v int64) *stmt {
	if rc := sqlite3.Xsqlite3_bind_int64(s.c.tls, s.p, int32(i), v); rc != sqlite3.SQLITE_OK && s.err == nil {
		s.err = s.c.err(rc)
	}
	return s
}

// text binds v to parameter i (from 1); SQLite keeps a copy.
func (s *stmt) text(i int, v string) *stmt {
	p := s.c.cstring(v)
	if p == 0 { // no memory: never let a NULL stand for the text
		if s.err == nil {
			s.err = errNoMem
		}
		return s
	}
	if rc := sqlite3.Xsqlite3_bind_text(s.c.tls, s.p, int32(i), p, int32(len(v)), sqlite3.SQLITE_TRANSIENT); rc != sqlite3.SQLITE_OK && s.err == nil {
		s.err = s.c.err(rc)
	}
	return s
}

// next steps to the next row, and reports whether there is one. At the end,
// or on an error (kept for done), it returns false.
func (s *stmt) next() bool {
	if s.err != nil {
		return false
	}
	switch rc := sqlite3.Xsqlite3_step(s.c.tls, s.p); rc {
	case sqlite3.SQLITE_ROW:
		return true
	case sqlite3.SQLITE_DONE:
		return false
	default:
		s.err = s.c.err(rc)
		return false
	}
}

// done resets the statement for its next run and returns the first error
// of this one.
func (s *stmt) done() error {
	sqlite3.Xsqlite3_reset(s.c.tls, s.p) // its result repeats the error next kept
	err := s.err
	s.err = nil
	return err
}

// exec runs a statement to its end, ignoring any rows, and resets it.
func (s *stmt) exec() error {
	for s.next() {
	}
	return s.done()
}

// col returns column i (from 0) of the current row as an integer (0 for
// NULL).
func (s *stmt) col(i int) int64 { return sqlite3.Xsqlite3_column_int64(s.c.tls, s.p, int32(i)) }

// null reports whether column i of the current row is NULL.
func (s *stmt) null(i int) bool {
	return sqlite3.Xsqlite3_column_type(s.c.tls, s.p, int32(i)) == sqlite3.SQLITE_NULL
}

// view returns column i of the current row as text that shares SQLite's
// memory: valid only until the statement steps or is reset, so it must be
// compared, or copied (strings.Clone), not kept.
func (s *stmt) view(i int) string {
	p := sqlite3.Xsqlite3_column_text(s.c.tls, s.p, int32(i))
	n := sqlite3.Xsqlite3_column_bytes(s.c.tls, s.p, int32(i))
	if p == 0 || n == 0 {
		return ""
	}
	return unsafe.String((*byte)(cmem(p)), n)
}
