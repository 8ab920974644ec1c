package redisstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestScriptFlush: SCRIPT FLUSH between decisions (a restarted or failed
// over server has no scripts) costs nothing but one EVAL: no error.
func TestScriptFlush(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		// A server of the test's own: redis-server, or miniredis behind a
		// proxy without one on PATH (Server logs which).
		{"Server", func(t *testing.T) redis.UniversalClient { return redistest.Server(t).Client(t) }},
		{"miniredis", func(t *testing.T) redis.UniversalClient { return redistest.MiniClient(t, redistest.Mini(t)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.client(t)
			clock := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
			l, err := quota.New(redisstore.New(c), "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
				quota.WithClock(func() time.Time { return clock }))
			if err != nil {
				t.Fatal(err)
			}
			var rs []*quota.Reservation
			for i := range 10 {
				if i%3 == 1 {
					if err := c.ScriptFlush(ctx).Err(); err != nil {
						t.Fatal(err)
					}
				}
				rs = append(rs, take(t, l, 5))
			}
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := l.Refund(ctx, rs[0]); err != nil {
				t.Fatalf("Refund after SCRIPT FLUSH: %v", err)
			}
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			us, err := l.Status(ctx, secret)
			if err != nil || us[0].Used != 45 {
				t.Fatalf("Status after SCRIPT FLUSH = %+v, %v; want used 45", us, err)
			}
		})
	}
}

// TestServerDown: a killed server gives ErrStoreUnavailable; a fail-closed
// limiter refuses, a fail-open one admits cheap charges unmetered; after a
// restart decisions resume.
func TestServerDown(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Server(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	st := redisstore.New(c)
	budgets := []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}}
	closed, _ := quota.New(st, "api", budgets)
	open, _ := quota.New(st, "api", budgets, quota.FailOpen(5), quota.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	take(t, closed, 10)

	srv.Kill()
	_, err := closed.Take(ctx, secret, quota.Units("units", 1))
	if !errors.Is(err, quota.ErrStoreUnavailable) || errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("Take with the server down = %v, want ErrStoreUnavailable", err)
	}
	if r, err := open.Take(ctx, secret, quota.Units("units", 5)); err != nil || !r.Unmetered {
		t.Fatalf("fail-open Take of 5 = %+v, %v; want unmetered", r, err)
	}
	if _, err := open.Take(ctx, secret, quota.Units("units", 6)); !errors.Is(err, quota.ErrStoreUnavailable) {
		t.Fatalf("fail-open Take of 6 (over the threshold) = %v, want ErrStoreUnavailable", err)
	}
	for name, f := range map[string]func() error{
		"Status":  func() error { _, err := closed.Status(ctx, secret); return err },
		"Exhaust": func() error { return closed.Exhaust(ctx, secret, "units", time.Now().Add(time.Hour)) },
		"Adjust":  func() error { return closed.Adjust(ctx, secret, "units", 1) },
		"Entries": func() error { _, err := closed.Entries(ctx, secret, "units"); return err },
		"List":    func() error { _, err := st.List(ctx); return err },
		"State":   func() error { return st.SaveState(ctx, "k", []byte("v")) },
	} {
		if err := f(); !errors.Is(err, quota.ErrStoreUnavailable) {
			t.Errorf("%s with the server down = %v, want ErrStoreUnavailable", name, err)
		}
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The restarted server lost its data and its scripts: the limiter finds
	// the loss and counts the budget spent, until adjusted to the truth.
	if e := refuse(t, closed, 1); e.ExhaustedUntil.IsZero() || closed.StoreLosses() != 1 {
		t.Fatalf("after restart: %v, %d losses; want spent (store loss)", e, closed.StoreLosses())
	}
	if err := closed.Adjust(ctx, secret, "units", 10); err != nil {
		t.Fatal(err)
	}
	if r := take(t, closed, 7); r.Usage[0].Used != 17 {
		t.Fatalf("after adjust: used %d, want 17", r.Usage[0].Used)
	}
}

// blackhole accepts connections on loopback and never answers: a hung
// server.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// TestContextDeadline: against a server that never answers, every call
// returns at its context's deadline with ErrStoreUnavailable wrapping
// context.DeadlineExceeded, whether or not the client itself honours
// contexts. The client's own timeouts are an hour, so only the deadline can
// end the call.
func TestContextDeadline(t *testing.T) {
	addr := blackhole(t)
	for _, honour := range []bool{false, true} {
		c := redis.NewClient(&redis.Options{
			Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: honour,
			DialTimeout: time.Hour, ReadTimeout: time.Hour, WriteTimeout: time.Hour,
		})
		t.Cleanup(func() { _ = c.Close() })
		st := redisstore.New(c)
		l, _ := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}})
		for name, f := range map[string]func(context.Context) error{
			"Take":   func(ctx context.Context) error { _, err := l.Take(ctx, secret, quota.Units("units", 1)); return err },
			"Status": func(ctx context.Context) error { _, err := l.Status(ctx, secret); return err },
			"List":   func(ctx context.Context) error { _, err := st.List(ctx); return err },
			"Load":   func(ctx context.Context) error { _, err := st.LoadState(ctx, "x"); return err },
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			err := f(ctx)
			cancel()
			if !errors.Is(err, quota.ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("ContextTimeoutEnabled=%v: %s on a hung server = %v; want ErrStoreUnavailable wrapping DeadlineExceeded", honour, name, err)
			}
		}
	}
}
