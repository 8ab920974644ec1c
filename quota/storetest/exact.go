package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// midnightDST checks zones whose DST change skips midnight itself (clocks
// go from 23:59:59 to 01:00): the new day begins at the jump, and until then
// the old day refuses, with a RetryAfter > 0 pointing at the jump.
func (s suite) midnightDST(t *testing.T) {
	for _, tc := range []struct {
		zone string
		day  [3]int // the local date that begins at 01:00
	}{
		{"America/Santiago", [3]int{2026, 9, 6}},
		{"America/Havana", [3]int{2026, 3, 8}},
	} {
		t.Run(tc.zone, func(t *testing.T) {
			loc, err := time.LoadLocation(tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			y, m, d := tc.day[0], time.Month(tc.day[1]), tc.day[2]
			// The jump: the first instant of the new day is 01:00 local.
			jump := time.Date(y, m, d, 1, 0, 0, 0, loc)
			if jump.Add(-time.Microsecond).In(loc).Day() == d {
				t.Fatalf("test setup: %s does not skip midnight on %v", tc.zone, jump)
			}
			eve := jump.Add(-90 * time.Minute) // 22:30 local, the day before
			clock := NewClock(eve)
			l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "units", Limit: 10, Window: quota.Daily(loc)})
			r := mustTake(t, l, key, quota.Units("units", 10))
			if !r.Usage[0].Reset.Equal(jump) {
				t.Fatalf("Reset = %v, want the jump %v", r.Usage[0].Reset, jump)
			}
			for _, at := range []time.Time{jump.Add(-30 * time.Minute), jump.Add(-time.Microsecond)} {
				clock.Set(at)
				ee := mustRefuse(t, l, key, quota.Units("units", 1))
				if !ee.RetryAt.Equal(jump) || ee.RetryAfter != jump.Sub(at) || ee.RetryAfter <= 0 {
					t.Fatalf("at %v: RetryAt %v after %v; want %v after %v", at, ee.RetryAt, ee.RetryAfter, jump, jump.Sub(at))
				}
				us, err := l.Status(context.Background(), key)
				if err != nil {
					t.Fatal(err)
				}
				if us[0].Used != 10 || !us[0].Reset.Equal(jump) {
					t.Fatalf("at %v: status used %d reset %v; want 10 and %v", at, us[0].Used, us[0].Reset, jump)
				}
			}
			clock.Set(jump)
			r = mustTake(t, l, key, quota.Units("units", 10))
			next := time.Date(y, m, d+1, 0, 0, 0, 0, loc)
			if r.Usage[0].Used != 10 || !r.Usage[0].Reset.Equal(next) {
				t.Fatalf("new day: used %d reset %v; want 10 and %v", r.Usage[0].Used, r.Usage[0].Reset, next)
			}
		})
	}
}

// clockStepsBack checks a store whose clock steps back (NTP, a failover to
// a server with a slower clock): entries stay counted, refundable, listed
// oldest first, and Reset names the oldest counted entry's expiry.
func (s suite) clockStepsBack(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0.Add(time.Hour))
	w := time.Hour
	l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(w)})
	late := mustTake(t, l, key, quota.Units("units", 2))
	clock.Set(T0.Add(30 * time.Minute)) // 30 minutes back
	early := mustTake(t, l, key, quota.Units("units", 3))
	if u := early.Usage[0]; u.Used != 5 || !u.Reset.Equal(T0.Add(30*time.Minute+w)) {
		t.Fatalf("after the step back: used %d, reset %v; want 5 and %v", u.Used, u.Reset, T0.Add(30*time.Minute+w))
	}
	es, err := l.Entries(ctx, key, "units")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || !es[0].At.Equal(early.At) || !es[1].At.Equal(late.At) {
		t.Fatalf("entries %v; want the early one (%v) then the late one (%v)", es, early.At, late.At)
	}
	ee := mustRefuse(t, l, key, quota.Units("units", 8))
	if want := early.At.Add(w); !ee.RetryAt.Equal(want) {
		t.Fatalf("RetryAt %v, want %v (the early entry's expiry)", ee.RetryAt, want)
	}
	for _, r := range []*quota.Reservation{late, early} {
		if err := l.Refund(ctx, r); err != nil {
			t.Fatalf("Refund(%v): %v", r.At, err)
		}
	}
	if got := used(t, l, key, "units"); got != 0 {
		t.Fatalf("after refunds: used %d", got)
	}
}

// extremes checks the documented ranges on every store: a limit of
// quota.MaxLimit is exact, and an Exhaust until beyond what a store keeps
// marks the budget spent (until quota.MaxTimeMicro), never clears it.
func (s suite) extremes(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	l := s.limiter(t, st, clock,
		quota.Budget{Name: "big", Limit: quota.MaxLimit, Window: quota.Sliding(time.Hour)},
		quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)})
	r := mustTake(t, l, key, quota.Units("big", quota.MaxLimit-1))
	if r.Usage[0].Used != quota.MaxLimit-1 || r.Usage[0].Remaining != 1 {
		t.Fatalf("used %d remaining %d; want %d and 1", r.Usage[0].Used, r.Usage[0].Remaining, int64(quota.MaxLimit-1))
	}
	mustTake(t, l, key, quota.Units("big", 1))
	mustRefuse(t, l, key, quota.Units("big", 1))

	for _, until := range []time.Time{
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), // past int64 µs
	} {
		if err := l.Exhaust(ctx, key, "units", until); err != nil {
			t.Fatalf("Exhaust until %v: %v", until, err)
		}
		ee := mustRefuse(t, l, key, quota.Units("units", 1))
		if want := time.UnixMicro(backend.MaxTimeMicro); !ee.ExhaustedUntil.Equal(want) {
			t.Fatalf("Exhaust until %v: marked until %v, want %v", until, ee.ExhaustedUntil, want)
		}
		if err := l.Exhaust(ctx, key, "units", time.Time{}); err != nil {
			t.Fatal(err)
		}
		mustTake(t, l, key, quota.Units("units", 1))
	}
	// The store itself clamps too, for callers that skip the Limiter.
	fp := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), key.Secret)
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	if err := st.Exhaust(ctx, &backend.ExhaustRequest{API: "api", Owner: fp, Budget: b, Until: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), Now: clock.Now()}); err != nil {
		t.Fatal(err)
	}
	us, err := st.Usage(ctx, &backend.UsageRequest{API: "api", Owner: fp, Budgets: []quota.Budget{b}, Now: clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.UnixMicro(backend.MaxTimeMicro); !us[0].ExhaustedUntil.Equal(want) {
		t.Fatalf("store Exhaust far away: marked until %v, want %v", us[0].ExhaustedUntil, want)
	}
	var nilCtx context.Context // a nil context is an argument error, not a panic
	if _, err := l.Take(nilCtx, key, quota.Units("units", 1)); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("Limiter.Take(nil ctx) = %v, want ErrInvalid", err)
	}
	take := &backend.TakeRequest{API: "api", Owner: fp, Nonce: "n1", Now: clock.Now(), Debits: []backend.Debit{{Budget: b, Cost: 1}}}
	if _, err := st.Take(nilCtx, take); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("Store.Take(nil ctx) = %v, want ErrInvalid", err)
	}
}

// redefine checks that changing a budget's window never destroys entries a
// longer window would still count: daily, then a 1h sliding window (which
// counts only the last hour), then daily again counts the whole day.
func (s suite) redefine(t *testing.T) {
	ctx := context.Background()
	day := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	clock := NewClock(day.Add(2 * time.Hour))
	st := s.store(t)
	daily := quota.Budget{Name: "units", Limit: 10000, Window: quota.Daily(time.UTC)}
	hourly := quota.Budget{Name: "units", Limit: 10000, Window: quota.Sliding(time.Hour)}
	ld := s.limiter(t, st, clock, daily)
	mustTake(t, ld, key, quota.Units("units", 4000))
	clock.Add(3 * time.Hour)
	mustTake(t, ld, key, quota.Units("units", 343))

	clock.Add(2 * time.Hour)
	lh := s.limiter(t, st, clock, hourly)
	if r := mustTake(t, lh, key, quota.Units("units", 1)); r.Usage[0].Used != 1 {
		t.Fatalf("sliding 1h: used %d, want 1 (older entries leave this window)", r.Usage[0].Used)
	}
	es, err := lh.Entries(ctx, key, "units")
	if err != nil || len(es) != 1 {
		t.Fatalf("sliding 1h entries %v, %v; want the one of the last hour", es, err)
	}
	clock.Add(30 * time.Minute)
	if r := mustTake(t, lh, key, quota.Units("units", 2)); r.Usage[0].Used != 3 {
		t.Fatalf("sliding 1h, 30 minutes on: used %d, want 3", r.Usage[0].Used)
	}
	clock.Add(time.Minute)
	ld = s.limiter(t, st, clock, daily)
	if got := used(t, ld, key, "units"); got != 4346 {
		t.Fatalf("back to daily: used %d, want 4346 (4000+343+1+2: nothing of the day lost)", got)
	}
	r := mustTake(t, ld, key, quota.Units("units", 4))
	if r.Usage[0].Used != 4350 {
		t.Fatalf("back to daily, a take: used %d, want 4350", r.Usage[0].Used)
	}
	clock.Set(day.Add(24 * time.Hour))
	if got := used(t, ld, key, "units"); got != 0 {
		t.Fatalf("next day: used %d, want 0", got)
	}

	// A window counts only what the log kept: an entry that left every
	// window the budget had does not come back when a longer one is set,
	// whether or not the store had deleted it yet.
	other := quota.Credential{Secret: "AIzaSy-redefine-other", Label: "key-2"}
	short := quota.Budget{Name: "short", Limit: 100, Window: quota.Sliding(time.Hour)}
	long := quota.Budget{Name: "short", Limit: 100, Window: quota.Sliding(24 * time.Hour)}
	ls := s.limiter(t, st, clock, short)
	mustTake(t, ls, other, quota.Units("short", 5)) // at 00:00
	clock.Add(30 * time.Minute)
	mustTake(t, ls, other, quota.Units("short", 7)) // at 00:30
	clock.Add(45 * time.Minute)                     // 01:15: the first left the hour
	ll := s.limiter(t, st, clock, long)
	if got := used(t, ll, other, "short"); got != 7 {
		t.Fatalf("lengthened to 24h after the first entry left the 1h window: used %d, want 7 (it is gone)", got)
	}
	if r := mustTake(t, ll, other, quota.Units("short", 1)); r.Usage[0].Used != 8 {
		t.Fatalf("lengthened, a take: used %d, want 8", r.Usage[0].Used)
	}
	clock.Add(20 * time.Hour)
	if got := used(t, ll, other, "short"); got != 8 {
		t.Fatalf("20h later under 24h: used %d, want 8", got)
	}
}

// adjustAfterStepBack checks that Adjust replaces every entry the window
// counts, whatever its stamp: after the clock stepped back, entries
// stamped past the new now (an earlier Adjust's, a Take's) are replaced
// too, so Used is the number adjusted to (once counted on top of it).
func (s suite) adjustAfterStepBack(t *testing.T) {
	ctx := context.Background()
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("Daily", func(t *testing.T) {
		clock := NewClock(time.Date(2026, 7, 4, 23, 59, 59, 999999000, la))
		l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "e", Limit: 1000, Window: quota.Daily(la)})
		if err := l.Adjust(ctx, key, "e", 400); err != nil {
			t.Fatal(err)
		}
		clock.Set(time.Date(2026, 7, 4, 23, 51, 37, 996181000, la))
		if err := l.Adjust(ctx, key, "e", 89); err != nil {
			t.Fatal(err)
		}
		if got := used(t, l, key, "e"); got != 89 {
			t.Fatalf("used %d after Adjust(89) with the clock stepped back; want 89", got)
		}
	})
	t.Run("Sliding", func(t *testing.T) {
		clock := NewClock(time.Date(2026, 7, 4, 8, 23, 13, 0, time.UTC))
		l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "d", Limit: 10, Window: quota.Sliding(time.Hour)})
		mustTake(t, l, key, quota.Units("d", 3))
		clock.Set(time.Date(2026, 7, 4, 8, 19, 38, 0, time.UTC))
		if err := l.Adjust(ctx, key, "d", 3); err != nil {
			t.Fatal(err)
		}
		if got := used(t, l, key, "d"); got != 3 {
			t.Fatalf("used %d after Adjust(3) with the clock stepped back; want 3", got)
		}
		// Adjusted to 0, the whole limit is there again.
		if err := l.Adjust(ctx, key, "d", 0); err != nil {
			t.Fatal(err)
		}
		mustTake(t, l, key, quota.Units("d", 10))
	})
	// A lease's block is kept by what it is (held), settled or not; a
	// plain entry stamped as late is replaced.
	t.Run("HeldStays", func(t *testing.T) {
		st := s.store(t)
		b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Minute)}
		owner := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), "adjust-held")
		hold := 2 * time.Second
		res, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: owner, Nonce: "lease1", Now: T0,
			Debits: []backend.Debit{{Budget: b, Cost: 40}}, Hold: hold})
		if err != nil || !res.OK {
			t.Fatalf("held Take = %+v, %v", res, err)
		}
		if got, err := st.Settle(ctx, &backend.SettleRequest{API: "api", Owner: owner, At: T0.Add(hold), Nonce: "lease1",
			Debits: []backend.Debit{{Budget: b, Cost: 30}}, Now: T0.Add(time.Second), Decided: T0}); err != nil || got["units"] != 10 {
			t.Fatalf("Settle = %v, %v; want 10 freed", got, err)
		}
		res, err = st.Take(ctx, &backend.TakeRequest{API: "api", Owner: owner, Nonce: "plain1", Now: T0.Add(1500 * time.Millisecond),
			Debits: []backend.Debit{{Budget: b, Cost: 5}}})
		if err != nil || !res.OK {
			t.Fatalf("plain Take = %+v, %v", res, err)
		}
		back := T0.Add(500 * time.Millisecond) // the clock steps back
		if err := st.Adjust(ctx, &backend.AdjustRequest{API: "api", Owner: owner, Budget: b, Used: 7, Nonce: "adj", Now: back}); err != nil {
			t.Fatal(err)
		}
		es, err := st.Entries(ctx, &backend.EntriesRequest{API: "api", Owner: owner, Budget: b, Now: back})
		want := []quota.Entry{{At: back, Cost: 7, Nonce: "adj"}, {At: T0.Add(hold), Cost: 30, Nonce: "lease1"}}
		if err != nil || len(es) != 2 || !es[0].At.Equal(want[0].At) || es[0].Cost != 7 || es[0].Nonce != "adj" ||
			!es[1].At.Equal(want[1].At) || es[1].Cost != 30 || es[1].Nonce != "lease1" {
			t.Fatalf("entries after the adjust = %+v, %v; want %+v", es, err, want)
		}
		us, err := st.Usage(ctx, &backend.UsageRequest{API: "api", Owner: owner, Budgets: []quota.Budget{b}, Now: back})
		if err != nil || us[0].Used != 37 {
			t.Fatalf("usage after the adjust = %+v, %v; want 37 (7 and the held 30)", us, err)
		}
	})
}
