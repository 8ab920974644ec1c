package sqlitestore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// mpLimiter is the limiter the child processes use (api "mp", one budget),
// on st, at the fixed instant at.
func mpLimiter(t testing.TB, st quota.Store, limit int64, at time.Time) *quota.Limiter {
	t.Helper()
	l, err := quota.New(st, "mp", []quota.Budget{{Name: childBudget, Limit: limit, Window: quota.Sliding(24 * time.Hour)}},
		quota.WithClock(func() time.Time { return at }))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// chargeInChild runs a new process that charges the budget at path until
// refused and returns the units it was granted.
func chargeInChild(t *testing.T, path string, limit int64, at time.Time) int64 {
	t.Helper()
	cs := startAll(t, 1, "charge", childCfg{Path: path, Limit: limit, Goroutines: 1, Refusals: 3, Clock: at})
	release(t, cs)
	c := cs[0]
	var granted int64
	for {
		l, err := c.next()
		if err != nil {
			t.Fatalf("child ended without done: %v", err)
		}
		switch l.Event {
		case "ok":
			granted += l.Cost
		case "error":
			t.Fatalf("child: %s", l.Err)
		case "done":
			_ = c.cmd.Wait()
			return granted
		}
	}
}

// TestFileDeletedUnderTwoProcesses deletes the database file, its WAL and
// its shared memory under a running store, then a new process creates a
// new file at the path and charges it to the limit. The running store must
// refuse from then on (it would keep charging the unlinked file, while the
// new process counts from zero): after the deletion, at most the limit is
// granted in all, and the old store's refusals say why.
//
// "shm removed" deletes the shared memory alone (a cleanup script, an
// operator who takes it for a stale lock file): the new process makes a
// fresh one, and SQLite's write lock, which lives in it, no longer keeps
// the two processes' writes apart. Staged with two processes charging one
// budget of 200, that admitted 327 units, and the file kept 200 of them.
func TestFileDeletedUnderTwoProcesses(t *testing.T) {
	for _, how := range []string{"deleted", "replaced", "shm removed"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
			path := filepath.Join(t.TempDir(), "quota.db")
			st, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			const limit = 100
			l := mpLimiter(t, st, limit, at)
			mustTake(t, l, 60)
			switch how {
			case "deleted":
				for _, f := range []string{path, path + "-wal", path + "-shm"} {
					if err := os.Remove(f); err != nil {
						t.Fatal(err)
					}
				}
			case "shm removed":
				if err := os.Remove(path + "-shm"); err != nil {
					t.Fatal(err)
				}
			case "replaced": // say, a backup restored over it
				other := filepath.Join(t.TempDir(), "other.db")
				o, err := sqlitestore.Open(other)
				if err != nil {
					t.Fatal(err)
				}
				o.Close()
				if err := os.Rename(other, path); err != nil {
					t.Fatal(err)
				}
			}
			granted := chargeInChild(t, path, limit, at)
			if granted <= 0 || granted > limit {
				t.Fatalf("the new process was granted %d on the new file, want 1 to %d", granted, limit)
			}
			inNew := granted
			for range 3 {
				r, err := l.Take(ctx, childKey, quota.Units(childBudget, 1))
				if err == nil {
					t.Errorf("the old store granted %d (used %d in its file) after the file was %s: the accounting is split", r.Usage[0].Cost, r.Usage[0].Used, how)
					granted += r.Usage[0].Cost
					continue
				}
				if !errors.Is(err, quota.ErrStoreUnavailable) || !errors.Is(err, sqlitestore.ErrReplaced) {
					t.Fatalf("old store's Take: %v; want ErrStoreUnavailable and ErrReplaced", err)
				}
			}
			if granted > limit {
				t.Fatalf("granted %d after the file was %s, on a limit of %d", granted, how, limit)
			}
			if _, err := l.Status(ctx, childKey); !errors.Is(err, sqlitestore.ErrReplaced) {
				t.Fatalf("old store's Status: %v; want ErrReplaced", err)
			}
			// A new Open uses the file at the path now.
			st2, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			us, err := mpLimiter(t, st2, limit, at).Status(ctx, childKey)
			// (A file renamed over the path meets the old file's WAL, which
			// SQLite cannot tell apart: it may count more, never less.)
			if err != nil || us[0].Used < inNew || us[0].Used > limit {
				t.Fatalf("reopened: %v, %v; want used %d to %d", us, err, inNew, limit)
			}
		})
	}
}

func mustTake(t testing.TB, l *quota.Limiter, cost int64) {
	t.Helper()
	if _, err := l.Take(context.Background(), childKey, quota.Units(childBudget, cost)); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkIdentityCheck measures a decision with the check that the file
// is still the one opened (three stat calls) against the stat calls alone.
func BenchmarkIdentityCheck(b *testing.B) {
	path := filepath.Join(b.TempDir(), "quota.db")
	st, err := sqlitestore.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	b.Run("stat3", func(b *testing.B) {
		for b.Loop() {
			for _, f := range []string{path, path + "-wal", path + "-shm"} {
				if _, err := os.Stat(f); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("take", func(b *testing.B) {
		l := mpLimiter(b, st, quota.MaxLimit, time.Time{})
		for b.Loop() {
			mustTake(b, l, 1)
		}
	})
}

// TestFileDeletedCarriesUsage: the database file is deleted (or another
// file is put at its path) under a running store that has charged 60 of
// 100. The store's next decision finds it and is refused; from then on the
// usage it recorded must still count for every process that opens the
// path, or a process started afterwards (a restart, the next cron run)
// counts from zero and admits the limit again. Staged with two processes
// on a budget of 200, the old one had admitted 58 and the new one then
// admitted 200: 258 in one window.
func TestFileDeletedCarriesUsage(t *testing.T) {
	for _, how := range []string{"deleted", "replaced"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
			path := filepath.Join(t.TempDir(), "quota.db")
			st, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			sqlitestore.SetClock(st, func() time.Time { return at.Add(time.Minute) }) // what the store carries counts then
			const limit = 100
			l := mpLimiter(t, st, limit, at)
			mustTake(t, l, 60)
			switch how {
			case "deleted":
				for _, f := range []string{path, path + "-wal", path + "-shm"} {
					if err := os.Remove(f); err != nil {
						t.Fatal(err)
					}
				}
			case "replaced": // say, an older backup restored over it
				other := filepath.Join(t.TempDir(), "other.db")
				o, err := sqlitestore.Open(other)
				if err != nil {
					t.Fatal(err)
				}
				o.Close()
				if err := os.Rename(other, path); err != nil {
					t.Fatal(err)
				}
			}
			_, err = l.Take(ctx, childKey, quota.Units(childBudget, 1))
			if !errors.Is(err, sqlitestore.ErrReplaced) {
				t.Fatalf("old store's Take after the file was %s: %v; want ErrReplaced", how, err)
			}
			t.Logf("old store: %v", err)
			if granted := chargeInChild(t, path, limit, at); granted > 0 {
				t.Errorf("a new process was granted %d after the file was %s, on top of the 60 the old file recorded (limit %d)", granted, how, limit)
			}
			st2, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			us, err := mpLimiter(t, st2, limit, at).Status(ctx, childKey)
			if err != nil || us[0].ExhaustedUntil.Before(at.Add(24*time.Hour)) {
				t.Fatalf("reopened: %+v, %v; want the budget spent until the old usage expires, %v", us, err, at.Add(24*time.Hour))
			}
		})
	}
}

// TestWALDeletedKeepsDecisions: the WAL is deleted under a running store
// (a cleanup script, an operator who takes it for a temporary file) while
// the decisions since the last checkpoint are only in it. The store's next
// decision finds it and is refused; the decisions it committed must not be
// lost with the WAL it still holds. Staged with two processes on a budget
// of 200, the old one had admitted 28 when the WAL went; the new one then
// failed every decision with "disk I/O error (522)" until both had exited,
// the 28 were gone, and the next process admitted 200.
func TestWALDeletedKeepsDecisions(t *testing.T) {
	for _, when := range []string{"at its next decision", "at its close"} {
		t.Run(when, func(t *testing.T) {
			ctx := context.Background()
			at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
			path := filepath.Join(t.TempDir(), "quota.db")
			st, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			const limit = 100
			l := mpLimiter(t, st, limit, at)
			mustTake(t, l, 60)
			if err := os.Remove(path + "-wal"); err != nil {
				t.Fatal(err)
			}
			if when == "at its next decision" {
				_, err = l.Take(ctx, childKey, quota.Units(childBudget, 1))
				if !errors.Is(err, sqlitestore.ErrReplaced) {
					t.Fatalf("Take after the WAL was deleted: %v; want ErrReplaced", err)
				}
				t.Logf("old store: %v", err)
			}
			// Another process opens the database, and still has it open
			// when the old store closes.
			cs := startAll(t, 1, "charge", childCfg{Path: path, Limit: limit, Goroutines: 1, Refusals: 3, Clock: at})
			if err := st.Close(); err != nil {
				t.Logf("old store's Close: %v", err)
			}
			release(t, cs)
			var granted int64
			var errs []string
			for {
				l, err := cs[0].next()
				if err != nil {
					break
				}
				switch l.Event {
				case "ok":
					granted += l.Cost
				case "error":
					errs = append(errs, l.Err)
				}
			}
			_ = cs[0].cmd.Wait()
			if len(errs) > 0 {
				t.Errorf("the new process failed: %q", errs)
			}
			st2, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			us, err := mpLimiter(t, st2, limit, at).Status(ctx, childKey)
			if err != nil {
				t.Fatal(err)
			}
			if us[0].Used < 60+granted || 60+granted > limit {
				t.Fatalf("after the WAL was deleted: the store counts %d, the new process was granted %d on top of the old store's 60 (limit %d)", us[0].Used, granted, limit)
			}
		})
	}
}

// TestWALDeletedErrorSaysWhy: a process that opens the database after its
// WAL was deleted under another process, and before that one notices,
// cannot decide (the shared memory describes frames the new WAL lacks).
// Its error must say what is wrong, not only SQLite's "disk I/O error
// (522)"; and once the other process has decided, it decides again.
func TestWALDeletedErrorSaysWhy(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "quota.db")
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const limit = 100
	l := mpLimiter(t, st, limit, at)
	mustTake(t, l, 60)
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	cs := startAll(t, 1, "charge", childCfg{Path: path, Limit: limit, Goroutines: 1, Refusals: 3, Clock: at})
	release(t, cs)
	line, err := cs[0].next()
	if err != nil || line.Event != "error" || !strings.Contains(line.Err, "WAL") || !strings.Contains(line.Err, "deleted") {
		t.Errorf("first decision of a process that opened after the WAL was deleted: %+v, %v; want an error saying the WAL may have been deleted", line, err)
	}
	_ = cs[0].cmd.Wait()
	// The old store notices at its next decision, and copies what it holds.
	if _, err := l.Take(ctx, childKey, quota.Units(childBudget, 1)); !errors.Is(err, sqlitestore.ErrReplaced) {
		t.Fatalf("old store's Take: %v; want ErrReplaced", err)
	}
	granted := chargeInChild(t, path, limit, at) // fails the test on an error
	if granted <= 0 || granted > limit-60 {
		t.Errorf("a new process was granted %d after the old store copied its decisions; want 1 to %d", granted, limit-60)
	}
}
