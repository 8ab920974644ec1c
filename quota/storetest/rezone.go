package storetest

import (
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// redefineKeepsDay: an entry recorded at t counts in every window that
// holds t under the definition in force, for as long as a daily log keeps
// it (quota.DailyKeep after t): a daily budget moved to another zone, or
// to a sliding window, still counts what its old days spent, even after a
// decision under the old definition began a new day there. Losing those
// entries let the memory and SQLite stores admit 15 units in one Los
// Angeles day on a limit of 10.
func (s suite) redefineKeepsDay(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	utc := quota.Budget{Name: "units", Limit: 10, Window: quota.Daily(time.UTC)}
	pst := quota.Budget{Name: "units", Limit: 10, Window: quota.Daily(la)}
	sliding := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(24 * time.Hour)}
	longer := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(48 * time.Hour)}

	// fill takes 5 units at 20:00 UTC (12:00 in Los Angeles), and, when
	// between, 1 more at 01:00 UTC the next day: a new UTC day, still the
	// same day in Los Angeles.
	fill := func(t *testing.T, between bool) (quota.Store, *Clock) {
		st := s.store(t)
		clock := NewClock(day.Add(20 * time.Hour))
		l := s.limiter(t, st, clock, utc)
		mustTake(t, l, key, quota.Units("units", 5))
		if between {
			clock.Set(day.Add(25 * time.Hour))
			if r := mustTake(t, l, key, quota.Units("units", 1)); r.Usage[0].Used != 1 {
				t.Fatalf("a new UTC day: used %d, want 1", r.Usage[0].Used)
			}
		}
		clock.Set(day.Add(29 * time.Hour)) // 05:00 UTC, 21:00 in Los Angeles
		return st, clock
	}
	for _, between := range []bool{false, true} {
		name := "redefinedAtOnce"
		spent := int64(5)
		if between {
			name, spent = "afterANewUTCDay", 6
		}
		t.Run("UTCToLosAngeles/"+name, func(t *testing.T) {
			st, clock := fill(t, between)
			l := s.limiter(t, st, clock, pst)
			if got := used(t, l, key, "units"); got != spent {
				t.Fatalf("Los Angeles, before a take: used %d, want %d (the day's entries count)", got, spent)
			}
			mustTake(t, l, key, quota.Units("units", 10-spent))
			e := mustRefuse(t, l, key, quota.Units("units", 1))
			if e.Used != 10 {
				t.Fatalf("refused with used %d, want 10", e.Used)
			}
			if want := time.Date(2026, 11, 23, 0, 0, 0, 0, la); !clock.Now().Add(e.RetryAfter).Equal(want) {
				t.Fatalf("RetryAfter %v, want until %v", e.RetryAfter, want)
			}
			clock.Set(time.Date(2026, 11, 23, 0, 0, 0, 0, la))
			if r := mustTake(t, l, key, quota.Units("units", 10)); r.Usage[0].Used != 10 {
				t.Fatalf("the next Los Angeles day: used %d, want 10", r.Usage[0].Used)
			}
		})
		t.Run("DailyToSliding/"+name, func(t *testing.T) {
			st, clock := fill(t, between)
			l := s.limiter(t, st, clock, sliding)
			if got := used(t, l, key, "units"); got != spent {
				t.Fatalf("sliding 24h, before a take: used %d, want %d", got, spent)
			}
			mustTake(t, l, key, quota.Units("units", 10-spent))
			mustRefuse(t, l, key, quota.Units("units", 1))
		})
	}

	// Los Angeles to UTC: 23:00 in Los Angeles is 07:00 UTC, a UTC day
	// that a decision in Los Angeles' next day (09:00 UTC) had left.
	t.Run("LosAngelesToUTC", func(t *testing.T) {
		st := s.store(t)
		clock := NewClock(day.Add(7 * time.Hour))
		l := s.limiter(t, st, clock, pst)
		mustTake(t, l, key, quota.Units("units", 7))
		clock.Set(day.Add(9 * time.Hour))
		if r := mustTake(t, l, key, quota.Units("units", 1)); r.Usage[0].Used != 1 {
			t.Fatalf("a new Los Angeles day: used %d, want 1", r.Usage[0].Used)
		}
		clock.Set(day.Add(10 * time.Hour))
		l = s.limiter(t, st, clock, utc)
		if got := used(t, l, key, "units"); got != 8 {
			t.Fatalf("UTC: used %d, want 8", got)
		}
		mustTake(t, l, key, quota.Units("units", 2))
		mustRefuse(t, l, key, quota.Units("units", 1))
	})

	// A sliding log keeps its own window only: made daily, the budget
	// counts what the last hour kept, not the earlier entries of the day
	// (no finite retention covers every longer window a sliding budget
	// could be given; Redefine has sliding 1h made 24h).
	t.Run("SlidingToDaily", func(t *testing.T) {
		st := s.store(t)
		clock := NewClock(day.Add(10 * time.Hour))
		hourly := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
		l := s.limiter(t, st, clock, hourly)
		mustTake(t, l, key, quota.Units("units", 4))
		clock.Add(30 * time.Minute)
		mustTake(t, l, key, quota.Units("units", 3))
		clock.Add(45 * time.Minute) // 11:15: the 4 units left the hour
		l = s.limiter(t, st, clock, utc)
		if got := used(t, l, key, "units"); got != 3 {
			t.Fatalf("daily after sliding 1h: used %d, want 3", got)
		}
		mustTake(t, l, key, quota.Units("units", 7))
		mustRefuse(t, l, key, quota.Units("units", 1))
	})

	// A daily log keeps an entry for quota.DailyKeep after it was
	// recorded, then drops it: a longer window set later no longer counts
	// it.
	t.Run("KeptForDailyKeep", func(t *testing.T) {
		at := day.Add(20 * time.Hour) // the 5 units
		for _, tc := range []struct {
			after time.Duration
			want  int64
		}{{backend.DailyKeep - time.Microsecond, 6}, {backend.DailyKeep, 1}} {
			st, clock := fill(t, true)
			clock.Set(at.Add(tc.after))
			l := s.limiter(t, st, clock, longer)
			if got := used(t, l, key, "units"); got != tc.want {
				t.Fatalf("sliding 48h, %v after the 5 units: used %d, want %d", tc.after, got, tc.want)
			}
			mustTake(t, l, key, quota.Units("units", 10-tc.want))
			mustRefuse(t, l, key, quota.Units("units", 1))
		}
	})
}
