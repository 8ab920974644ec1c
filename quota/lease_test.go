package quota_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storetest"
)

func storeUsed(t *testing.T, l *quota.Limiter, cred quota.Credential) int64 {
	t.Helper()
	us, err := l.Status(context.Background(), cred)
	if err != nil {
		t.Fatal(err)
	}
	return us[0].Used
}

// TestLeaseEndsOnExhaustAndAdjust: the limiter's own Exhaust and Adjust end
// its lease first, so no unit is admitted locally past the mark or outside
// the log Adjust replaced; refunds and settles of leased reservations go
// back to the lease, and Close gives the rest back.
func TestLeaseEndsOnExhaustAndAdjust(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.T0)
	l, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(clock.Now), quota.WithLeases(quota.LeaseOptions{Block: 10, MaxFraction: 0.5}))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "lease-secret"}
	r, err := l.Take(ctx, cred, quota.Units("units", 1))
	if err != nil {
		t.Fatal(err)
	}
	if r.ID() != "" {
		t.Fatalf("a leased reservation has ID %q, want none", r.ID())
	}
	if u := storeUsed(t, l, cred); u != 10 {
		t.Fatalf("after one leased take the store counts %d, want the block of 10", u)
	}
	if err := l.Exhaust(ctx, cred, "units", clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if u := storeUsed(t, l, cred); u != 1 {
		t.Fatalf("after Exhaust the store counts %d, want the 1 unit admitted (the lease settled)", u)
	}
	if _, err := l.Take(ctx, cred, quota.Units("units", 1)); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("Take past an exhaust mark = %v, want ErrExhausted (not admitted from the old lease)", err)
	}
	if err := l.Adjust(ctx, cred, "units", 0); err != nil {
		t.Fatal(err)
	}
	r1, err := l.Take(ctx, cred, quota.Units("units", 3))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Adjust(ctx, cred, "units", 50); err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, r1); err != nil { // its lease was ended by Adjust
		t.Fatal(err)
	}
	r2, err := l.Take(ctx, cred, quota.Units("units", 4))
	if err != nil {
		t.Fatal(err)
	}
	if u := storeUsed(t, l, cred); u != 60 {
		t.Fatalf("after Adjust(50) and a leased take the store counts %d, want 50 + a new block of 10", u)
	}
	if err := r2.Settle(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, r2); err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, r2); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("second refund of a leased reservation = %v, want ErrNotFound", err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if u := storeUsed(t, l, cred); u != 50 {
		t.Fatalf("after Close the store counts %d, want 50 (every leased unit given back)", u)
	}
}

// TestLeaseMultiBudget: a charge of two budgets under leases pays both or
// neither: when one budget refuses, the units the other's lease set aside
// for the charge go back to that lease.
func TestLeaseMultiBudget(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.T0)
	l, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{
		{Name: "units", Limit: 1000, Window: quota.Sliding(time.Hour)},
		{Name: "search", Limit: 5, Window: quota.Daily(time.UTC)},
	}, quota.WithClock(clock.Now), quota.WithLeases(quota.LeaseOptions{Block: 10, MaxFraction: 1}))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "lease-secret"}
	both := quota.Charge{Units: map[string]int64{"units": 3, "search": 1}}
	for i := range 5 {
		if _, err := l.Take(ctx, cred, both); err != nil {
			t.Fatalf("take %d: %v", i, err)
		}
	}
	_, err = l.Take(ctx, cred, both)
	var ee *quota.ExhaustedError
	if !errors.As(err, &ee) || ee.Budget != "search" || !ee.RetryAt.Equal(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("sixth take = %v, want search refused until midnight", err)
	}
	// The units the refused charge set aside went back to the units lease,
	// so settling it leaves exactly the 5 charges counted.
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	us, err := l.Status(ctx, cred)
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Used != 15 || us[1].Used != 5 {
		t.Fatalf("after Close: units %d search %d, want 15 and 5 (the refused charge took nothing)", us[0].Used, us[1].Used)
	}
}

// TestLeaseConcurrent: 16 goroutines charge, settle and refund through one
// leased limiter with adaptive blocks; once it is closed the store counts
// exactly the units kept, and never more than the limit were admitted.
func TestLeaseConcurrent(t *testing.T) {
	ctx := context.Background()
	const limit = 5000
	l, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{{Name: "units", Limit: limit, Window: quota.Sliding(time.Hour)}},
		quota.WithLeases(quota.LeaseOptions{MaxTime: 50 * time.Millisecond}), quota.WithLocalRefusals(0))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "lease-secret"}
	var kept atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 400 {
				r, err := l.Take(ctx, cred, quota.Units("units", 3))
				if errors.Is(err, quota.ErrExhausted) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				switch (g + i) % 5 {
				case 0:
					if err := l.Refund(ctx, r); err != nil {
						t.Error(err)
						return
					}
				case 1:
					if err := r.Settle(ctx, 1); err != nil {
						t.Error(err)
						return
					}
					kept.Add(1)
				default:
					kept.Add(3)
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if kept.Load() > limit {
		t.Fatalf("kept %d units, limit %d", kept.Load(), limit)
	}
	if u := storeUsed(t, l, cred); u != kept.Load() {
		t.Fatalf("after Close the store counts %d, the goroutines kept %d", u, kept.Load())
	}
}
