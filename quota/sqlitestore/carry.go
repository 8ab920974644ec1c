package sqlitestore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// lossFound is called, under the gate and with no transaction open on the
// decision connection, when the identity check found err. The first time
// after the database file itself was deleted or replaced, it carries the
// usage the old file still counts to the file now at the path (see carry);
// the first time after the WAL was, it checkpoints the decisions only that
// WAL holds into the database (see checkpointLost). It returns err with
// what it did.
func (s *Store) lossFound(err error) error {
	if s.readOnly || s.dc == nil || s.closed {
		return err
	}
	c := s.dc
	switch {
	case s.ident.carry.CompareAndSwap(true, false):
		// What the old file records is lost to every process that opens
		// the path now: read it while the old file is at hand, and mark
		// it in the new one.
		// Until it is done, each decision (and Close) tries again: a
		// failure here (the new file locked past the busy timeout by
		// another process's transaction) would lose that usage for good.
		now := s.now(time.Time{})
		logs, lerr := lostLogs(c, now)
		if lerr != nil {
			s.ident.carry.Store(true)
			return fmt.Errorf("%w; reading the usage it recorded failed (the next decision tries again): %v", err, lerr)
		}
		msg, ok := s.carry(logs, now)
		if !ok {
			s.ident.carry.Store(true)
		}
		return fmt.Errorf("%w; %s", err, msg)
	case s.ident.ckpt.CompareAndSwap(true, false):
		// The decisions committed since the last checkpoint are only in
		// the WAL this connection still holds: copy them into the
		// database file, which every process reads, before they go. Only
		// while the shared memory is the one every process uses: it holds
		// the locks that keep the copy from the others' reads and writes.
		if fi, serr := os.Stat(s.ident.shmPath); serr != nil || s.ident.shm == nil || !os.SameFile(fi, s.ident.shm) {
			return fmt.Errorf("%w; its shared memory went too, so the decisions only that WAL holds cannot be copied into the database safely: they are lost", err)
		}
		msg, ok := s.checkpointLost(c)
		if !ok {
			s.ident.ckpt.Store(true) // the next decision (or Close) tries again
		}
		return fmt.Errorf("%w; %s", err, msg)
	}
	return err
}

// lostLog is a budget's log that the file a Store opened still counts, read
// from that file after it was deleted or replaced at its path.
type lostLog struct {
	api, account string
	budget       backend.Budget
	until        time.Time // when everything it counts has expired, and any mark ended
}

// lostLogsSQL reads the logs that still count something at ?1: their
// usage, or an exhaustion mark, would have gone on refusing charges.
const lostLogsSQL = `SELECT s.api, s.cred, s.budget, s."window", coalesce(b."limit", 0), s.idle_after
	FROM sums s LEFT JOIN budgets b ON b.api = s.api AND b.name = s.budget
	WHERE s.idle_after > ?1 AND (s.used > 0 OR s.exhausted_until > ?1)`

// lostLogs reads, on c (in a transaction on the file the Store opened), the
// logs that still count something at now.
func lostLogs(c *conn, now time.Time) ([]lostLog, error) {
	n := len(c.stmts)
	defer c.finalize(n)
	st, err := c.prepare(lostLogsSQL)
	if err != nil {
		return nil, err
	}
	var out []lostLog
	for st.int(1, now.UnixMicro()); st.next(); {
		w, err := backend.ParseWindow(st.view(3))
		if err != nil {
			continue // not a window this build reads: nothing to carry
		}
		out = append(out, lostLog{
			api: strings.Clone(st.view(0)), account: strings.Clone(st.view(1)),
			budget: backend.Budget{Name: strings.Clone(st.view(2)), Limit: max(st.col(4), 1), Window: w},
			until:  time.UnixMicro(st.col(5)),
		})
	}
	return out, st.done()
}

// carry marks, in the database now at the Store's path (created if there is
// none), every budget whose log the Store's own file still counts as spent
// until that usage would have expired: the usage recorded in the old file
// is lost to every process that opens the path from now on, and going on
// from zero would admit it again. It returns what it did, for the error of
// the decision that found the loss, and whether every budget was marked.
func (s *Store) carry(logs []lostLog, now time.Time) (string, bool) {
	if len(logs) == 0 {
		return "nothing it recorded still counts", true
	}
	ns, err := Open(s.ident.path, WithBusyTimeout(s.busy), WithSweepEvery(0))
	if err != nil {
		return fmt.Sprintf("marking the budgets with usage it recorded (%d) as spent in the file now at the path failed (the next decision tries again): %v", len(logs), err), false
	}
	defer ns.Close()
	ctx := context.Background()
	var failed []string
	for _, l := range logs {
		err := ns.Exhaust(ctx, &backend.ExhaustRequest{API: l.api, Owner: l.account, Budget: l.budget, Until: l.until, Now: now, StoreLoss: true})
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s/%s of %s: %v", l.api, l.budget.Name, l.account, err))
		}
	}
	if len(failed) > 0 {
		return fmt.Sprintf("marking %d of the budgets with usage it recorded (%d) as spent in the file now at the path failed (the next decision tries again): %s",
			len(failed), len(logs), strings.Join(failed, "; ")), false
	}
	if len(logs) == 1 {
		return "the budget with usage it recorded is marked spent in the file now at the path until that usage expires", true
	}
	return fmt.Sprintf("the %d budgets with usage it recorded are marked spent in the file now at the path until that usage expires", len(logs)), true
}

// checkpointLost copies, on c, the frames of the WAL c still holds (deleted
// or replaced at its path) into the database file, and says how it went
// and whether it copied them all.
// Without it the decisions committed since the last checkpoint are lost when
// this process closes the database while another has it open, or when
// another process makes a new WAL.
func (s *Store) checkpointLost(c *conn) (string, bool) {
	deadline := time.Now().Add(s.busy)
	for {
		busy, err := checkpoint(c)
		switch {
		case err != nil:
			return fmt.Sprintf("copying the decisions it still holds into the database failed (the next decision tries again): %v", err), false
		case !busy:
			return "the decisions it still held are copied into the database", true
		case !time.Now().Before(deadline):
			return "copying the decisions it still holds into the database did not finish within the busy timeout (other processes read it; the next decision tries again)", false
		}
		time.Sleep(time.Millisecond)
	}
}

// checkpoint runs a TRUNCATE checkpoint on c; busy is true when a reader or
// writer kept it from copying every frame.
func checkpoint(c *conn) (busy bool, err error) {
	n := len(c.stmts)
	defer c.finalize(n)
	st, err := c.prepare(`PRAGMA wal_checkpoint(TRUNCATE)`)
	if err != nil {
		return false, err
	}
	for st.next() {
		busy = st.col(0) != 0
	}
	if err := st.done(); err != nil {
		if isBusy(err) {
			return true, nil
		}
		return false, err
	}
	return busy, nil
}
