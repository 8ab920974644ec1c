package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/storeurl"
)

const lossLog = `msg="quota: the store lost recorded usage`

// decide is Take, retried while the store is unavailable (a client
// reconnecting after a restart): a bounded number of attempts, no sleeping.
func decide(t *testing.T, l *quota.Limiter, cred quota.Credential, ch quota.Charge) (*quota.Reservation, error) {
	t.Helper()
	var (
		r   *quota.Reservation
		err error
	)
	for range 20 {
		if r, err = l.Take(context.Background(), cred, ch); !errors.Is(err, quota.ErrStoreUnavailable) {
			return r, err
		}
	}
	t.Fatalf("Take(%v): still unavailable after 20 attempts: %v", ch.Units, err)
	return nil, err
}

// TestStoreLoss: a Redis of the test's own (redis-server --save "") loses
// everything the limiters recorded, by a restart without persistence or by
// FLUSHALL, after 600 of 1,000 daily units were spent. The first decision
// after the loss finds it (the owner's marker is gone while the process saw
// it) and, by default, every budget of the owner counts as spent, in the
// store: the finding process, another process that had used the store, and
// a process started after the loss all refuse, so no unit is granted over
// the limit (before the guard: 1,600 granted on 1,000). The finding is
// logged once and counted, by the process that made it; Status says it is a store loss; Adjust restores
// the true usage and clears the mark.
func TestStoreLoss(t *testing.T) {
	for _, fault := range []string{"restart", "flushall"} {
		t.Run(fault, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Server(t)
			la, err := time.LoadLocation("America/Los_Angeles")
			if err != nil {
				t.Fatal(err)
			}
			budgets := []quota.Budget{
				{Name: "units", Limit: 1000, Window: quota.Daily(la)},
				{Name: "search", Limit: 100, Window: quota.Sliding(time.Hour)},
			}
			var logs testkit.Buffer
			process := func() *quota.Limiter { // its own client and store: another process
				t.Helper()
				l, err := quota.New(redisstore.New(srv.Client(t)), "youtube", budgets,
					quota.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			a, b := process(), process()
			units := quota.Units("units", 100)
			var granted int64
			for range 6 {
				if _, err := decide(t, a, secret, units); err != nil {
					t.Fatal(err)
				}
				granted += 100
			}
			if _, err := decide(t, b, secret, quota.Units("search", 1)); err != nil {
				t.Fatal(err)
			}

			switch fault {
			case "restart":
				if err := srv.Restart(); err != nil {
					t.Fatal(err)
				}
			case "flushall":
				if err := srv.Client(t).FlushAll(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}

			_, err = decide(t, a, secret, units)
			var e *quota.ExhaustedError
			reset := quota.Daily(la).NextReset(time.Now())
			if !errors.As(err, &e) || !e.ExhaustedUntil.Equal(reset) || !e.RetryAt.Equal(reset) {
				t.Fatalf("first Take after the loss = %v; want refused, spent until the reset %v", err, reset)
			}
			if n := a.StoreLosses(); n != 1 {
				t.Fatalf("StoreLosses = %d, want 1", n)
			}
			// Every process sharing the store stops, including one that
			// never saw the marker; the budget the charge did not name
			// (search) is spent for one window too.
			c := process()
			for _, l := range []*quota.Limiter{a, b, c, a, b, c} {
				r, err := decide(t, l, secret, units)
				if err == nil {
					granted += r.Usage[0].Cost
				} else if !errors.Is(err, quota.ErrExhausted) {
					t.Fatal(err)
				}
			}
			if granted > 1000 {
				t.Fatalf("granted %d units on a limit of 1000", granted)
			}
			_, err = decide(t, c, secret, quota.Units("search", 1))
			if !errors.As(err, &e) || e.ExhaustedUntil.Before(time.Now().Add(59*time.Minute)) {
				t.Fatalf("search after the loss = %v; want spent for one window", err)
			}
			// One finding: the marker it repaired is past what b saw, and
			// the marks it set stop everyone else.
			if n := strings.Count(logs.String(), lossLog); n != 1 {
				t.Fatalf("the loss was logged %d times, want once:\n%s", n, logs.String())
			}
			us, err := c.Status(ctx, secret)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range us {
				if !u.StoreLoss || u.ExhaustedUntil.IsZero() || u.Remaining != 0 {
					t.Fatalf("Status after the loss: %+v; want every budget marked spent by a store loss", u)
				}
			}

			// The operator restores the true usage: the mark goes.
			if err := c.Adjust(ctx, secret, "units", 600); err != nil {
				t.Fatal(err)
			}
			for range 4 {
				if _, err := decide(t, b, secret, units); err != nil {
					t.Fatalf("after Adjust: %v", err)
				}
			}
			if _, err := decide(t, a, secret, quota.Units("units", 1)); !errors.Is(err, quota.ErrExhausted) {
				t.Fatalf("the 1,001st unit: %v, want refused", err)
			}
			us, err = c.Status(ctx, secret)
			if err != nil || us[0].StoreLoss || us[0].Used != 1000 {
				t.Fatalf("Status after Adjust: %+v, %v; want 1000 used, no store loss", us, err)
			}
			if n := a.StoreLosses() + b.StoreLosses() + c.StoreLosses(); n != 1 {
				t.Fatalf("%d findings in all, want 1", n)
			}
		})
	}
}

// TestStoreLossTrust: WithStoreLoss(TrustStore) decides on what the store
// still holds after a loss, and still logs and counts the finding.
func TestStoreLossTrust(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Server(t)
	var logs testkit.Buffer
	l, err := quota.New(redisstore.New(srv.Client(t)), "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.WithStoreLoss(quota.TrustStore), quota.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	take(t, l, 60)
	if err := srv.Client(t).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if r := take(t, l, 60); r.Usage[0].Used != 60 {
		t.Fatalf("trusting the store after a flush: used %d, want 60", r.Usage[0].Used)
	}
	take(t, l, 1)
	if l.StoreLosses() != 1 || strings.Count(logs.String(), lossLog) != 1 {
		t.Fatalf("StoreLosses %d, %d log lines; want the one finding", l.StoreLosses(), strings.Count(logs.String(), lossLog))
	}
}

// TestStoreLossRefundEmptiesLog: a refund that empties a log, or removes
// its newest entry, is not a loss (the marker follows the newest entry
// left), nor is a log whose entries all expired.
func TestStoreLossRefundEmptiesLog(t *testing.T) {
	ctx := context.Background()
	clock := t0
	l, err := quota.New(redisstore.New(redistest.MiniClient(t, redistest.Mini(t))), "api",
		[]quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(func() time.Time { return clock }))
	if err != nil {
		t.Fatal(err)
	}
	take(t, l, 10)
	clock = clock.Add(30 * time.Minute)
	if err := l.Refund(ctx, take(t, l, 10)); err != nil { // the older entry is left
		t.Fatal(err)
	}
	clock = clock.Add(31 * time.Minute)                    // and expires
	if err := l.Refund(ctx, take(t, l, 100)); err != nil { // the log is empty again
		t.Fatal(err)
	}
	if r := take(t, l, 100); r.Usage[0].Used != 100 || l.StoreLosses() != 0 {
		t.Fatalf("used %d, %d losses after refunds and expiry; want 100, none", r.Usage[0].Used, l.StoreLosses())
	}
}

// evictionServer starts a server of the test's own with maxmemory 4mb and
// policy, and returns its address and fill, which plays another
// application filling memory until the key watch is evicted (it reports
// whether it was). Without redis-server on PATH (and without
// $QUOTA_REQUIRE_REDIS=1, which makes that a failure) the server is an
// in-process miniredis that reports the same configuration to CONFIG GET,
// and fill does what the policy does: it deletes the keys the policy may
// evict (those with a TTL for volatile-*, any for allkeys-*).
func evictionServer(t *testing.T, policy string) (addr string, fill func(watch string) bool) {
	t.Helper()
	ctx := context.Background()
	if redistest.HaveServer(t, "a server with maxmemory") {
		srv := redistest.Server(t, "--maxmemory", "4mb", "--maxmemory-policy", policy)
		c := srv.Client(t)
		return srv.Addr(), func(watch string) bool {
			val := strings.Repeat("x", 10<<10)
			for i := range 4000 { // up to 40 MB, ten times maxmemory
				// keys with a TTL, which volatile policies may evict too
				if err := c.Set(ctx, fmt.Sprintf("otherapp:%d", i), val, time.Hour).Err(); err != nil {
					t.Fatal(err)
				}
				if i%10 == 9 && c.Exists(ctx, watch).Val() == 0 {
					return true
				}
			}
			return false
		}
	}
	m := redistest.Mini(t)
	if err := m.Server().Register("CONFIG", func(p *server.Peer, cmd string, args []string) {
		if len(args) != 2 || !strings.EqualFold(args[0], "GET") {
			p.WriteError("ERR only CONFIG GET is played by this test")
			return
		}
		p.WriteMapLen(2)
		p.WriteBulk("maxmemory")
		p.WriteBulk("4194304")
		p.WriteBulk("maxmemory-policy")
		p.WriteBulk(policy)
	}); err != nil {
		t.Fatal(err)
	}
	return m.Addr(), func(string) bool {
		for _, k := range m.Keys() {
			if strings.HasPrefix(policy, "allkeys-") || m.TTL(k) > 0 {
				m.Del(k)
			}
		}
		return true
	}
}

// TestEvictionPolicy: a server whose maxmemory-policy can evict the
// limiter's keys is refused at open, naming the setting (before: volatile-lru
// granted 6,000 on a limit of 2,000, allkeys-lru 4,100). With the opt-out
// (?allow_eviction=true) the store opens, and when another application's
// data makes Redis evict the limiter's keys, the next decision finds the
// loss: no unit is granted over the limit.
func TestEvictionPolicy(t *testing.T) {
	for _, policy := range []string{"volatile-lru", "allkeys-lru"} {
		t.Run(policy, func(t *testing.T) {
			ctx := context.Background()
			addr, fill := evictionServer(t, policy)
			prefix := redistest.Prefix(t)
			client := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { _ = client.Close() })

			_, err := redisstore.Open(ctx, client, redisstore.WithPrefix(prefix))
			if !errors.Is(err, redisstore.ErrUnsafeConfig) || !strings.Contains(err.Error(), "maxmemory-policy is "+policy) {
				t.Fatalf("Open on maxmemory-policy %s = %v; want ErrUnsafeConfig naming the setting", policy, err)
			}
			url := "redis://" + addr + "?prefix=" + prefix
			if _, err := storeurl.Open(ctx, url); !errors.Is(err, redisstore.ErrUnsafeConfig) {
				t.Fatalf("storeurl.Open(%s) = %v; want ErrUnsafeConfig", url, err)
			}
			st, err := storeurl.Open(ctx, url+"&allow_eviction=true")
			if err != nil {
				t.Fatalf("storeurl.Open with allow_eviction=true: %v", err)
			}
			t.Cleanup(func() { _ = st.Close() })

			l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 2000, Window: quota.Sliding(time.Hour)}},
				quota.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				t.Fatal(err)
			}
			var granted int64
			for range 150 {
				take(t, l, 10)
				granted += 10
			}
			log := prefix + redisstore.CredentialTag("api", fingerprint(secret)) + ":log:units"
			if !fill(log) {
				t.Fatal("the limiter's log was never evicted")
			}
			for range 300 {
				r, err := l.Take(ctx, secret, quota.Units("units", 10))
				if err == nil {
					granted += r.Usage[0].Cost
				} else if !errors.Is(err, quota.ErrExhausted) {
					t.Fatal(err)
				}
			}
			if granted > 2000 || l.StoreLosses() == 0 {
				t.Fatalf("after eviction: granted %d on a limit of 2000, %d losses found; want at most 2000 and the loss found", granted, l.StoreLosses())
			}
			t.Logf("granted %d on a limit of 2000; %d loss finding(s)", granted, l.StoreLosses())
		})
	}
}

// TestStoreLossAfterExpiry: a flush after everything recorded had expired
// anyway loses nothing, and is not a loss; a flush within the window is.
func TestStoreLossAfterExpiry(t *testing.T) {
	m := redistest.Mini(t)
	clock := t0
	l, err := quota.New(redisstore.New(redistest.MiniClient(t, m)), "api",
		[]quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(func() time.Time { return clock }), quota.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	take(t, l, 10)
	clock = clock.Add(61 * time.Minute) // the entry has left the window
	m.FlushAll()
	if r := take(t, l, 100); r.Usage[0].Used != 100 || l.StoreLosses() != 0 {
		t.Fatalf("after a flush of expired state: used %d, %d losses; want 100, none", r.Usage[0].Used, l.StoreLosses())
	}
	clock = clock.Add(30 * time.Minute) // the entry of 100 still counts
	m.FlushAll()
	refuse(t, l, 1)
	if l.StoreLosses() != 1 {
		t.Fatalf("a flush within the window: %d losses, want 1", l.StoreLosses())
	}
}

// TestMixedFleetShortLifetime: a process of an earlier version renews a
// sliding log's keys for one window (plus a tenth) on its every decision,
// where this version renews them for two, once a window (the marker's
// k:NAME). In a fleet mixing the two, the log can expire while a newer
// entry still counts. That is not an overspend: the log is missing before
// the marker's b:NAME, so the next decision finds a store loss and
// refuses, where counting the vanished log as empty would have admitted
// 95 units on top of 10 still in the window.
func TestMixedFleetShortLifetime(t *testing.T) {
	m := redistest.Mini(t)
	clock := t0
	l, err := quota.New(redisstore.New(redistest.MiniClient(t, m)), "api",
		[]quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(func() time.Time { return clock }), quota.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	tag := "quota:" + redisstore.CredentialTag("api", fingerprint(secret))
	take(t, l, 60) // the keys live 2h12m
	// an earlier version's decision at the same instant sets them to 1h6m
	for _, k := range []string{tag + ":log:units", tag + ":sum:units", tag + ":keep:units"} {
		m.SetTTL(k, time.Hour+6*time.Minute)
	}
	clock = clock.Add(30 * time.Minute)
	take(t, l, 10) // within what k:units claims: no renewal
	m.FastForward(time.Hour + 7*time.Minute)
	clock = t0.Add(time.Hour + 7*time.Minute)
	if m.Exists(tag + ":log:units") {
		t.Fatal("test setup: the log outlived the lifetime the earlier version gave it")
	}
	// 10 units of 00:30 still count: 95 more must not be admitted
	refuse(t, l, 95)
	if l.StoreLosses() != 1 {
		t.Fatalf("%d store losses found, want 1", l.StoreLosses())
	}
}

// TestStoreLossDailyLogAlone: a daily log lost on its own (evicted, or
// deleted) while its running sum stays is a store loss. The sum decided
// alone, so the next admission never looked at the log and, once the sum
// went too, the units it recorded were free again (found by staging it:
// 427 admitted on a limit of 300). Now the next decision finds the loss,
// on the fast path and the general one.
func TestStoreLossDailyLogAlone(t *testing.T) {
	for _, general := range []bool{false, true} {
		t.Run(fmt.Sprintf("general=%v", general), func(t *testing.T) {
			onBoth(t, func(t *testing.T, c redis.UniversalClient) {
				ctx := context.Background()
				clock := t0
				prefix := redistest.Prefix(t)
				st := redisstore.New(c, redisstore.WithPrefix(prefix))
				if general {
					redisstore.GeneralOnly(st)
				}
				l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 300, Window: quota.Daily(time.UTC)}},
					quota.WithClock(func() time.Time { return clock }), quota.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
				if err != nil {
					t.Fatal(err)
				}
				for range 3 {
					take(t, l, 40)
				}
				keys, err := c.Keys(ctx, prefix+"*:log:units").Result()
				if err != nil || len(keys) != 1 {
					t.Fatalf("log keys %v, %v; want one", keys, err)
				}
				if err := c.Del(ctx, keys[0]).Err(); err != nil {
					t.Fatal(err)
				}
				clock = clock.Add(time.Second)
				refuse(t, l, 1)
				if l.StoreLosses() != 1 {
					t.Fatalf("after the daily log was lost: %d losses, want 1", l.StoreLosses())
				}
			})
		})
	}
}

// exhaustHook is a store whose Exhaust first runs before: it plays what
// other processes do between the take that found a loss and the marks its
// limiter then sets on the budgets the charge did not name.
type exhaustHook struct {
	quota.Store
	before func()
}

func (s *exhaustHook) Exhaust(ctx context.Context, req *backend.ExhaustRequest) error {
	if f := s.before; f != nil {
		s.before = nil
		f()
	}
	return s.Store.Exhaust(ctx, req)
}

// TestStoreLossOtherBudgets: a take that finds the owner's state lost
// (flushed) marks the budgets it charges spent in the same script, and its
// limiter marks the owner's other budgets in calls of their own, after it.
// In between, the marker the take repaired said nothing of the other
// budgets, so another process charging one of them decided on the emptied
// store (found by staging: 6 processes mixing leases and plain takes, two
// FLUSHDBs, 6,319 admitted on a daily limit of 6,000). Now the repaired
// marker says the owner lost its state: a budget it has heard nothing of
// since counts as spent too, at its first decision, whichever process
// makes it.
func TestStoreLossOtherBudgets(t *testing.T) {
	for _, tc := range []struct{ finder, other string }{{"search", "units"}, {"units", "search"}} {
		for _, general := range []bool{false, true} {
			t.Run(fmt.Sprintf("finder=%s/general=%v", tc.finder, general), func(t *testing.T) {
				onBoth(t, func(t *testing.T, c redis.UniversalClient) {
					ctx := context.Background()
					clock := t0
					prefix := redistest.Prefix(t)
					budgets := []quota.Budget{
						{Name: "units", Limit: 300, Window: quota.Daily(time.UTC)},
						{Name: "search", Limit: 300, Window: quota.Sliding(time.Hour)},
					}
					var logs testkit.Buffer
					process := func(wrap func(quota.Store) quota.Store) *quota.Limiter {
						st := redisstore.New(c, redisstore.WithPrefix(prefix))
						if general {
							redisstore.GeneralOnly(st)
						}
						l, err := quota.New(wrap(st), "api", budgets, quota.WithClock(func() time.Time { return clock }),
							quota.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
						if err != nil {
							t.Fatal(err)
						}
						return l
					}
					hook := &exhaustHook{}
					finder := process(func(s quota.Store) quota.Store { hook.Store = s; return hook })
					other := process(func(s quota.Store) quota.Store { return s })
					ask := func(l *quota.Limiter, budget string, n int64) (*quota.Reservation, error) {
						return l.Take(ctx, secret, quota.Units(budget, n))
					}
					// the other process charges first, so the finder saw the
					// marker last (the other does not find the loss itself)
					for _, b := range []string{"units", "search"} {
						if _, err := ask(other, b, 200); err != nil {
							t.Fatal(err)
						}
					}
					if _, err := ask(finder, tc.finder, 1); err != nil {
						t.Fatal(err)
					}
					flushKeys(t, c, prefix) // a flush of this test's keys
					clock = clock.Add(time.Second)
					var between error
					hook.before = func() { _, between = ask(other, tc.other, 200) }
					if _, err := ask(finder, tc.finder, 1); !errors.Is(err, quota.ErrExhausted) {
						t.Fatalf("the take that finds the loss: %v; want refused", err)
					}
					if hook.before != nil {
						t.Fatal("test setup: the finder marked no other budget")
					}
					var e *quota.ExhaustedError
					want := budgets[0].Window.Expiry(clock)
					if tc.other == "search" {
						want = clock.Add(time.Hour)
					}
					if !errors.As(between, &e) || !e.ExhaustedUntil.Equal(want) {
						t.Fatalf("%s (200 more of 300, 200 spent before the loss) charged before the finder marked it: %v; want refused, spent until %v", tc.other, between, want)
					}
					if n := finder.StoreLosses() + other.StoreLosses(); n != 1 || strings.Count(logs.String(), lossLog) != 1 {
						t.Fatalf("%d findings, %d logged; want the one", n, strings.Count(logs.String(), lossLog))
					}
					// every budget is marked, and says why
					us, err := other.Status(ctx, secret)
					if err != nil {
						t.Fatal(err)
					}
					for _, u := range us {
						if !u.StoreLoss || u.Remaining != 0 {
							t.Errorf("Status after the loss: %+v; want spent by a store loss", u)
						}
					}
				})
			})
		}
	}
}

// TestStoreLossNotHiddenByAFreshProcess: after a flush, a process that
// started after it (and so knows of no marker) decides more often than the
// process that saw the store before the flush had seen decisions. The
// marker it made afresh once started at seq 1 and overtook the older
// process's memory, hiding the loss from it: the older process admitted
// again the units spent before the flush. A marker made afresh now starts
// far below any earlier one's seq, so the older process finds the loss.
func TestStoreLossNotHiddenByAFreshProcess(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		clock := t0
		prefix := redistest.Prefix(t)
		budgets := []quota.Budget{{Name: "units", Limit: 300, Window: quota.Daily(time.UTC)}}
		var logs testkit.Buffer
		process := func() *quota.Limiter {
			l, err := quota.New(redisstore.New(c, redisstore.WithPrefix(prefix)), "api", budgets,
				quota.WithClock(func() time.Time { return clock }), quota.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		old := process()
		for range 3 {
			if _, err := old.Take(ctx, secret, quota.Units("units", 90)); err != nil {
				t.Fatal(err)
			}
		}
		flushKeys(t, c, prefix) // a flush of this test's keys
		// A process started after the flush: it cannot know of the loss,
		// and decides ten times on the emptied store.
		clock = clock.Add(time.Second)
		fresh := process()
		for range 10 {
			if _, err := fresh.Take(ctx, secret, quota.Units("units", 1)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := old.Take(ctx, secret, quota.Units("units", 90)); !errors.Is(err, quota.ErrExhausted) || old.StoreLosses() != 1 {
			t.Fatalf("the process that saw 270 units spent before the flush: Take = %v, %d losses found; want refused, the loss found",
				err, old.StoreLosses())
		}
		if _, err := fresh.Take(ctx, secret, quota.Units("units", 1)); !errors.Is(err, quota.ErrExhausted) {
			t.Fatalf("the fresh process after the loss was found: Take = %v, want refused (the budget marked spent)", err)
		}
	})
}

// TestStoreLossBudgetOnlyOthersCharge: a budget that only another process
// charges (one with a week's window) still counts as lost at its first
// decision after the finding, for as long as its own window can hold
// entries recorded before the loss. The marker the finder starts afresh
// says until when what the finder saw had to live (o: its own daily
// budget's reset); a fresh process charging the weekly budget the next day,
// after o, decided on the emptied log and admitted 200 more on top of the
// 200 the week had spent before the loss, on a limit of 300.
func TestStoreLossBudgetOnlyOthersCharge(t *testing.T) {
	for _, general := range []bool{false, true} {
		t.Run(fmt.Sprintf("general=%v", general), func(t *testing.T) {
			onBoth(t, func(t *testing.T, c redis.UniversalClient) {
				ctx := context.Background()
				clock := t0
				prefix := redistest.Prefix(t)
				process := func(b quota.Budget) *quota.Limiter {
					st := redisstore.New(c, redisstore.WithPrefix(prefix))
					if general {
						redisstore.GeneralOnly(st)
					}
					l, err := quota.New(st, "api", []quota.Budget{b}, quota.WithClock(func() time.Time { return clock }),
						quota.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
					if err != nil {
						t.Fatal(err)
					}
					return l
				}
				units := quota.Budget{Name: "units", Limit: 300, Window: quota.Daily(time.UTC)}
				week := quota.Budget{Name: "week", Limit: 300, Window: quota.Sliding(7 * 24 * time.Hour)}
				finder, weekly := process(units), process(week)
				if _, err := finder.Take(ctx, secret, quota.Units("units", 1)); err != nil {
					t.Fatal(err)
				}
				clock = clock.Add(time.Second)
				if _, err := weekly.Take(ctx, secret, quota.Units("week", 200)); err != nil {
					t.Fatal(err)
				}
				flushKeys(t, c, prefix) // a flush of this test's keys
				clock = clock.Add(time.Second)
				if _, err := finder.Take(ctx, secret, quota.Units("units", 1)); !errors.Is(err, quota.ErrExhausted) {
					t.Fatalf("the take that finds the loss: %v; want refused", err)
				}
				// the next day, past the finder's daily reset: a cron run of
				// the weekly job, a fresh process
				clock = units.Window.Expiry(clock).Add(time.Hour)
				_, err := process(week).Take(ctx, secret, quota.Units("week", 200))
				var e *quota.ExhaustedError
				if want := clock.Add(week.Window.Duration()); !errors.As(err, &e) || !e.ExhaustedUntil.Equal(want) {
					t.Fatalf("week, 200 more the day after the loss (200 spent before it, limit 300): %v; want refused, spent until %v", err, want)
				}
				// a budget whose window could hold nothing from before the
				// loss is not marked: an hour's, charged first a day later
				hour := quota.Budget{Name: "hour", Limit: 300, Window: quota.Sliding(time.Hour)}
				if _, err := process(hour).Take(ctx, secret, quota.Units("hour", 200)); err != nil {
					t.Fatalf("an hour's budget charged first a day after the loss: %v; want admitted", err)
				}
			})
		})
	}
}

// flushKeys deletes every key under prefix: a FLUSHDB of one test's keys,
// on a server other tests share.
func flushKeys(t *testing.T, c redis.UniversalClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v, %v", keys, err)
	}
	if err := c.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestChangeVersionOutlivesLoss: after a loss drops the owner's marker (a
// flush, a failover to a replica that had not seen it), the next adjust
// does not bring the owner's change version back to one an open lease read
// before the loss: that lease would take it as unchanged and go on
// admitting from its block after the adjust.
func TestChangeVersionOutlivesLoss(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		st := redisstore.New(c, redisstore.WithPrefix(prefix))
		owner := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), "version-owner")
		b := quota.Budget{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}
		adjust := func(nonce string, at time.Time) int64 {
			t.Helper()
			if err := st.Adjust(ctx, &backend.AdjustRequest{API: "api", Owner: owner, Budget: b, Used: 50, Nonce: nonce, Now: at}); err != nil {
				t.Fatal(err)
			}
			v, err := st.ChangeVersion(ctx, "api", owner)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		before := adjust("a1", t0)
		flushKeys(t, c, prefix)
		if after := adjust("a2", t0.Add(time.Second)); after == before {
			t.Fatalf("the first adjust after a loss set the change version to %d, the value an open lease read before the loss", after)
		}
	})
}

// TestExpiredMarkerStartedAfreshIsNoLoss: an owner's marker that expired
// as it should (everything it covered expired) and is made afresh by
// another write is no loss. Before, the store kept the sequence of its own
// last admission under the old marker and checked it against the new
// marker's lifetime: a budget charged again after two idle days was found
// lost and marked spent for its whole window, the memory store admitting
// (once a refused charge had caught the new marker's sequence up to what
// the store had seen).
func TestExpiredMarkerStartedAfreshIsNoLoss(t *testing.T) {
	ctx := context.Background()
	m := redistest.Mini(t)
	st := redisstore.New(redistest.MiniClient(t, m), redisstore.WithPrefix("afresh:"))
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	m.SetTime(t0)
	a := quota.Budget{Name: "a", Limit: 100, Window: quota.Sliding(time.Hour)}
	b := quota.Budget{Name: "b", Limit: 100, Window: quota.Daily(time.UTC)}
	take := func() *backend.TakeResult {
		t.Helper()
		res, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: "o", Nonce: "n", Debits: []backend.Debit{{Budget: a, Cost: 10}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := take(); !res.OK {
		t.Fatalf("first take: %+v", res)
	}
	// two days idle: every key of the owner, the marker too, expired
	later := t0.Add(48 * time.Hour)
	m.FastForward(later.Sub(t0))
	m.SetTime(later)
	if err := st.Exhaust(ctx, &backend.ExhaustRequest{API: "api", Owner: "o", Budget: b, Until: later.Add(30 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// a refused charge of b (a daily budget's first decision of the day,
	// which marks the day) catches the new marker's sequence up
	res, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: "o", Nonce: "m", Debits: []backend.Debit{{Budget: b, Cost: 1}}})
	if err != nil || res.OK || res.StoreLoss {
		t.Fatalf("b exhausted: %+v, %v; want refused, no loss", res, err)
	}
	m.FastForward(time.Minute)
	m.SetTime(later.Add(time.Minute))
	if res := take(); !res.OK || res.StoreLoss || res.Usage[0].Used != 10 {
		t.Fatalf("after two idle days: ok %v, loss %v, used %d; want admitted, no loss, 10 used", res.OK, res.StoreLoss, res.Usage[0].Used)
	}
}

// TestLeaseEndsWhenTheMarkerIsGone: a flush or failover that drops the
// owner's marker (and with it the change version) ends an open lease at its
// next check, so the charge goes to the store, which finds the loss. The
// version read 0 with or without the marker, so a lease of an owner never
// adjusted (version 0) went on admitting its unused units from a block the
// store no longer held.
func TestLeaseEndsWhenTheMarkerIsGone(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		clock := t0
		opts := quota.LeaseOptions{Block: 100, MaxFraction: 0.5, MaxTime: time.Second, CheckEvery: 100 * time.Millisecond}
		l, err := quota.New(redisstore.New(c, redisstore.WithPrefix(prefix)), "api",
			[]quota.Budget{{Name: "units", Limit: 1000, Window: quota.Daily(time.UTC)}},
			quota.WithClock(func() time.Time { return clock }), quota.WithLeases(opts))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Take(ctx, secret, quota.Units("units", 1)); err != nil { // a block of 100, 99 unused
			t.Fatal(err)
		}
		flushKeys(t, c, prefix)
		clock = clock.Add(opts.CheckEvery + time.Millisecond)
		_, err = l.Take(ctx, secret, quota.Units("units", 1))
		if !errors.Is(err, quota.ErrExhausted) || l.StoreLosses() != 1 {
			t.Fatalf("a take from an open lease after the store lost the owner's state: %v, %d losses found; want refused for the store loss", err, l.StoreLosses())
		}
	})
}
