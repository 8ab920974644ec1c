package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// monthlyReset checks a monthly window over a month's end: it counts every
// entry of the month exactly, whatever its day, refuses until the 1st with a
// RetryAt at the 1st's local midnight (the DST jump where one skips it), and
// admits a whole limit again from the 1st on. Months of 29 days (a leap
// February), with a DST change (31 days less an hour), and one that begins
// at 01:00 (America/Asuncion, October 2023).
func (s suite) monthlyReset(t *testing.T) {
	for _, tc := range []struct {
		name  string
		zone  string
		first time.Time // the month's first instant, as the zone reads it
		next  time.Time // the next month's
		span  time.Duration
	}{
		{"leap-february", "UTC", time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC), 29 * 24 * time.Hour},
		{"paris-march-dst", "Europe/Paris", time.Date(2026, 2, 28, 23, 0, 0, 0, time.UTC), time.Date(2026, 3, 31, 22, 0, 0, 0, time.UTC), 31*24*time.Hour - time.Hour},
		{"asuncion-midnight-skipped", "America/Asuncion", time.Date(2023, 9, 1, 4, 0, 0, 0, time.UTC), time.Date(2023, 10, 1, 4, 0, 0, 0, time.UTC), 30 * 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loc, err := time.LoadLocation(tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			if tc.next.Sub(tc.first) != tc.span || tc.next.In(loc).Day() != 1 || tc.next.Add(-time.Microsecond).In(loc).Day() == 1 {
				t.Fatalf("test setup: %v to %v is not a month of %v in %s", tc.first, tc.next, tc.span, tc.zone)
			}
			ctx := context.Background()
			clock := NewClock(tc.first)
			l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "month", Limit: 100, Window: quota.Monthly(loc)})
			// spend through the month: its first µs, days apart, its last hour
			var spent int64
			for i, at := range []time.Time{tc.first, tc.first.Add(3*24*time.Hour + 7*time.Minute), tc.first.Add(17 * 24 * time.Hour), tc.next.Add(-time.Hour)} {
				clock.Set(at)
				cost := int64(10 * (i + 1))
				r := mustTake(t, l, key, quota.Units("month", cost))
				spent += cost
				if u := r.Usage[0]; u.Used != spent || !u.Reset.Equal(tc.next) {
					t.Fatalf("at %v: used %d, reset %v; want %d and %v", at, u.Used, u.Reset, spent, tc.next)
				}
			}
			// 100 spent: refused until the 1st, whatever the deficit
			for _, at := range []time.Time{tc.next.Add(-time.Hour), tc.next.Add(-time.Microsecond)} {
				clock.Set(at)
				for _, cost := range []int64{1, 100} {
					ee := mustRefuse(t, l, key, quota.Units("month", cost))
					if !ee.RetryAt.Equal(tc.next) || ee.RetryAfter != tc.next.Sub(at) || ee.Used != 100 {
						t.Fatalf("at %v, cost %d: RetryAt %v after %v, used %d; want %v after %v, 100", at, cost, ee.RetryAt, ee.RetryAfter, ee.Used, tc.next, tc.next.Sub(at))
					}
				}
			}
			// the 1st: a new month, nothing spent
			clock.Set(tc.next)
			us, err := l.Status(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			after := time.Date(tc.next.In(loc).Year(), tc.next.In(loc).Month()+1, 1, 0, 0, 0, 0, loc)
			if u := us[0]; u.Used != 0 || u.Remaining != 100 || !u.Reset.Equal(after) {
				t.Fatalf("the 1st: used %d, remaining %d, reset %v; want 0, 100, %v", u.Used, u.Remaining, u.Reset, after)
			}
			if es, err := l.Entries(ctx, key, "month"); err != nil || len(es) != 0 {
				t.Fatalf("the 1st: entries %v, %v; want none", es, err)
			}
			r := mustTake(t, l, key, quota.Units("month", 100))
			if u := r.Usage[0]; u.Used != 100 || !u.Reset.Equal(after) {
				t.Fatalf("the 1st: used %d, reset %v; want 100 and %v", u.Used, u.Reset, after)
			}
		})
	}
}

// monthlyWithOthers checks a monthly budget charged together with a daily
// and a sliding one: the day resets every midnight while the month keeps
// counting; once the month is spent, the monthly budget alone refuses,
// with a RetryAt at the 1st, even while the others could pay, and admits
// nothing until then (all or nothing); a refund gives back to all three,
// and a refund of last month's reservation in the new month finds nothing
// to give back.
func (s suite) monthlyWithOthers(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := time.Date(2026, 11, 1, 0, 0, 0, 0, la) // 25 hours long: DST ends
	next := time.Date(2026, 12, 1, 0, 0, 0, 0, la)
	clock := NewClock(first.Add(9 * time.Hour))
	l := s.limiter(t, s.store(t), clock,
		quota.Budget{Name: "hour", Limit: 50, Window: quota.Sliding(time.Hour)},
		quota.Budget{Name: "day", Limit: 30, Window: quota.Daily(la)},
		quota.Budget{Name: "month", Limit: 200, Window: quota.Monthly(la)})
	charge := func(n int64) quota.Charge {
		return quota.Charge{Units: map[string]int64{"hour": n, "day": n, "month": n}}
	}
	// 25 a day for 8 days: the day resets, the month counts on
	for d := range 8 {
		clock.Set(time.Date(2026, 11, 1+3*d, 10, 0, 0, 0, la))
		r := mustTake(t, l, key, charge(25))
		for _, u := range r.Usage {
			want := map[string]int64{"hour": 25, "day": 25, "month": 25 * int64(d+1)}[u.Budget]
			if u.Used != want {
				t.Fatalf("day %d: %s used %d, want %d", d, u.Budget, u.Used, want)
			}
		}
	}
	// November 23rd: 200 spent this month; a fresh day and hour could pay
	// for 1, the month cannot: refused by the month alone, until the 1st
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, la)
	clock.Set(at)
	ee := mustRefuse(t, l, key, charge(1))
	if ee.Budget != "month" || !ee.RetryAt.Equal(next) || ee.RetryAfter != next.Sub(at) || ee.Used != 200 {
		t.Fatalf("refused by %q, used %d, RetryAt %v after %v; want month, 200, %v after %v", ee.Budget, ee.Used, ee.RetryAt, ee.RetryAfter, next, next.Sub(at))
	}
	if got := used(t, l, key, "day"); got != 0 {
		t.Fatalf("the refusal charged the day: used %d", got)
	}
	// a refund of this month's last reservation frees its units in all three
	clock.Set(time.Date(2026, 11, 29, 23, 0, 0, 0, la))
	if err := l.Adjust(ctx, key, "month", 170); err != nil {
		t.Fatal(err)
	}
	r := mustTake(t, l, key, charge(30))
	if u := usageOf(t, r, "month"); u.Used != 200 {
		t.Fatalf("after adjusting to 170 and taking 30: month used %d, want 200", u.Used)
	}
	clock.Set(time.Date(2026, 11, 30, 23, 59, 0, 0, la))
	if err := l.Refund(ctx, r); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"hour": 0, "day": 0, "month": 170} {
		if got := used(t, l, key, name); got != want {
			t.Fatalf("after the refund: %s used %d, want %d", name, got, want)
		}
	}
	last := mustTake(t, l, key, charge(30))
	// the 1st: the month starts afresh; last month's reservation, refunded
	// now, gives nothing back to it
	clock.Set(next.Add(10 * time.Minute))
	r = mustTake(t, l, key, charge(20))
	if u := usageOf(t, r, "month"); u.Used != 20 || !u.Reset.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, la)) {
		t.Fatalf("December: month used %d reset %v; want 20 and 2027-01-01 in Los Angeles", u.Used, u.Reset)
	}
	if err := l.Refund(ctx, last); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"hour": 20, "day": 20, "month": 20} {
		if got := used(t, l, key, name); got != want {
			t.Fatalf("after refunding November's reservation in December: %s used %d, want %d", name, got, want)
		}
	}
}

// usageOf returns the usage of budget in r.
func usageOf(t *testing.T, r *quota.Reservation, budget string) quota.Usage {
	t.Helper()
	for _, u := range r.Usage {
		if u.Budget == budget {
			return u
		}
	}
	t.Fatalf("reservation has no usage of %q: %+v", budget, r.Usage)
	return quota.Usage{}
}

// monthlyExhaust checks an exhaustion mark on a monthly budget: until the
// next reset (as a 403 quotaExceeded would say), the budget refuses with
// RetryAt at the 1st; a mark past the 1st outlives the reset.
func (s suite) monthlyExhaust(t *testing.T) {
	ctx := context.Background()
	next := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := NewClock(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	w := quota.Monthly(time.UTC)
	l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "month", Limit: 1000, Window: w})
	mustTake(t, l, key, quota.Units("month", 5))
	if err := l.Exhaust(ctx, key, "month", w.NextReset(clock.Now())); err != nil {
		t.Fatal(err)
	}
	ee := mustRefuse(t, l, key, quota.Units("month", 1))
	if !ee.RetryAt.Equal(next) || ee.Used != 5 {
		t.Fatalf("marked spent: RetryAt %v, used %d; want %v, 5", ee.RetryAt, ee.Used, next)
	}
	clock.Set(next)
	if r := mustTake(t, l, key, quota.Units("month", 1000)); r.Usage[0].Used != 1000 {
		t.Fatalf("the 1st: used %d, want 1000", r.Usage[0].Used)
	}
	// a mark past the next 1st holds past it
	clock.Set(time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC))
	until := time.Date(2027, 1, 3, 0, 0, 0, 0, time.UTC)
	if err := l.Exhaust(ctx, key, "month", until); err != nil {
		t.Fatal(err)
	}
	clock.Set(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	if ee := mustRefuse(t, l, key, quota.Units("month", 1)); !ee.RetryAt.Equal(until) || ee.Used != 0 {
		t.Fatalf("January 1st, marked until the 3rd: RetryAt %v, used %d; want %v, 0", ee.RetryAt, ee.Used, until)
	}
}

// redefineKeepsMonth checks a monthly budget moved to another zone after
// its old zone's month ended: what the old month set aside, still in the
// new zone's month, counts again (Tokyo's November ends 15 hours before
// Los Angeles's); and a monthly budget redefined as a sliding window of a
// week counts the last week, across the old month's end.
func (s suite) redefineKeepsMonth(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	jp := quota.Budget{Name: "units", Limit: 100, Window: quota.Monthly(tokyo)}
	us := quota.Budget{Name: "units", Limit: 100, Window: quota.Monthly(la)}
	week := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(7 * 24 * time.Hour)}
	// fill spends 30 on November 20th and 40 at 23:00 on Tokyo's November
	// 30th (14:00 UTC), then, on Tokyo's December 1st (20:00 UTC, still
	// November 30th in Los Angeles), 5 more: Tokyo's new month sets the 70
	// aside.
	fill := func(t *testing.T) (quota.Store, *Clock) {
		st := s.store(t)
		clock := NewClock(time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC))
		l := s.limiter(t, st, clock, jp)
		mustTake(t, l, key, quota.Units("units", 30))
		clock.Set(time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC))
		mustTake(t, l, key, quota.Units("units", 40))
		clock.Set(time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC))
		if r := mustTake(t, l, key, quota.Units("units", 5)); r.Usage[0].Used != 5 {
			t.Fatalf("Tokyo's December: used %d, want 5", r.Usage[0].Used)
		}
		return st, clock
	}
	t.Run("TokyoToLosAngeles", func(t *testing.T) {
		st, clock := fill(t)
		l := s.limiter(t, st, clock, us)
		if got := used(t, l, key, "units"); got != 75 {
			t.Fatalf("Los Angeles's November, before a take: used %d, want 75 (the month's entries count)", got)
		}
		mustTake(t, l, key, quota.Units("units", 25))
		ee := mustRefuse(t, l, key, quota.Units("units", 1))
		if want := time.Date(2026, 12, 1, 0, 0, 0, 0, la); ee.Used != 100 || !ee.RetryAt.Equal(want) {
			t.Fatalf("refused with used %d, RetryAt %v; want 100, %v", ee.Used, ee.RetryAt, want)
		}
		clock.Set(time.Date(2026, 12, 1, 0, 0, 0, 0, la))
		if r := mustTake(t, l, key, quota.Units("units", 100)); r.Usage[0].Used != 100 {
			t.Fatalf("Los Angeles's December: used %d, want 100", r.Usage[0].Used)
		}
	})
	t.Run("MonthToWeek", func(t *testing.T) {
		st, clock := fill(t)
		l := s.limiter(t, st, clock, week)
		// the last 7 days hold the 40 and the 5, not November 20th's 30
		if got := used(t, l, key, "units"); got != 45 {
			t.Fatalf("a week's window: used %d, want 45", got)
		}
		mustTake(t, l, key, quota.Units("units", 55))
		ee := mustRefuse(t, l, key, quota.Units("units", 1))
		if want := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC); !ee.RetryAt.Equal(want) {
			t.Fatalf("RetryAt %v, want %v (the 40's week ends)", ee.RetryAt, want)
		}
	})
}
