package sqlitestore_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// TestTakeStoppedWhileLocked: a limiter that fails open, whose Take waits
// for the write lock another process holds. Cancelled by its caller (a job
// stopping on SIGTERM), it returns an error wrapping context.Canceled and
// not ErrStoreUnavailable, admits nothing, counts nothing as unmetered and
// logs nothing. The store not answering in time (the caller's deadline
// passes during the wait, or the store's own busy timeout ends it while the
// caller's context is live) is a store outage: FailOpen admits the charge
// unmetered.
func TestTakeStoppedWhileLocked(t *testing.T) {
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	cred := quota.Credential{Secret: "AIzaSy-sqlite-stopped", Label: "k"}
	ctx := context.Background()
	st, path := openTemp(t, sqlitestore.WithBusyTimeout(time.Hour)) // only a context ends its wait
	short, err := sqlitestore.Open(path, sqlitestore.WithBusyTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	logs := &testkit.Buffer{}
	newLimiter := func(s quota.Store) *quota.Limiter {
		l, err := quota.New(s, "api", []quota.Budget{b}, quota.FailOpen(5), quota.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Take(ctx, cred, quota.Units("units", 1)); err != nil { // registers cred
			t.Fatal(err)
		}
		return l
	}
	l, ls := newLimiter(st), newLimiter(short)

	conn, err := rawDB(t, path).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	r, err := l.Take(cctx, cred, quota.Units("units", 1))
	if r != nil || !errors.Is(err, context.Canceled) || errors.Is(err, quota.ErrStoreUnavailable) {
		t.Fatalf("Take cancelled while waiting for the lock = %+v, %v; want an error wrapping context.Canceled, not ErrStoreUnavailable", r, err)
	}
	if n := l.Unmetered(); n != 0 || logs.String() != "" {
		t.Fatalf("a cancelled caller: Unmetered() = %d, logged %q; want 0 and nothing", n, logs.String())
	}

	dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer dcancel()
	if r, err := l.Take(dctx, cred, quota.Units("units", 1)); err != nil || !r.Unmetered {
		t.Fatalf("Take whose deadline passed waiting for the lock = %+v, %v; want admitted unmetered", r, err)
	}
	if r, err := ls.Take(ctx, cred, quota.Units("units", 1)); err != nil || !r.Unmetered {
		t.Fatalf("Take past the store's busy timeout, the caller's context live = %+v, %v; want admitted unmetered", r, err)
	}
	if l.Unmetered() != 1 || ls.Unmetered() != 1 || strings.Count(logs.String(), "admitted unmetered") != 2 {
		t.Fatalf("Unmetered() = %d and %d, want 1 and 1; logs:\n%s", l.Unmetered(), ls.Unmetered(), logs.String())
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if us, err := l.Status(ctx, cred); err != nil || us[0].Used != 2 {
		t.Fatalf("usage = %+v, %v; want the 2 metered units alone", us, err)
	}
}
