package redisstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestStoreLossCaughtUp: a failover loses one admission of process A (a
// lease's block, in the staged run that found it), and process B, which
// never saw that write, decides on the new master before A does again. B's
// write takes the owner's sequence back up to what A saw, so A's sequence
// check passed and the loss was never found: on a limit of 100, A's 10
// lost units were admitted again (110 granted, 100 recorded; a Cluster
// FAILOVER FORCE under load admitted 20,003 of 20,000). Each store now
// also checks that its own last admission is still in the marker, so A
// finds the loss and the budget counts as spent.
func TestStoreLossCaughtUp(t *testing.T) {
	for _, path := range []string{"fast", "general"} {
		t.Run(path, func(t *testing.T) {
			onBothLossy(t, func(t *testing.T, c redis.UniversalClient, snapshot func(prefix string) (restore func())) {
				ctx := context.Background()
				clock := t0
				prefix := redistest.Prefix(t)
				budgets := []quota.Budget{{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}}
				process := func(bucket int) *quota.Limiter {
					s := redisstore.New(c, redisstore.WithPrefix(prefix))
					redisstore.OwnBucket(s, bucket)
					if path == "general" {
						redisstore.GeneralOnly(s)
					}
					l, err := quota.New(s, "api", budgets, quota.WithOwner("proj"),
						quota.WithClock(func() time.Time { return clock }),
						quota.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
					if err != nil {
						t.Fatal(err)
					}
					return l
				}
				a, b := process(1), process(2)
				take := func(l *quota.Limiter, n int64) error {
					clock = clock.Add(time.Millisecond)
					_, err := l.Take(ctx, secret, quota.Units("units", n))
					return err
				}
				for _, l := range []*quota.Limiter{a, b, a, b} {
					if err := take(l, 20); err != nil {
						t.Fatal(err)
					}
				}
				failover := snapshot(prefix)        // what the replica has
				if err := take(a, 10); err != nil { // acknowledged, never replicated
					t.Fatal(err)
				}
				failover() // the replica, promoted
				granted := int64(90)
				if err := take(b, 10); err != nil { // B saw nothing lost: admitted
					t.Fatal(err)
				}
				granted += 10
				err := take(a, 10)
				if err == nil {
					granted += 10
				}
				if !errors.Is(err, quota.ErrExhausted) || a.StoreLosses() != 1 {
					t.Fatalf("A, whose admission the failover lost, after B wrote on the new master: Take = %v, %d losses found; want refused, the loss found (%d granted on a limit of 100)",
						err, a.StoreLosses(), granted)
				}
				if err := take(b, 1); !errors.Is(err, quota.ErrExhausted) {
					t.Fatalf("B after the loss was found: Take = %v, want refused (the budget marked spent)", err)
				}
			})
		})
	}
}

// onBothLossy runs f on a real Redis (when the shared server is one) and
// on a miniredis, with snapshot: it saves every key under prefix (on miniredis, every key), and the
// function it returns makes the keys what it saved, as a failover to a
// replica that got nothing since would.
func onBothLossy(t *testing.T, f func(t *testing.T, c redis.UniversalClient, snapshot func(prefix string) (restore func()))) {
	if redistest.IsReal(t) {
		t.Run("redis", func(t *testing.T) {
			c := redistest.Client(t)
			f(t, c, func(prefix string) func() {
				ctx := context.Background()
				keys, err := c.Keys(ctx, prefix+"*").Result()
				if err != nil || len(keys) == 0 {
					t.Fatalf("keys %v, %v", keys, err)
				}
				type dumped struct {
					v   string
					ttl time.Duration
				}
				saved := make(map[string]dumped, len(keys))
				for _, k := range keys {
					v, err := c.Dump(ctx, k).Result()
					if err != nil {
						t.Fatal(err)
					}
					ttl, err := c.PTTL(ctx, k).Result()
					if err != nil {
						t.Fatal(err)
					}
					saved[k] = dumped{v, max(ttl, 0)}
				}
				return func() {
					flushKeys(t, c, prefix)
					for k, d := range saved {
						if err := c.Restore(ctx, k, d.ttl, d.v).Err(); err != nil {
							t.Fatal(err)
						}
					}
				}
			})
		})
	}
	t.Run("miniredis", func(t *testing.T) {
		m := redistest.Mini(t)
		f(t, redistest.MiniClient(t, m), func(string) func() {
			saved := miniredis.NewMiniRedis() // never started: a key space
			copyMini(t, m, saved)
			return func() {
				m.FlushAll()
				copyMini(t, saved, m)
			}
		})
	})
}
