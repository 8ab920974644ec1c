package quota_test

import (
	"context"
	"errors"
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
