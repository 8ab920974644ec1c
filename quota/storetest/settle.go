package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// settle: a reservation shrinks to the units really spent, never grows,
// never moves in time; 0 gives it all back; a settled-away or expired
// reservation is not found.
func (s suite) settle(t *testing.T) {
	ctx := context.Background()
	for _, w := range []quota.Window{quota.Sliding(time.Hour), quota.Daily(time.UTC)} {
		t.Run(w.String(), func(t *testing.T) {
			clock := NewClock(T0)
			l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "units", Limit: 100, Window: w})
			r := mustTake(t, l, key, quota.Units("units", 50))
			clock.Add(time.Minute)
			if err := r.Settle(ctx, 20); err != nil {
				t.Fatalf("Settle(20): %v", err)
			}
			if u := used(t, l, key, "units"); u != 20 {
				t.Fatalf("after Settle(20): used %d, want 20", u)
			}
			if r.Usage[0].Cost != 20 || r.Usage[0].Used != 20 || r.Usage[0].Remaining != 80 {
				t.Fatalf("reservation usage after Settle(20) = %+v", r.Usage[0])
			}
			es, err := l.Entries(ctx, key, "units")
			if err != nil || len(es) != 1 || es[0].Cost != 20 || !es[0].At.Equal(T0) {
				t.Fatalf("Entries after Settle(20) = %+v, %v; want one entry of 20 at %v (not moved)", es, err, T0)
			}
			// Settling above the charge never increases it.
			if err := r.Settle(ctx, 45); err != nil {
				t.Fatalf("Settle(45): %v", err)
			}
			if u := used(t, l, key, "units"); u != 20 {
				t.Fatalf("after Settle(45): used %d, want 20 (never increased)", u)
			}
			// The entry still frees up when it would have: RetryAt is exact.
			mustTake(t, l, key, quota.Units("units", 80))
			ee := mustRefuse(t, l, key, quota.Units("units", 10))
			if want := w.Expiry(T0); !ee.RetryAt.Equal(want) {
				t.Fatalf("RetryAt after settle = %v, want %v (the entry's own expiry)", ee.RetryAt, want)
			}
			// By ID on another limiter; 0 gives everything back.
			l2 := s.limiter(t, l.Store(), clock, quota.Budget{Name: "units", Limit: 100, Window: w})
			p, err := quota.ParseReservationID(r.ID())
			if err != nil {
				t.Fatal(err)
			}
			if err := l2.Settle(ctx, p, map[string]int64{"units": 0}); err != nil {
				t.Fatalf("Settle by ID to 0: %v", err)
			}
			if u := used(t, l, key, "units"); u != 80 {
				t.Fatalf("after Settle to 0: used %d, want 80", u)
			}
			if err := r.Settle(ctx, 0); !errors.Is(err, quota.ErrNotFound) {
				t.Fatalf("Settle after it was settled away = %v, want ErrNotFound", err)
			}
			if err := l.Refund(ctx, r); !errors.Is(err, quota.ErrNotFound) {
				t.Fatalf("Refund after it was settled away = %v, want ErrNotFound", err)
			}
			// Bad input.
			r2 := mustTake(t, l, key, quota.Units("units", 5))
			if err := r2.Settle(ctx, -1); !errors.Is(err, quota.ErrInvalid) {
				t.Fatalf("Settle(-1) = %v, want ErrInvalid", err)
			}
			if err := l.Settle(ctx, r2, map[string]int64{"nope": 1}); !errors.Is(err, quota.ErrInvalid) {
				t.Fatalf("Settle of an unknown budget = %v, want ErrInvalid", err)
			}
			if _, err := l.Store().Settle(ctx, &backend.SettleRequest{API: "api", Owner: r2.Credential, At: r2.At, Nonce: "n",
				Debits: []backend.Debit{{Budget: quota.Budget{Name: "units", Limit: 100, Window: w}, Cost: -3}}}); !errors.Is(err, quota.ErrInvalid) {
				t.Fatalf("store Settle with a negative actual = %v, want ErrInvalid", err)
			}
			if u := used(t, l, key, "units"); u != 85 {
				t.Fatalf("bad settles changed usage: %d, want 85", u)
			}
			// Out of the window: not found.
			clock.Set(w.Expiry(clock.Now()))
			if err := r2.Settle(ctx, 1); !errors.Is(err, quota.ErrNotFound) {
				t.Fatalf("Settle of an expired reservation = %v, want ErrNotFound", err)
			}
		})
	}
}

// settleMulti: a charge of two budgets settles one and keeps the other.
func (s suite) settleMulti(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	l := s.limiter(t, s.store(t), clock,
		quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)},
		quota.Budget{Name: "search", Limit: 10, Window: quota.Daily(time.UTC)})
	r := mustTake(t, l, key, quota.Charge{Units: map[string]int64{"units": 60, "search": 2}})
	if err := r.Settle(ctx, 1); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("Reservation.Settle of two budgets = %v, want ErrInvalid", err)
	}
	if err := l.Settle(ctx, r, map[string]int64{"units": 15}); err != nil {
		t.Fatalf("Settle units: %v", err)
	}
	if u, s := used(t, l, key, "units"), used(t, l, key, "search"); u != 15 || s != 2 {
		t.Fatalf("after settling units: units %d search %d, want 15 and 2", u, s)
	}
	if err := l.Settle(ctx, r, map[string]int64{"units": 0, "search": 1}); err != nil {
		t.Fatalf("Settle both: %v", err)
	}
	if u, s := used(t, l, key, "units"), used(t, l, key, "search"); u != 0 || s != 1 {
		t.Fatalf("after settling both: units %d search %d, want 0 and 1", u, s)
	}
}

// held: a take with Hold records its entries at now+Hold: a sliding
// window's count from now until Hold past the window; a daily one's are
// held no later than the day's last µs, and count until the reset.
func (s suite) held(t *testing.T) {
	ctx := context.Background()
	st := s.store(t)
	sliding := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Minute)}
	daily := quota.Budget{Name: "day", Limit: 100, Window: quota.Daily(time.UTC)}
	owner := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), "held-owner")
	hold := 2 * time.Second
	res, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: owner, Nonce: "lease1", Now: T0,
		Debits: []backend.Debit{{Budget: sliding, Cost: 40}, {Budget: daily, Cost: 40}}, Hold: hold})
	if err != nil || !res.OK || !res.At.Equal(T0) {
		t.Fatalf("held Take = %+v, %v", res, err)
	}
	// Reset is when the oldest counted entry expires: the held entry sits
	// at its stamp, so a window after that, not after the decision.
	if want := T0.Add(hold + time.Minute); !res.Usage[0].Reset.Equal(want) {
		t.Fatalf("held Take: Reset %v, want %v (the held entry's expiry)", res.Usage[0].Reset, want)
	}
	usage := func(at time.Time) (int64, int64) {
		t.Helper()
		us, err := st.Usage(ctx, &backend.UsageRequest{API: "api", Owner: owner, Budgets: []quota.Budget{sliding, daily}, Now: at})
		if err != nil {
			t.Fatalf("Usage: %v", err)
		}
		return us[0].Used, us[1].Used
	}
	if u, d := usage(T0); u != 40 || d != 40 {
		t.Fatalf("at the take: used %d and %d, want 40 and 40", u, d)
	}
	es, err := st.Entries(ctx, &backend.EntriesRequest{API: "api", Owner: owner, Budget: daily, Now: T0})
	if err != nil || len(es) != 1 || !es[0].At.Equal(T0.Add(hold)) {
		t.Fatalf("daily entries = %+v, %v; want one held at %v", es, err, T0.Add(hold))
	}
	// A later plain take sits before the held entry in time order; both are
	// found by refund and settle.
	res2, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: owner, Nonce: "plain1", Now: T0.Add(time.Second),
		Debits: []backend.Debit{{Budget: sliding, Cost: 10}}})
	if err != nil || !res2.OK {
		t.Fatalf("plain Take = %+v, %v", res2, err)
	}
	es, err = st.Entries(ctx, &backend.EntriesRequest{API: "api", Owner: owner, Budget: sliding, Now: T0.Add(time.Second)})
	if err != nil || len(es) != 2 || !es[0].At.Equal(T0.Add(time.Second)) || !es[1].At.Equal(T0.Add(hold)) {
		t.Fatalf("entries = %+v, %v; want the plain one then the held one, oldest first", es, err)
	}
	got, err := st.Settle(ctx, &backend.SettleRequest{API: "api", Owner: owner, At: T0.Add(hold), Nonce: "lease1",
		Debits: []backend.Debit{{Budget: sliding, Cost: 15}}, Now: T0.Add(time.Second)})
	if err != nil || got["units"] != 25 {
		t.Fatalf("Settle of the held entry = %v, %v; want 25 freed", got, err)
	}
	got, err = st.Refund(ctx, &backend.RefundRequest{API: "api", Owner: owner, At: T0.Add(time.Second), Nonce: "plain1",
		Budgets: []quota.Budget{sliding}, Now: T0.Add(time.Second)})
	if err != nil || got["units"] != 10 {
		t.Fatalf("Refund of the plain entry = %v, %v; want 10", got, err)
	}
	if u, _ := usage(T0.Add(time.Second)); u != 15 {
		t.Fatalf("after settle and refund: used %d, want 15", u)
	}
	// One budget: a held entry's Reset is its stamp plus the window, and
	// while it is the oldest, a later held take's Reset is still its.
	owner3 := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), "held-owner-3")
	for i, want := range []time.Time{T0.Add(hold + time.Minute), T0.Add(hold + time.Minute)} {
		at := T0.Add(time.Duration(i) * time.Second)
		res, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: owner3, Nonce: fmt.Sprint("one", i), Now: at,
			Debits: []backend.Debit{{Budget: sliding, Cost: 1}}, Hold: hold})
		if err != nil || !res.OK {
			t.Fatalf("held Take %d = %+v, %v", i, res, err)
		}
		if !res.Usage[0].Reset.Equal(want) {
			t.Fatalf("held Take %d at %v: Reset %v, want %v (the oldest held entry's expiry)", i, at, res.Usage[0].Reset, want)
		}
	}
	// A hold over a tenth of a sliding window is refused.
	if _, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: owner, Nonce: "toolong", Now: T0.Add(time.Second),
		Debits: []backend.Debit{{Budget: sliding, Cost: 1}}, Hold: 7 * time.Second}); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("Take with a hold of 7s on a 1m window = %v, want ErrInvalid", err)
	}
	// The held entry counts until Hold past its window, then goes.
	end := T0.Add(hold + time.Minute)
	if u, _ := usage(end.Add(-time.Microsecond)); u != 15 {
		t.Fatalf("just before hold+window: used %d, want 15 (held entries count until then)", u)
	}
	if u, _ := usage(end); u != 0 {
		t.Fatalf("at hold+window: used %d, want 0", u)
	}
	// A daily entry is held no later than its day's last µs: it counts
	// that day, and is gone at the reset.
	owner2 := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), "held-owner-2")
	late := time.Date(2026, 11, 22, 23, 59, 59, 0, time.UTC)
	if res, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: owner2, Nonce: "late", Now: late,
		Debits: []backend.Debit{{Budget: daily, Cost: 5}}, Hold: hold}); err != nil || !res.OK {
		t.Fatalf("held Take a second before midnight = %+v, %v", res, err)
	}
	lastUS := late.Add(time.Second - time.Microsecond)
	es, err = st.Entries(ctx, &backend.EntriesRequest{API: "api", Owner: owner2, Budget: daily, Now: late})
	if err != nil || len(es) != 1 || !es[0].At.Equal(lastUS) || es[0].Nonce != "late" {
		t.Fatalf("daily entries = %+v, %v; want the late one held at the day's last µs %v", es, err, lastUS)
	}
	if got, err := st.Settle(ctx, &backend.SettleRequest{API: "api", Owner: owner2, At: lastUS, Nonce: "late",
		Debits: []backend.Debit{{Budget: daily, Cost: 1}}, Now: late}); err != nil || got["day"] != 4 {
		t.Fatalf("Settle of the late held entry = %v, %v; want 4 freed", got, err)
	}
	dayUsed := func(at time.Time) int64 {
		t.Helper()
		us, err := st.Usage(ctx, &backend.UsageRequest{API: "api", Owner: owner2, Budgets: []quota.Budget{daily}, Now: at})
		if err != nil {
			t.Fatalf("Usage: %v", err)
		}
		return us[0].Used
	}
	if d := dayUsed(lastUS); d != 1 {
		t.Fatalf("on the day's last µs: daily used %d, want 1", d)
	}
	if d := dayUsed(lastUS.Add(time.Microsecond)); d != 0 {
		t.Fatalf("at the reset: daily used %d, want 0", d)
	}
}
