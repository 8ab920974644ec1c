package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// TestCarryRetriedAfterBusy: the database file is replaced while a store
// runs, and the first decision that finds it cannot carry the old usage to
// the new file because another process holds the new file's write lock
// past the busy timeout (a long transaction). The usage must not be lost
// for good: a later decision, or Close, carries it once the lock is free.
func TestCarryRetriedAfterBusy(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "quota.db")
	st, err := sqlitestore.Open(path, sqlitestore.WithBusyTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sqlitestore.SetClock(st, func() time.Time { return at.Add(time.Minute) })
	const limit = 100
	l := mpLimiter(t, st, limit, at)
	mustTake(t, l, 60)

	other := filepath.Join(t.TempDir(), "other.db")
	o, err := sqlitestore.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	o.Close()
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	os.Remove(path + "-wal")
	os.Remove(path + "-shm")

	// another process holds the new file's write lock
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	_, err = l.Take(ctx, childKey, quota.Units(childBudget, 1))
	if !errors.Is(err, sqlitestore.ErrReplaced) {
		t.Fatalf("Take after the file was replaced: %v; want ErrReplaced", err)
	}
	t.Logf("while the new file is locked: %v", err)
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	_, err = l.Take(ctx, childKey, quota.Units(childBudget, 1))
	t.Logf("once the lock is free: %v", err)
	if !errors.Is(err, sqlitestore.ErrReplaced) {
		t.Fatalf("Take: %v; want ErrReplaced", err)
	}
	st2, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	us, err := mpLimiter(t, st2, limit, at).Status(ctx, childKey)
	if err != nil || us[0].ExhaustedUntil.Before(at.Add(24*time.Hour)) {
		t.Fatalf("new file: %+v, %v; want the budget spent until the old usage expires (the 60 units the old file counts were lost)", us, err)
	}
}
