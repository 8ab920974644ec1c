package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
)

// stmts are the write path's statements, prepared once on the write
// connection.
type stmts struct {
	credLogs   *sql.Stmt // every log of one credential
	logByName  *sql.Stmt // one log
	newLog     *sql.Stmt
	updateLog  *sql.Stmt
	dropLog    *sql.Stmt
	prune      *sql.Stmt // delete expired entries, returning their costs
	oldest     *sql.Stmt // the oldest counted entry's instant
	gap        *sql.Stmt // units of the kept entries the window no longer counts
	newest     *sql.Stmt // the newest entry's instant
	walk       *sql.Stmt // entries oldest first, for RetryAt
	insert     *sql.Stmt
	refund     *sql.Stmt
	clearLog   *sql.Stmt // delete every entry of a log
	idleLogs   *sql.Stmt // logs the sweep may drop
	spend      *sql.Stmt // add to a breakdown row
	all        []*sql.Stmt
	prepareErr error
}

func (st *stmts) prep(db *sql.DB, q string) *sql.Stmt {
	if st.prepareErr != nil {
		return nil
	}
	s, err := db.PrepareContext(context.Background(), q)
	if err != nil {
		st.prepareErr = err
		return nil
	}
	st.all = append(st.all, s)
	return s
}

func (st *stmts) prepare(db *sql.DB) error {
	st.credLogs = st.prep(db, `SELECT id, budget, "window", used, exhausted_until, idle_after FROM sums WHERE api = ? AND cred = ?`)
	st.logByName = st.prep(db, `SELECT id, budget, "window", used, exhausted_until, idle_after FROM sums WHERE api = ? AND cred = ? AND budget = ?`)
	st.newLog = st.prep(db, `INSERT INTO sums (api, cred, budget, "window") VALUES (?, ?, ?, ?) RETURNING id`)
	st.updateLog = st.prep(db, `UPDATE sums SET "window" = ?, used = ?, exhausted_until = ?, idle_after = ? WHERE id = ?`)
	st.dropLog = st.prep(db, `DELETE FROM sums WHERE id = ?`)
	st.prune = st.prep(db, `DELETE FROM entries WHERE log = ? AND at < ? RETURNING cost`)
	st.oldest = st.prep(db, `SELECT min(at) FROM entries WHERE log = ? AND at >= ?`)
	st.gap = st.prep(db, `SELECT coalesce(sum(cost), 0) FROM entries WHERE log = ? AND at < ?`)
	st.newest = st.prep(db, `SELECT max(at) FROM entries WHERE log = ?`)
	st.walk = st.prep(db, `SELECT at, cost FROM entries WHERE log = ? AND at >= ? ORDER BY at, rowid`)
	st.insert = st.prep(db, `INSERT INTO entries (log, at, cost, nonce) VALUES (?, ?, ?, ?)`)
	st.refund = st.prep(db, `DELETE FROM entries WHERE log = ? AND at = ? AND nonce = ? RETURNING cost`)
	st.clearLog = st.prep(db, `DELETE FROM entries WHERE log = ?`)
	st.idleLogs = st.prep(db, `SELECT id FROM sums WHERE idle_after <= ? ORDER BY idle_after LIMIT ?`)
	st.spend = st.prep(db, spendSQL)
	if err := st.prepareErr; err != nil {
		_ = st.close()
		*st = stmts{}
		return err
	}
	return nil
}

func (st *stmts) close() error {
	var errs []error
	for _, s := range st.all {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
