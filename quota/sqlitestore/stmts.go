package sqlitestore

// stmts are the statements of decisions, prepared once on the decision
// connection (see conn). Parameters are plain ? (numbered in order).
type stmts struct {
	credLogs     *stmt // every log of one credential
	logByName    *stmt // one log
	newLog       *stmt
	updateLog    *stmt
	dropLog      *stmt
	prune        *stmt // delete expired entries, returning their costs
	setAside     *stmt // set a calendar log's expired entries aside, returning their costs
	trimAside    *stmt // delete the set-aside entries older than AsideKeep
	unarchive    *stmt // put set-aside entries back, returning their costs
	oldest       *stmt // the oldest counted entry's instant
	gap          *stmt // units of the kept entries the window no longer counts
	newest       *stmt // the newest entry's instant
	walk         *stmt // entries oldest first, for RetryAt
	insert       *stmt
	reservation  *stmt // the entry a Settle or Refund shrinks
	dropEntry    *stmt
	shrinkEntry  *stmt
	clearLog     *stmt // delete every entry of a log
	clearUnheld  *stmt // delete a log's entries but those held past an instant; and one named
	held         *stmt // units and newest instant of entries held past an instant, but one named
	idleLogs     *stmt // logs the sweep may drop
	spend        *stmt // add to a breakdown row
	dropHours    *stmt // breakdown rows the sweep drops
	dropCrossing *stmt // crossing marks the sweep drops
	bump         *stmt // change an owner's ChangeVersion
	unheldIn     *stmt // units of a log's entries not held in [from, to)
	dropUnheldIn *stmt // delete them
}

// prepare prepares the statements on c; on an error, none of them.
func (st *stmts) prepare(c *conn) error {
	n := len(c.stmts)
	for _, p := range []struct {
		s   **stmt
		sql string
	}{
		{&c.begin, `BEGIN IMMEDIATE`},
		{&c.commit, `COMMIT`},
		{&c.rollback, `ROLLBACK`},
		{&st.credLogs, `SELECT id, budget, "window", used, exhausted_until, idle_after FROM sums WHERE api = ? AND cred = ?`},
		{&st.logByName, `SELECT id, budget, "window", used, exhausted_until, idle_after FROM sums WHERE api = ? AND cred = ? AND budget = ?`},
		{&st.newLog, `INSERT INTO sums (api, cred, budget, "window") VALUES (?, ?, ?, ?) RETURNING id`},
		{&st.updateLog, `UPDATE sums SET "window" = ?, used = ?, exhausted_until = ?, idle_after = ? WHERE id = ?`},
		{&st.dropLog, `DELETE FROM sums WHERE id = ?`},
		{&st.prune, `DELETE FROM entries WHERE log = ? AND at < ? RETURNING cost`},
		// a log's set-aside entries are its entries under log = -id
		{&st.setAside, `UPDATE entries SET log = -log WHERE log = ? AND at < ? RETURNING cost`},
		{&st.trimAside, `DELETE FROM entries WHERE log = -? AND at < ?`},
		{&st.unarchive, `UPDATE entries SET log = -log WHERE log = -? AND at >= ? RETURNING cost`},
		{&st.oldest, `SELECT min(at) FROM entries WHERE log = ? AND at >= ?`},
		{&st.gap, `SELECT coalesce(sum(cost), 0) FROM entries WHERE log = ? AND at < ?`},
		{&st.newest, `SELECT max(at) FROM entries WHERE log = ?`},
		{&st.walk, `SELECT at, cost FROM entries WHERE log = ? AND at >= ? ORDER BY at, rowid`},
		{&st.insert, `INSERT INTO entries (log, at, cost, nonce, held) VALUES (?, ?, ?, ?, ?)`},
		{&st.reservation, `SELECT rowid, cost FROM entries WHERE log = ? AND at = ? AND nonce = ? LIMIT 1`},
		{&st.dropEntry, `DELETE FROM entries WHERE rowid = ?`},
		{&st.shrinkEntry, `UPDATE entries SET cost = ? WHERE rowid = ?`},
		{&st.clearLog, `DELETE FROM entries WHERE log IN (?, -?)`},
		{&st.clearUnheld, `DELETE FROM entries WHERE log = ? AND (held = 0 OR at <= ? OR at = ? AND nonce = ?)`},
		{&st.held, `SELECT coalesce(sum(cost), 0), max(at) FROM entries WHERE log = ? AND held = 1 AND at > ? AND NOT (at = ? AND nonce = ?)`},
		{&st.idleLogs, `SELECT id FROM sums WHERE idle_after <= ? ORDER BY idle_after LIMIT ?`},
		{&st.spend, spendSQL},
		{&st.dropHours, `DELETE FROM usage_hours WHERE keep <= ?`},
		{&st.dropCrossing, `DELETE FROM crossings WHERE until <= ?`},
		{&st.bump, bumpSQL},
		{&st.unheldIn, `SELECT coalesce(sum(cost), 0) FROM entries WHERE log = ? AND at >= ? AND at < ? AND held = 0`},
		{&st.dropUnheldIn, `DELETE FROM entries WHERE log = ? AND at >= ? AND at < ? AND held = 0`},
	} {
		s, err := c.prepare(p.sql)
		if err != nil {
			c.finalize(n)
			return err
		}
		*p.s = s
	}
	return nil
}
