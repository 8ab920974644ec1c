package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestRefusalAfterExpiryFixesSum: a sliding decision drops expired entries
// before it decides, and a refusal must leave the running sum equal to what
// the log then holds. Without that, the next decision reads a sum that
// still counts the dropped entries and refuses a charge that fits.
func TestRefusalAfterExpiryFixesSum(t *testing.T) {
	ctx := context.Background()
	c := testkit.NewClock(t0)
	st := redisstore.New(redistest.Client(t), redisstore.WithPrefix(redistest.Prefix(t)))
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Minute)}},
		quota.WithClock(c.Now))
	if err != nil {
		t.Fatal(err)
	}
	take(t, l, 5)
	c.Set(t0.Add(30 * time.Second))
	take(t, l, 5)
	// the first entry has expired: 5 counted, and 6 more do not fit
	c.Set(t0.Add(61 * time.Second))
	if _, err := l.Take(ctx, secret, quota.Units("units", 6)); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("6 units with 5 counted of 10: %v, want refused", err)
	}
	c.Set(t0.Add(62 * time.Second))
	if r := take(t, l, 5); r.Usage[0].Used != 10 {
		t.Fatalf("5 units with 5 counted: used %d after, want 10", r.Usage[0].Used)
	}
}

// TestDailyLaterEntries: a daily budget decides from its running sum alone
// only while its log holds entries of the current day. After the clock
// steps back over a reset (a failover to a server whose clock is behind),
// the log holds an entry of the next day; a refusal's retry time is then
// when the entries that must go have expired, not the current day's reset.
func TestDailyLaterEntries(t *testing.T) {
	ctx := context.Background()
	day2 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	day3, day4 := day2.AddDate(0, 0, 1), day2.AddDate(0, 0, 2)
	c := testkit.NewClock(day3.Add(time.Hour))
	st := redisstore.New(redistest.Client(t), redisstore.WithPrefix(redistest.Prefix(t)))
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Daily(time.UTC)}},
		quota.WithClock(c.Now))
	if err != nil {
		t.Fatal(err)
	}
	take(t, l, 4) // on day 3
	c.Set(day2.Add(22 * time.Hour))
	take(t, l, 6) // back on day 2: the day-3 entry counts too (10 used)
	_, err = l.Take(ctx, secret, quota.Units("units", 7))
	var ex *quota.ExhaustedError
	if !errors.As(err, &ex) {
		t.Fatalf("7 more units of 10 with 10 used: %v, want refused", err)
	}
	// 7 units fit once both entries are gone: at the end of day 3
	if want := day4; !ex.RetryAt.Equal(want) {
		t.Fatalf("RetryAt %v, want %v (the day-3 entry's expiry)", ex.RetryAt, want)
	}
	// a charge the day-2 entry covers fits at day 2's reset
	_, err = l.Take(ctx, secret, quota.Units("units", 6))
	if !errors.As(err, &ex) || !ex.RetryAt.Equal(day3) {
		t.Fatalf("6 units: %v, want refused until %v", err, day3)
	}
	// on day 3 proper, day 2's entry is gone and day 3's counts
	c.Set(day3.Add(2 * time.Hour))
	if r := take(t, l, 6); r.Usage[0].Used != 10 {
		t.Fatalf("on day 3: used %d after 6 more, want 10", r.Usage[0].Used)
	}
}

// TestDecisionCommands pins what a decision costs Redis in commands (issue
// 13): a daily admission is TIME, HMGET (the marker), MGET (sum, exhausted
// mark, kept window), EXISTS (the log: one lost alone is a store loss),
// ZADD, INCRBY, HINCRBY (the breakdown) and HSET (the marker): 8; a refusal of a spent daily budget is the first 3; a sliding
// admission in steady state adds ZRANGE and, when an entry expired,
// ZREMRANGEBYRANK. A change that puts a command back on these paths fails
// here. It needs a redis-server (INFO commandstats); the miniredis fallback
// checks the decisions only.
func TestDecisionCommands(t *testing.T) {
	ctx := context.Background()
	real := redistest.HaveServer(t, "counting the commands of a decision (INFO commandstats)")
	srv := redistest.Server(t)
	c := srv.Client(t)
	for _, tc := range []struct {
		name     string
		budget   quota.Budget
		refuse   bool
		min, max float64 // commands per decision
	}{
		// (the first decision of an hour adds 2 commands to keep the hour's
		// breakdown hash: a run across an hour's start stays in range)
		{"daily-admit", quota.Budget{Name: "units", Limit: 1 << 40, Window: quota.Daily(time.UTC)}, false, 8, 8.02},
		{"daily-refuse", quota.Budget{Name: "units", Limit: 50, Window: quota.Daily(time.UTC)}, true, 3, 3},
		{"sliding-admit", quota.Budget{Name: "units", Limit: 1 << 40, Window: quota.Sliding(time.Hour)}, false, 8, 8.02},
		// (decide, take's prefix, decides each of these four alone: take.lua's general
		// path makes one command more on each; a sliding refusal whose
		// oldest entry covers the deficit reads TIME, the marker, the sum's
		// MGET and the two oldest entries)
		{"sliding-refuse", quota.Budget{Name: "units", Limit: 50, Window: quota.Sliding(time.Hour)}, true, 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := redisstore.New(c, redisstore.WithPrefix("cmds-"+tc.name+":"))
			l, err := quota.New(st, "api", []quota.Budget{tc.budget})
			if err != nil {
				t.Fatal(err)
			}
			ch := quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 1}}
			for range 50 { // the first decisions of a day renew lifetimes; spend the refusing budget
				if _, err := l.Take(ctx, secret, ch); err != nil {
					t.Fatal(err)
				}
			}
			var calls0, inner0 int64
			if real {
				calls0, _, inner0 = commandStats(t, c)
			}
			const n = 200
			for range n {
				_, err := l.Take(ctx, secret, ch)
				if tc.refuse != errors.Is(err, quota.ErrExhausted) {
					t.Fatalf("refuse=%v, got %v", tc.refuse, err)
				}
			}
			if !real {
				return
			}
			calls, _, inner := commandStats(t, c)
			if calls-calls0 != n {
				t.Fatalf("%d scripts ran for %d decisions", calls-calls0, n)
			}
			per := float64(inner-inner0) / n
			if per < tc.min || per > tc.max {
				t.Fatalf("%.2f Redis commands per decision, want %v..%v", per, tc.min, tc.max)
			}
		})
	}
}
