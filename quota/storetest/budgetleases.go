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
)

// budgetLeases: two limiters ("processes") with leases share one budget over the
// store; one of them now and then dies holding its lease (replaced by a new
// limiter, its leases never settled). At every step, for the window ending
// now, the store counts at least every unit admitted in it (each unit until
// its own admission plus the window), and no more than the limit was
// admitted in it; a lease never admits across a daily reset.
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
			type admission struct {
				at   time.Time
				cost int64
				res  *quota.Reservation
			}
			var admitted []admission
			inWindow := func(now time.Time) (n int64) {
				for _, a := range admitted {
					counts := now.Before(tc.b.Window.Expiry(a.at)) // until its own admission plus the window
					if tc.b.Window.IsDaily() {
						counts = counts && !now.Before(tc.b.Window.Start(a.at))
					}
					if counts {
						n += a.cost
					}
				}
				return n
			}
			var refused, crashes int
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
				default:
					cost := 1 + rnd.Int64N(3)
					r, err := procs[p].Take(ctx, key, quota.Units("units", cost))
					switch {
					case err == nil:
						admitted = append(admitted, admission{at: now, cost: cost, res: r})
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
			if refused == 0 || crashes == 0 || len(admitted) < 400 {
				t.Fatalf("the run did not exercise the limit: %d admitted, %d refused, %d crashes", len(admitted), refused, crashes)
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
	rows, err := st.Breakdown(ctx, &quota.BreakdownRequest{API: "api", Owner: r.Owner, Since: T0.Add(-time.Hour), Now: clock.Now()})
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
