package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// TestDecisionReadsClockUnderLock: a decision reads the host clock once it
// holds the write lock. Read before, a decision that waits for the lock
// while another process decides after a daily reset decides at an instant
// before the reset, on a log the other decision pruned to the new day: it
// admits on a spent day and records an entry no day counts.
//
// Process A's clock reads 23:59:59.9 (Los Angeles) when it starts a
// decision; in that moment process B, whose clock reads 00:00:00.1, decides
// (or fails to: A holds the lock). A's charge must be refused: the day it
// decides in was spent.
func TestDecisionReadsClockUnderLock(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "quota.db")
	a, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlitestore.Open(path, sqlitestore.WithBusyTimeout(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	budget := quota.Budget{Name: "units", Limit: 2, Window: quota.Daily(la)}
	take := func(s *sqlitestore.Store, nonce string, cost int64) (*backend.TakeResult, error) {
		return s.Take(ctx, &backend.TakeRequest{API: "api", Owner: "o", Nonce: nonce, Debits: []backend.Debit{{Budget: budget, Cost: cost}}})
	}
	before := time.Date(2026, 11, 22, 23, 59, 59, 900000000, la)
	after := time.Date(2026, 11, 23, 0, 0, 0, 100000000, la)
	sqlitestore.SetClock(b, func() time.Time { return after })
	var other func()
	sqlitestore.SetClock(a, func() time.Time {
		if f := other; f != nil {
			other = nil
			f()
		}
		return before
	})
	if res, err := take(a, "n1", 2); err != nil || !res.OK {
		t.Fatalf("spending the day: %+v, %v", res, err)
	}
	other = func() {
		// B's decision after the reset: it waits for A's lock, if A holds it
		_, err := take(b, "n2", 1)
		t.Logf("B at %v: %v", after, err)
	}
	res, err := take(a, "n3", 1)
	if err != nil {
		t.Fatal(err)
	}
	if other != nil {
		t.Fatal("A's decision never read the clock")
	}
	if res.OK {
		t.Fatalf("A admitted 1 unit at %v, on a day already spent (usage %+v)", res.At.In(la), res.Usage)
	}
}
