package sqlitestore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// lostLog is a budget's log that the file a Store opened still counts, read
// from that file after it was deleted or replaced at its path.
type lostLog struct {
	api, account string
	budget       quota.Budget
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
		w, err := quota.ParseWindow(st.view(3))
		if err != nil {
			continue // not a window this build reads: nothing to carry
		}
		out = append(out, lostLog{
			api: strings.Clone(st.view(0)), account: strings.Clone(st.view(1)),
			budget: quota.Budget{Name: strings.Clone(st.view(2)), Limit: max(st.col(4), 1), Window: w},
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
// the decision that found the loss.
func (s *Store) carry(logs []lostLog) string {
	if len(logs) == 0 {
		return "nothing it recorded still counts"
	}
	ns, err := Open(s.ident.path, WithBusyTimeout(s.busy), WithSweepEvery(0))
	if err != nil {
		return fmt.Sprintf("marking the budgets with usage it recorded (%d) as spent in the file now at the path failed: %v", len(logs), err)
	}
	defer ns.Close()
	ctx := context.Background()
	var failed []string
	for _, l := range logs {
		err := ns.Exhaust(ctx, &quota.ExhaustRequest{API: l.api, Owner: l.account, Budget: l.budget, Until: l.until, StoreLoss: true})
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s/%s of %s: %v", l.api, l.budget.Name, l.account, err))
		}
	}
	if len(failed) > 0 {
		return fmt.Sprintf("marking %d of the budgets with usage it recorded (%d) as spent in the file now at the path failed: %s",
			len(failed), len(logs), strings.Join(failed, "; "))
	}
	if len(logs) == 1 {
		return "the budget with usage it recorded is marked spent in the file now at the path until that usage expires"
	}
	return fmt.Sprintf("the %d budgets with usage it recorded are marked spent in the file now at the path until that usage expires", len(logs))
}
