package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/sqlitestore"
	"github.com/quotactl/quotactl/quota/storetest"
)

var t0 = storetest.T0

// TestMatchesMemoryStore drives the SQLite store and quota.MemoryStore, the
// reference, through the same random sequence of requests (sliding and
// daily windows, multi-budget charges, refunds, exhaustion marks,
// adjustments, a clock that crosses daily resets, budgets redefined with
// other windows) and requires identical answers at every step. (A clock
// stepping back is storetest's ClockStepsBack: after one, what each store
// had already dropped as expired depends on when it tidied up.)
func TestMatchesMemoryStore(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			st, _ := openTemp(t, sqlitestore.WithSweepEvery(97))
			storetest.MatchesMemory(t, st, seed)
		})
	}
}

// TestDecisionDropsExpiredRows: a decision deletes the expired entries of
// the budgets it charges and the whole log of the credential's other
// budgets once nothing in them counts.
func TestDecisionDropsExpiredRows(t *testing.T) {
	st, path := openTemp(t, sqlitestore.WithSweepEvery(0))
	db := rawDB(t, path)
	clock := testkit.NewClock(t0)
	l, err := quota.New(st, "api", []quota.Budget{
		{Name: "a", Limit: 1000, Window: quota.Sliding(time.Hour)},
		{Name: "b", Limit: 1000, Window: quota.Sliding(time.Hour)},
	}, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := quota.Credential{Secret: "k"}
	for range 5 {
		if _, err := l.Take(ctx, key, quota.Charge{Units: map[string]int64{"a": 1, "b": 2}}); err != nil {
			t.Fatal(err)
		}
		clock.Add(time.Minute)
	}
	if n := count(t, db, "entries"); n != 10 {
		t.Fatalf("entries = %d, want 10", n)
	}
	clock.Set(t0.Add(time.Hour + 2*time.Minute + 30*time.Second)) // the first 3 of each have expired
	if _, err := l.Take(ctx, key, quota.Units("a", 1)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "entries"); n != 2+1+5 {
		t.Fatalf("entries = %d, want 8: a's 3 expired entries deleted, b not touched yet", n)
	}
	if got := usedOf(t, db, "a"); got != 3 {
		t.Fatalf("running sum of a = %d, want 3", got)
	}
	clock.Set(t0.Add(2 * time.Hour)) // all of b has expired
	if _, err := l.Take(ctx, key, quota.Units("a", 1)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "entries"); n != 2 {
		t.Fatalf("entries = %d, want 2 (a's last two charges)", n)
	}
	if n := count(t, db, "sums"); n != 1 {
		t.Fatalf("logs = %d, want 1: b's log is wholly expired and dropped", n)
	}
	if us, err := l.Status(ctx, key); err != nil || us[0].Used != 2 || us[1].Used != 0 {
		t.Fatalf("Status = %+v, %v; want a 2, b 0", us, err)
	}
}

// TestSweepDropsIdleCredentials: logs of credentials no longer used are
// deleted by the periodic sweep; one still marked exhausted, or still
// holding entries that count, is kept.
func TestSweepDropsIdleCredentials(t *testing.T) {
	const every = 16
	st, path := openTemp(t, sqlitestore.WithSweepEvery(every))
	db := rawDB(t, path)
	ctx := context.Background()
	clock := testkit.NewClock(t0)
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	l, err := quota.New(st, "api", []quota.Budget{b}, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := l.Take(ctx, quota.Credential{Secret: fmt.Sprint("idle-", i)}, quota.Units("units", 3)); err != nil {
			t.Fatal(err)
		}
	}
	marked := quota.Credential{Secret: "marked"}
	if err := l.Exhaust(ctx, marked, "units", t0.Add(5*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// A log redefined with a longer window while its entry at t0 still
	// counted: the entry counts at t0+3h, though under the old window it
	// expired at t0+1h. (Redefined after t0+1h, the entry would be gone:
	// a window counts only what the log kept.)
	long := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(24 * time.Hour)}
	lLong, err := quota.New(st, "api", []quota.Budget{long}, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(30 * time.Minute))
	redefined := quota.Credential{Secret: "idle-7"}
	if err := lLong.Exhaust(ctx, redefined, "units", t0.Add(31*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "sums"); n != 41 {
		t.Fatalf("logs before the sweep = %d, want 41", n)
	}
	clock.Set(t0.Add(3 * time.Hour))
	active := quota.Credential{Secret: "active"}
	for range 2 * every {
		if _, err := l.Take(ctx, active, quota.Units("units", 1)); err != nil {
			t.Fatal(err)
		}
	}
	// Left: active, marked, and the redefined log with its entry.
	if n := count(t, db, "sums"); n != 3 {
		t.Fatalf("logs after the sweep = %d, want 3 (active, marked, redefined)", n)
	}
	if n := count(t, db, "entries"); n != 2*every+1 {
		t.Fatalf("entries after the sweep = %d, want %d", n, 2*every+1)
	}
	if us, err := lLong.Status(ctx, redefined); err != nil || us[0].Used != 3 {
		t.Fatalf("the redefined log = %+v, %v; want its 3 units still counted", us, err)
	}
	if us, err := l.Status(ctx, marked); err != nil || us[0].ExhaustedUntil.IsZero() {
		t.Fatalf("the marked log = %+v, %v; want the mark kept", us, err)
	}
}

// TestLockTimeout: a process holding the write lock past the busy timeout
// makes a decision fail with ErrStoreUnavailable ("database is locked"),
// and a done context ends the wait early.
func TestLockTimeout(t *testing.T) {
	st, path := openTemp(t, sqlitestore.WithBusyTimeout(50*time.Millisecond))
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	req := &backend.TakeRequest{API: "api", Owner: "c", Nonce: "n1", Now: t0, Debits: []backend.Debit{{Budget: b, Cost: 1}}}
	ctx := context.Background()
	if _, err := st.Take(ctx, req); err != nil {
		t.Fatal(err)
	}
	// Another "process": a connection of its own holding the write lock.
	db := rawDB(t, path)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	_, err = st.Take(ctx, req)
	if !errors.Is(err, quota.ErrStoreUnavailable) || !strings.Contains(err.Error(), "locked") || !strings.HasPrefix(err.Error(), "sqlitestore: take: ") {
		t.Fatalf("Take while locked = %v, want sqlitestore: take: ...ErrStoreUnavailable ...locked", err)
	}
	for name, op := range map[string]func() error{
		"Exhaust": func() error {
			return st.Exhaust(ctx, &backend.ExhaustRequest{API: "api", Owner: "c", Budget: b, Until: t0.Add(time.Hour), Now: t0})
		},
		"DefineBudgets": func() error { return st.DefineBudgets(ctx, "api", []quota.Budget{b}) },
		"SaveState":     func() error { return st.SaveState(ctx, "k", nil) },
	} {
		if err := op(); !errors.Is(err, quota.ErrStoreUnavailable) {
			t.Errorf("%s while locked = %v, want ErrStoreUnavailable", name, err)
		}
	}
	// Readers are not blocked by a writer.
	us, err := st.Usage(ctx, &backend.UsageRequest{API: "api", Owner: "c", Budgets: []quota.Budget{b}, Now: t0})
	if err != nil || us[0].Used != 1 {
		t.Fatalf("Usage while locked = %+v, %v", us, err)
	}

	// With a long busy timeout, the caller's context ends the wait.
	st2, err := sqlitestore.Open(path, sqlitestore.WithBusyTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = st2.Take(cctx, req)
	if !errors.Is(err, quota.ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Take with a done context while locked = %v, want ErrStoreUnavailable and DeadlineExceeded", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	req.Nonce = "n2"
	if res, err := st.Take(ctx, req); err != nil || !res.OK || res.Usage[0].Used != 2 {
		t.Fatalf("Take after the lock is released = %+v, %v", res, err)
	}
}

// TestConcurrentGoroutines: goroutines of one process share one store
// through several limiters (as independent components would), charging two
// budgets at once. Every granted charge is in both logs, no refused one is
// in either, and the budgets are filled exactly.
func TestConcurrentGoroutines(t *testing.T) {
	st, _ := openTemp(t)
	ctx := context.Background()
	clock := testkit.NewClock(t0)
	budgets := []quota.Budget{
		{Name: "units", Limit: 20000, Window: quota.Sliding(time.Hour)},
		{Name: "calls", Limit: 300, Window: quota.Sliding(time.Hour)},
	}
	key := quota.Credential{Secret: "shared-key"}
	var mu sync.Mutex
	got := map[string]int64{} // nonce -> units cost
	var refusedCosts []int64
	var wg sync.WaitGroup
	for g := range 16 {
		l, err := quota.New(st, "api", budgets, quota.WithClock(clock.Now))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 40 {
				cost := 1 + rng.Int64N(100)
				r, err := l.Take(ctx, key, quota.Charge{Units: map[string]int64{"units": cost, "calls": 1}})
				mu.Lock()
				switch {
				case err == nil:
					es := strings.Split(r.ID(), ".")
					got[es[len(es)-1]] = cost
				case errors.Is(err, quota.ErrExhausted):
					refusedCosts = append(refusedCosts, cost)
				default:
					t.Errorf("Take: %v", err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	l, _ := quota.New(st, "api", budgets, quota.WithClock(clock.Now))
	units, err := l.Entries(ctx, key, "units")
	if err != nil {
		t.Fatal(err)
	}
	calls, err := l.Entries(ctx, key, "calls")
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != len(got) || len(calls) != len(got) {
		t.Fatalf("granted %d charges; logs hold %d units and %d calls entries", len(got), len(units), len(calls))
	}
	var sum int64
	for i, e := range units {
		if got[e.Nonce] != e.Cost || calls[i].Nonce != e.Nonce {
			t.Fatalf("entry %d: %+v / %+v does not match a granted charge", i, e, calls[i])
		}
		sum += e.Cost
	}
	us, err := l.Status(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Used != sum || us[1].Used != int64(len(got)) {
		t.Fatalf("Status = %+v; want units %d, calls %d", us, sum, len(got))
	}
	// The 640 attempts exceed 300 calls: calls must be exactly full.
	if us[1].Used != 300 || len(refusedCosts) != 640-300 {
		t.Fatalf("calls used %d with %d refusals; want 300 and 340", us[1].Used, len(refusedCosts))
	}
}

func count(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// usedOf returns the running sum the store keeps for budget (one
// credential in the database).
func usedOf(t *testing.T, db *sql.DB, budget string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(`SELECT used FROM sums WHERE budget = ?`, budget).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
