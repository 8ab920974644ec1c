package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// budgetLeases: two limiters ("processes") with leases share one budget over the
// store; one of them now and then dies holding its lease (replaced by a new
// limiter, its leases never settled), and an operator now and then adjusts
// the budget (what was admitted before is then what the adjust says). At every step, for the window ending
// now, the store counts at least every unit admitted in it (each unit until
// its own admission plus the window), and no more than the limit was
// admitted in it; a lease never admits across a daily or monthly reset.
func (s suite) budgetLeases(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		b     quota.Budget
		start time.Time
		step  time.Duration
	}{
		{"sliding", quota.Budget{Name: "units", Limit: 400, Window: quota.Sliding(time.Minute)}, T0, 300 * time.Millisecond},
		{"daily", quota.Budget{Name: "units", Limit: 400, Window: quota.Daily(time.UTC)}, time.Date(2026, 11, 22, 23, 58, 0, 0, time.UTC), 300 * time.Millisecond},
		{"monthly", quota.Budget{Name: "units", Limit: 400, Window: quota.Monthly(time.UTC)}, time.Date(2026, 11, 30, 23, 58, 0, 0, time.UTC), 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := s.store(t)
			clock := NewClock(tc.start)
			rnd := rand.New(rand.NewPCG(1, 2))
			newLimiter := func(block int64) *quota.Limiter {
				l, err := quota.New(st, "api", []quota.Budget{tc.b}, quota.WithClock(clock.Now),
					quota.WithLeases(quota.LeaseOptions{Block: block, MaxFraction: 0.1, MaxTime: time.Second}))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			procs := []*quota.Limiter{newLimiter(0), newLimiter(10)}
			operator, err := quota.New(st, "api", []quota.Budget{tc.b}, quota.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			type admission struct {
				at   time.Time
				cost int64
				res  *quota.Reservation
			}
			var admitted []admission
			inWindow := func(now time.Time) (n int64) {
				for _, a := range admitted {
					counts := now.Before(tc.b.Window.Expiry(a.at)) // until its own admission plus the window
					if tc.b.Window.IsCalendar() {
						counts = counts && !now.Before(tc.b.Window.Start(a.at))
					}
					if counts {
						n += a.cost
					}
				}
				return n
			}
			var refused, crashes, adjusts, takes int
			for i := range 1500 {
				clock.Add(time.Duration(rnd.Int64N(int64(tc.step))))
				now := clock.Now()
				p := rnd.IntN(len(procs))
				switch x := rnd.IntN(100); {
				case x < 2: // the process dies holding its lease
					procs[p] = newLimiter(int64(p) * 10)
					crashes++
				case x < 4:
					if err := procs[p].Close(ctx); err != nil {
						t.Fatalf("step %d: Close: %v", i, err)
					}
				case x < 8 && len(admitted) > 0: // a refund or a settle of a recent admission
					j := len(admitted) - 1 - rnd.IntN(min(len(admitted), 5))
					a := &admitted[j]
					if a.res == nil || a.cost == 0 {
						break
					}
					keep := rnd.Int64N(a.cost)
					if err := a.res.Settle(ctx, keep); err != nil && !errors.Is(err, quota.ErrNotFound) {
						t.Fatalf("step %d: Settle: %v", i, err)
					}
					a.cost = keep
				case x < 9: // the operator matches the upstream's console
					v := rnd.Int64N(tc.b.Limit / 2)
					if err := operator.Adjust(ctx, key, "units", v); err != nil {
						t.Fatalf("step %d: Adjust: %v", i, err)
					}
					// what was admitted before is what the console says
					admitted = append(admitted[:0], admission{at: now, cost: v})
					adjusts++
				default:
					cost := 1 + rnd.Int64N(3)
					r, err := procs[p].Take(ctx, key, quota.Units("units", cost))
					switch {
					case err == nil:
						admitted = append(admitted, admission{at: now, cost: cost, res: r})
						takes++
					case errors.Is(err, quota.ErrExhausted):
						refused++
					default:
						t.Fatalf("step %d: Take: %v", i, err)
					}
				}
				us, err := procs[0].Status(ctx, key)
				if err != nil {
					t.Fatalf("step %d: Usage: %v", i, err)
				}
				want := inWindow(now)
				if us[0].Used < want {
					t.Fatalf("step %d at %v: the store counts %d units, but %d were admitted in the window", i, now, us[0].Used, want)
				}
				if want > tc.b.Limit {
					t.Fatalf("step %d at %v: %d units admitted in the window, limit %d", i, now, want, tc.b.Limit)
				}
			}
			if refused == 0 || crashes == 0 || adjusts == 0 || takes < 400 {
				t.Fatalf("the run did not exercise the limit: %d admitted, %d refused, %d crashes, %d adjusts", takes, refused, crashes, adjusts)
			}
		})
	}
}

// leaseBreakdownAcrossHour: a sliding window's lease block is held (its
// entry stamped at the lease's end), so a lease taken just before an hour
// ends has its entry in the next hour. Settling it gives its unused units
// back to the usage row the take spent them in, the hour of the decision:
// one row of the unit admitted, not +40 in one hour and -39 in the next
// (nor 40 left where the store counts 1).
func (s suite) leaseBreakdownAcrossHour(t *testing.T) {
	ctx := context.Background()
	st := s.store(t)
	clock := NewClock(T0.Add(time.Hour - 500*time.Millisecond))
	b := quota.Budget{Name: "units", Limit: 1000, Window: quota.Sliding(time.Hour)}
	l, err := quota.New(st, "api", []quota.Budget{b}, quota.WithClock(clock.Now), quota.WithLeases(quota.LeaseOptions{Block: 40}))
	if err != nil {
		t.Fatal(err)
	}
	r := mustTake(t, l, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 1}})
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := st.Breakdown(ctx, &backend.BreakdownRequest{API: "api", Owner: r.Owner, Since: T0.Add(-time.Hour), Now: clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, row := range rows {
		got = append(got, fmt.Sprintf("%s %s %d", row.Hour.UTC().Format("15:04"), row.Method, row.Units))
	}
	if want := []string{"10:00 lease 1"}; !slices.Equal(got, want) {
		t.Fatalf("breakdown of a lease taken at 10:59:59.5 and settled to 1 unit: %q, want %q", got, want)
	}
	us, err := l.Status(ctx, key)
	if err != nil || us[0].Used != 1 {
		t.Fatalf("Status = %+v, %v; want 1 used", us, err)
	}
}

// adjustKeepsOpenLeases: an operator's Adjust (here from a limiter without
// leases, as `quotactl adjust` is) while another process holds a lease
// keeps the lease's block counted: the lease may go on admitting its unused
// units locally until it ends (until it sees the change, within
// LeaseOptions.CheckEvery: here the whole test runs within the 100ms
// after the lease's take), so the store must go on counting them, or
// the other processes are let spend them a second time. The block stays
// whole (its used part is counted twice, conservatively) until the lease
// is settled. For a daily window too: the block is held (stamped at the
// lease's end, within the day).
func (s suite) adjustKeepsOpenLeases(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		w    quota.Window
	}{
		{"sliding", quota.Sliding(time.Hour)},
		{"daily", quota.Daily(time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := s.store(t)
			clock := NewClock(T0)
			b := quota.Budget{Name: "units", Limit: 1000, Window: tc.w}
			leased, err := quota.New(st, "api", []quota.Budget{b}, quota.WithClock(clock.Now),
				quota.WithLeases(quota.LeaseOptions{Block: 100, MaxFraction: 0.1, MaxTime: time.Second}))
			if err != nil {
				t.Fatal(err)
			}
			operator, err := quota.New(st, "api", []quota.Budget{b}, quota.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			mustTake(t, leased, key, quota.Units("units", 1)) // a block of 100: 99 left to admit locally
			clock.Add(100 * time.Millisecond)
			if err := operator.Adjust(ctx, key, "units", 500); err != nil {
				t.Fatalf("Adjust: %v", err)
			}
			if u := used(t, operator, key, "units"); u != 600 {
				t.Fatalf("after Adjust to 500 with a lease of 100 open: used %d, want 600 (the open block kept)", u)
			}
			es, err := operator.Entries(ctx, key, "units")
			if err != nil || len(es) != 2 || es[0].Cost != 500 || es[1].Cost != 100 {
				t.Fatalf("entries after Adjust = %+v, %v; want the adjusted 500, then the held block of 100", es, err)
			}
			// The lease admits its 99 unused units, locally (within
			// CheckEvery of its take: it has not checked yet).
			for i := range 99 {
				if _, err := leased.Take(ctx, key, quota.Units("units", 1)); err != nil {
					t.Fatalf("leased take %d: %v", i, err)
				}
			}
			// The operator's process gets what is left after the adjusted 500
			// and the whole block: 400, not 500.
			got := int64(0)
			for {
				if _, err := operator.Take(ctx, key, quota.Units("units", 1)); err != nil {
					if !errors.Is(err, quota.ErrExhausted) {
						t.Fatalf("operator take: %v", err)
					}
					break
				}
				got++
			}
			if got != 400 {
				t.Fatalf("after Adjust to 500, with 99 admitted from the open lease: %d more admitted elsewhere, want 400 (500+99+%d = %d over a limit of 1000)",
					got, got, 500+99+got)
			}
			// A settled lease gives back what it did not admit, from the kept
			// block: a second lease is taken, 1 unit of it used, then settled.
			clock.Add(2 * time.Second) // past the first lease's time
			if err := operator.Adjust(ctx, key, "units", 0); err != nil {
				t.Fatal(err)
			}
			mustTake(t, leased, key, quota.Units("units", 1))
			if err := operator.Adjust(ctx, key, "units", 300); err != nil {
				t.Fatal(err)
			}
			if err := leased.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if u := used(t, operator, key, "units"); u != 301 {
				t.Fatalf("after the kept block was settled to 1: used %d, want 301", u)
			}
			// Adjust drops the block once its lease is over: it is no longer
			// held then.
			clock.Add(2 * time.Second)
			if err := operator.Adjust(ctx, key, "units", 7); err != nil {
				t.Fatal(err)
			}
			if u := used(t, operator, key, "units"); u != 7 {
				t.Fatalf("Adjust to 7 after every lease ended: used %d, want 7", u)
			}
			// The leased limiter's own Adjust ends its lease and drops its
			// block, held as it is: what the lease admitted is in the usage set.
			mustTake(t, leased, key, quota.Units("units", 2))
			clock.Add(100 * time.Millisecond)
			if err := leased.Adjust(ctx, key, "units", 20); err != nil {
				t.Fatal(err)
			}
			if u := used(t, operator, key, "units"); u != 20 {
				t.Fatalf("the leased limiter's own Adjust to 20: used %d, want 20 (its own block dropped)", u)
			}
		})
	}
}
