package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestShortenedWindowKeepsKeys: after a daily budget is redefined with a
// one-hour sliding window, its keys live as long as the day could count
// (not one hour), so going back to daily hours later still counts the
// day's units; the server's own clock moves (miniredis FastForward).
func TestShortenedWindowKeepsKeys(t *testing.T) {
	ctx := context.Background()
	m := redistest.Mini(t)
	st := redisstore.New(redistest.MiniClient(t, m), redisstore.WithPrefix("ret:"))
	day := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	m.SetTime(day.Add(2 * time.Hour))
	daily := []quota.Budget{{Name: "units", Limit: 10000, Window: quota.Daily(time.UTC)}}
	hourly := []quota.Budget{{Name: "units", Limit: 10000, Window: quota.Sliding(time.Hour)}}
	ld, err := quota.New(st, "api", daily)
	if err != nil {
		t.Fatal(err)
	}
	lh, err := quota.New(st, "api", hourly)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ld.Take(ctx, secret, quota.Units("units", 4343)); err != nil {
		t.Fatal(err)
	}
	m.FastForward(time.Hour)
	m.SetTime(day.Add(3 * time.Hour))
	r, err := lh.Take(ctx, secret, quota.Units("units", 7))
	if err != nil || r.Usage[0].Used != 7 {
		t.Fatalf("sliding 1h: %v, %v; want used 7", r, err)
	}
	m.FastForward(3 * time.Hour) // the 1h keys' lifetime is long past
	m.SetTime(day.Add(6 * time.Hour))
	us, err := ld.Status(ctx, secret)
	if err != nil || us[0].Used != 4350 {
		t.Fatalf("back to daily 3h later: %v, %v; want used 4350", us, err)
	}
}

// TestTimeStepsBackReset: Redis TIME steps back (a failover to a server
// with a slower clock, an NTP step): the new entry is the oldest, and the
// reservation's Reset is when it leaves the window.
func TestTimeStepsBackReset(t *testing.T) {
	ctx := context.Background()
	m := redistest.Mini(t)
	st := redisstore.New(redistest.MiniClient(t, m), redisstore.WithPrefix("back:"))
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	m.SetTime(t0.Add(10 * time.Minute))
	if _, err := l.Take(ctx, secret, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	m.SetTime(t0)
	r, err := l.Take(ctx, secret, quota.Units("units", 1))
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(time.Hour); !r.At.Equal(t0) || !r.Usage[0].Reset.Equal(want) {
		t.Fatalf("at %v, Reset %v; want at %v, Reset %v", r.At, r.Usage[0].Reset, t0, want)
	}
}

// TestRezonedDayKeepsKeys: a daily UTC budget redefined at 05:00 UTC in
// America/Los_Angeles still counts the 5 units of 20:00 UTC (12:00 in Los
// Angeles, the same local day) once the server's clock has moved past UTC
// midnight: the daily log's keys outlive their reset by DailyKeep, and a
// decision of the new UTC day sets the old day's entries aside rather
// than deleting them. The keys used to expire at UTC midnight, and the
// budget admitted 10 more units in that Los Angeles day.
func TestRezonedDayKeepsKeys(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	for _, between := range []bool{false, true} {
		ctx := context.Background()
		m := redistest.Mini(t)
		st := redisstore.New(redistest.MiniClient(t, m), redisstore.WithPrefix("rezone:"))
		lu, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Daily(time.UTC)}})
		if err != nil {
			t.Fatal(err)
		}
		ll, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Daily(la)}})
		if err != nil {
			t.Fatal(err)
		}
		m.SetTime(day.Add(20 * time.Hour))
		if _, err := lu.Take(ctx, secret, quota.Units("units", 5)); err != nil {
			t.Fatal(err)
		}
		spent := int64(5)
		if between {
			m.FastForward(5 * time.Hour)
			m.SetTime(day.Add(25 * time.Hour)) // 01:00 UTC: a new UTC day
			if r, err := lu.Take(ctx, secret, quota.Units("units", 1)); err != nil || r.Usage[0].Used != 1 {
				t.Fatalf("a new UTC day: %v, %v; want used 1", r, err)
			}
			spent++
			m.FastForward(4 * time.Hour)
		} else {
			m.FastForward(9 * time.Hour)
		}
		m.SetTime(day.Add(29 * time.Hour)) // 05:00 UTC, 21:00 in Los Angeles
		admitted := int64(0)
		for {
			if _, err := ll.Take(ctx, secret, quota.Units("units", 1)); err != nil {
				if !errors.Is(err, quota.ErrExhausted) {
					t.Fatal(err)
				}
				break
			}
			admitted++
		}
		if admitted != 10-spent {
			t.Fatalf("decision between %v: the Los Angeles day admitted %d more units after %d, limit 10", between, admitted, spent)
		}
	}
}

// TestAdjustedDailyKeysLiveDailyKeep: an adjusted daily log's keys live
// DailyKeep past the reset, as an admission's do, so that the budget
// redefined in another zone still counts the adjusted usage. Before, they
// expired at the reset: a Tokyo budget adjusted to 81 of 100 at 12:58 UTC
// and redefined in Los Angeles (whose day still held 12:58) the next
// morning admitted 20 more; the server's clock moves (FastForward).
func TestAdjustedDailyKeysLiveDailyKeep(t *testing.T) {
	ctx := context.Background()
	m := redistest.Mini(t)
	st := redisstore.New(redistest.MiniClient(t, m), redisstore.WithPrefix("adjkeep:"))
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	adj := time.Date(2026, 11, 23, 12, 58, 0, 0, time.UTC) // Tokyo resets at 15:00 UTC
	m.SetTime(adj)
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Daily(tokyo)}
	if err := st.Adjust(ctx, &backend.AdjustRequest{API: "api", Owner: "o", Budget: b, Used: 81, Nonce: "adj"}); err != nil {
		t.Fatal(err)
	}
	later := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC) // Los Angeles: still Nov 23
	m.FastForward(later.Sub(adj))
	m.SetTime(later)
	b.Window = quota.Daily(la)
	res, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: "o", Nonce: "n", Debits: []backend.Debit{{Budget: b, Cost: 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Usage[0].Used != 81 {
		t.Fatalf("in Los Angeles the next morning: ok %v, used %d; want refused with the adjust's 81 counted", res.OK, res.Usage[0].Used)
	}
}

// TestLengthenedWindowKeepsKeysOnRefusal: a budget redefined with a longer
// window counts the entries the shorter one still held for the new window,
// even when only refusals follow: the refusal that finds the change makes
// the keys live as long as the new window counts them. Before, only an
// admission renewed them: a 5-minute budget spent to 100 of 100 and
// redefined as one hour expired with its keys 11 minutes later and admitted
// 100 more in that hour; the server's clock moves (FastForward).
func TestLengthenedWindowKeepsKeysOnRefusal(t *testing.T) {
	ctx := context.Background()
	m := redistest.Mini(t)
	st := redisstore.New(redistest.MiniClient(t, m), redisstore.WithPrefix("longer:"))
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	m.SetTime(t0)
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(5 * time.Minute)}
	take := func(cost int64) *backend.TakeResult {
		t.Helper()
		res, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: "o", Nonce: "n", Debits: []backend.Debit{{Budget: b, Cost: cost}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := take(100); !res.OK {
		t.Fatalf("first take refused: %+v", res)
	}
	m.FastForward(time.Minute)
	m.SetTime(t0.Add(time.Minute))
	b.Window = quota.Sliding(time.Hour)
	if res := take(1); res.OK {
		t.Fatalf("a minute later, an hour's window: admitted %+v", res)
	}
	m.FastForward(15 * time.Minute)
	m.SetTime(t0.Add(16 * time.Minute))
	if res := take(100); res.OK || res.Usage[0].Used != 100 {
		t.Fatalf("16 minutes later, an hour's window: ok %v, used %d; want refused, 100 used", res.OK, res.Usage[0].Used)
	}
}
