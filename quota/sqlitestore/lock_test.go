package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// TestQueuedCallerContext: a caller queued behind another of its process
// that waits for the write lock stops waiting when its context is done.
func TestQueuedCallerContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	st, err := Open(path, WithBusyTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	// Another process's connection holds the write lock.
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	// The first caller takes the process's turn and waits for the lock.
	first := make(chan error, 1)
	fctx, fcancel := context.WithCancel(ctx)
	go func() { first <- st.SaveState(fctx, "a", []byte("1")) }()
	for len(st.gate.sem) == 0 {
		runtime.Gosched()
	}
	// The second, queued behind it, gives up when its context ends.
	sctx, scancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer scancel()
	if err := st.SaveState(sctx, "b", []byte("2")); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, quota.ErrStoreUnavailable) {
		t.Fatalf("queued SaveState = %v, want DeadlineExceeded and ErrStoreUnavailable", err)
	}
	select {
	case err := <-first:
		t.Fatalf("the first caller returned %v while the lock was held", err)
	default:
	}
	fcancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting SaveState = %v, want Canceled", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveState(ctx, "c", []byte("3")); err != nil {
		t.Fatalf("SaveState once the lock is free: %v", err)
	}
	if _, err := st.LoadState(ctx, "a"); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("LoadState(a) = %v; the cancelled write must not have happened", err)
	}
}
