package redisstore_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestTakeStoppedWhileServerHangs: limiters that fail open over a Redis
// server of the test's own. While the server hangs, a Take its caller
// cancels (a job stopping on SIGTERM) returns an error wrapping
// context.Canceled, not ErrStoreUnavailable: nothing admitted, nothing
// unmetered, nothing logged; one whose context was cancelled before it
// began never reaches the server. The store not answering in time — the
// caller's deadline passing while the server hangs, the client's own read
// timeout with the caller's context live, the server down — is an
// outage: FailOpen admits the charge unmetered and logs it.
func TestTakeStoppedWhileServerHangs(t *testing.T) {
	srv := redistest.Server(t)
	newClient := func(timeout time.Duration) *redis.Client {
		c := redis.NewClient(&redis.Options{
			Addr: srv.Addr(), DialTimeout: 250 * time.Millisecond, ReadTimeout: timeout, WriteTimeout: timeout,
			PoolTimeout: time.Second, MaxRetries: -1, DialerRetries: 1,
		})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	ctx := context.Background()
	b := quota.Budget{Name: "units", Limit: 1000, Window: quota.Sliding(time.Hour)}
	cred := quota.Credential{Secret: "AIzaSy-redis-stopped", Label: "k"}
	logs := &testkit.Buffer{}
	prefix := redistest.Prefix(t)
	newLimiter := func(c *redis.Client) *quota.Limiter {
		l, err := quota.New(redisstore.New(c, redisstore.WithPrefix(prefix)), "api", []quota.Budget{b},
			quota.FailOpen(5), quota.WithLogger(slog.New(slog.NewTextHandler(logs, nil))), quota.WithStoreLoss(quota.TrustStore))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Take(ctx, cred, quota.Units("units", 1)); err != nil { // registers cred, loads the scripts
			t.Fatal(err)
		}
		return l
	}
	l := newLimiter(newClient(30 * time.Second)) // only a context ends a call to a hung server
	ls := newLimiter(newClient(200 * time.Millisecond))

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	r, err := l.Take(cctx, cred, quota.Units("units", 1))
	if r != nil || !errors.Is(err, context.Canceled) || errors.Is(err, quota.ErrStoreUnavailable) {
		t.Fatalf("Take cancelled while the server hangs = %+v, %v; want an error wrapping context.Canceled, not ErrStoreUnavailable", r, err)
	}
	r, err = l.Take(cctx, cred, quota.Units("units", 1))
	if r != nil || !errors.Is(err, context.Canceled) || errors.Is(err, quota.ErrStoreUnavailable) {
		t.Fatalf("Take with a context cancelled before = %+v, %v; want an error wrapping context.Canceled, not ErrStoreUnavailable", r, err)
	}
	if n := l.Unmetered(); n != 0 || logs.String() != "" {
		t.Fatalf("a cancelled caller: Unmetered() = %d, logged %q; want 0 and nothing", n, logs.String())
	}

	dctx, dcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer dcancel()
	if r, err := l.Take(dctx, cred, quota.Units("units", 1)); err != nil || !r.Unmetered {
		t.Fatalf("Take whose deadline passed while the server hangs = %+v, %v; want admitted unmetered", r, err)
	}
	if r, err := ls.Take(ctx, cred, quota.Units("units", 1)); err != nil || !r.Unmetered {
		t.Fatalf("Take past the client's read timeout, the caller's context live = %+v, %v; want admitted unmetered", r, err)
	}
	resumed = true
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if r, err := l.Take(ctx, cred, quota.Units("units", 1)); err != nil || !r.Unmetered {
		t.Fatalf("Take with the server down = %+v, %v; want admitted unmetered", r, err)
	}
	if l.Unmetered() != 2 || ls.Unmetered() != 1 || strings.Count(logs.String(), "admitted unmetered") != 3 {
		t.Fatalf("Unmetered() = %d and %d, want 2 and 1; logs:\n%s", l.Unmetered(), ls.Unmetered(), logs.String())
	}
}
