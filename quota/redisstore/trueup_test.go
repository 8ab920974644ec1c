package redisstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/storetest"
)

// TestTrueUpShared: a true-up made through one client (one process) is
// what another client's Take decides on.
func TestTrueUpShared(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		p := redistest.Prefix(t)
		storetest.TrueUpShared(t,
			redisstore.New(redistest.Client(t), redisstore.WithPrefix(p)),
			redisstore.New(redistest.Client(t), redisstore.WithPrefix(p)))
	})
	t.Run("miniredis", func(t *testing.T) {
		m := redistest.Mini(t)
		storetest.TrueUpShared(t, redisstore.New(redistest.MiniClient(t, m)), redisstore.New(redistest.MiniClient(t, m)))
	})
}

// trueUpLimiter returns a limiter over its own client of c's server (a
// process), on a sliding hour of 100 units, at *clock.
func trueUpLimiter(t *testing.T, st *redisstore.Store, clock *time.Time) *quota.Limiter {
	t.Helper()
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(func() time.Time { return *clock }), quota.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var trueUpCred = quota.Credential{Secret: "trueup-secret", Owner: "proj"}

// TestTrueUpNoFalseLoss: true-ups, raising (an entry stamped before newer
// ones, on a log it makes or one that holds entries) and lowering (down to
// an empty log), leave the store-loss marker so that no later decision,
// in this process or another, finds a loss where none was.
func TestTrueUpNoFalseLoss(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		p := redistest.Prefix(t)
		clock := t0
		st := redisstore.New(c, redisstore.WithPrefix(p))
		a, b := trueUpLimiter(t, st, &clock), trueUpLimiter(t, redisstore.New(c, redisstore.WithPrefix(p)), &clock)
		unit := quota.Units("units", 1)
		// a true-up on a log no take made yet
		if out, err := a.TrueUp(ctx, trueUpCred, quota.Report{Budget: "units", Used: 20, Remaining: -1, Reset: clock.Add(10 * time.Minute)}); err != nil || out.Added != 20 {
			t.Fatalf("first TrueUp = %+v, %v", out, err)
		}
		for _, l := range []*quota.Limiter{a, b} {
			if _, err := l.Take(ctx, trueUpCred, unit); err != nil {
				t.Fatalf("Take after a true-up: %v", err)
			}
		}
		clock = clock.Add(11 * time.Minute) // the true-up's entry has expired
		if out, err := b.TrueUp(ctx, trueUpCred, quota.Report{Budget: "units", Used: 50, Remaining: -1, Reset: clock.Add(5 * time.Minute)}); err != nil || out.Counted != 2 || out.Added != 48 {
			t.Fatalf("second TrueUp = %+v, %v; want counted 2, added 48", out, err)
		}
		// lowered to nothing: the log goes, and that is no loss
		bud := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
		res, err := st.TrueUp(ctx, &backend.TrueUpRequest{API: "api", Owner: "proj", Budget: bud, Used: 0, Until: clock.Add(time.Minute),
			Nonce: "low", Now: clock, Lower: true, Since: clock.Add(time.Second)})
		if err != nil || res.Added != -50 || res.Usage.Used != 0 {
			t.Fatalf("lowering TrueUp = %+v, %v; want -50, used 0", res, err)
		}
		clock = clock.Add(time.Second)
		for _, l := range []*quota.Limiter{a, b, a} {
			if _, err := l.Take(ctx, trueUpCred, unit); err != nil {
				t.Fatalf("Take after lowering to nothing: %v", err)
			}
		}
		clock = clock.Add(2 * time.Hour) // everything expired
		for _, l := range []*quota.Limiter{b, a} {
			if _, err := l.Take(ctx, trueUpCred, unit); err != nil {
				t.Fatalf("Take two hours on: %v", err)
			}
		}
		if n := a.StoreLosses() + b.StoreLosses(); n != 0 {
			t.Fatalf("%d store losses found after true-ups; want none", n)
		}
	})
}

// TestTrueUpThenFlushIsFound: a FLUSHALL of a redis-server of the test's
// own after a true-up, the only write the process made, is found as a
// store loss by that process's next decision (the budget counts as spent);
// and after a take and a true-up, by either process.
func TestTrueUpThenFlushIsFound(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Server(t)
	clock := time.Now().Truncate(time.Microsecond) // the server's TTLs run on its own clock
	a := trueUpLimiter(t, redisstore.New(srv.Client(t)), &clock)
	if out, err := a.TrueUp(ctx, trueUpCred, quota.Report{Budget: "units", Used: 30, Remaining: -1, Reset: clock.Add(20 * time.Minute)}); err != nil || out.Added != 30 {
		t.Fatalf("TrueUp = %+v, %v", out, err)
	}
	if err := srv.Client(t).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := decide(t, a, trueUpCred, quota.Units("units", 1))
	var e *quota.ExhaustedError
	if !errors.As(err, &e) || a.StoreLosses() != 1 {
		t.Fatalf("Take after a flush that lost a true-up = %v, %d losses; want refused, the loss found", err, a.StoreLosses())
	}

	// another owner: a take, then a true-up, then the flush; the other
	// process, which saw only the take, finds it too
	other := quota.Credential{Secret: "trueup-secret", Owner: "proj2"}
	b := trueUpLimiter(t, redisstore.New(srv.Client(t)), &clock)
	if _, err := decide(t, b, other, quota.Units("units", 5)); err != nil {
		t.Fatal(err)
	}
	if out, err := a.TrueUp(ctx, other, quota.Report{Budget: "units", Used: 40, Remaining: -1, Reset: clock.Add(20 * time.Minute)}); err != nil || out.Added != 35 {
		t.Fatalf("TrueUp of proj2 = %+v, %v", out, err)
	}
	if err := srv.Client(t).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := decide(t, b, other, quota.Units("units", 1)); !errors.As(err, &e) || b.StoreLosses() != 1 {
		t.Fatalf("b's Take after the flush = %v, %d losses; want refused, the loss found", err, b.StoreLosses())
	}
	if _, err := decide(t, a, other, quota.Units("units", 1)); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("a's Take after b found the loss = %v; want refused", err)
	}
}

// TestTrueUpLeavesALossToTake: a budget whose log the store lost (evicted
// while the marker says it must hold an entry) is left as it is by a
// true-up, which would otherwise hide the loss under its own entry: the
// next Take finds the loss and counts the budget spent.
func TestTrueUpLeavesALossToTake(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		p := redistest.Prefix(t)
		clock := t0
		st := redisstore.New(c, redisstore.WithPrefix(p))
		l := trueUpLimiter(t, st, &clock)
		if _, err := l.Take(ctx, trueUpCred, quota.Units("units", 10)); err != nil {
			t.Fatal(err)
		}
		if err := c.Del(ctx, p+redisstore.CredentialTag("api", "proj")+":log:units").Err(); err != nil {
			t.Fatal(err)
		}
		out, err := l.TrueUp(ctx, trueUpCred, quota.Report{Budget: "units", Used: 50, Remaining: -1, Reset: clock.Add(10 * time.Minute)})
		if err != nil || out.Added != 0 {
			t.Fatalf("TrueUp of a lost log = %+v, %v; want nothing added", out, err)
		}
		var e *quota.ExhaustedError
		if _, err := l.Take(ctx, trueUpCred, quota.Units("units", 1)); !errors.As(err, &e) || l.StoreLosses() != 1 {
			t.Fatalf("Take after the true-up = %v, %d losses; want the loss found and the charge refused", err, l.StoreLosses())
		}
	})
}
