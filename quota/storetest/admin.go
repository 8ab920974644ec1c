package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

func (s suite) exhaust(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(24 * time.Hour)})
	mustTake(t, l, key, quota.Units("units", 10))
	until := T0.Add(90 * time.Minute)
	if err := l.Exhaust(ctx, key, "units", until); err != nil {
		t.Fatal(err)
	}
	ee := mustRefuse(t, l, key, quota.Units("units", 1))
	if ee.RetryAfter != 90*time.Minute || !ee.ExhaustedUntil.Equal(until) || ee.Used != 10 {
		t.Fatalf("refusal while exhausted = %+v", ee)
	}
	us, err := l.Status(ctx, key)
	if err != nil || us[0].Remaining != 0 || !us[0].ExhaustedUntil.Equal(until) || us[0].Used != 10 {
		t.Fatalf("Status while exhausted = %+v, %v", us, err)
	}
	clock.Set(until.Add(-time.Microsecond))
	mustRefuse(t, l, key, quota.Units("units", 1))
	clock.Set(until)
	mustTake(t, l, key, quota.Units("units", 1))
	if us, _ := l.Status(ctx, key); !us[0].ExhaustedUntil.IsZero() || us[0].Remaining != 89 {
		t.Fatalf("Status after the mark ended = %+v", us)
	}
	// A zero until clears a mark early.
	if err := l.Exhaust(ctx, key, "units", until.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, l, key, quota.Units("units", 1))
	if err := l.Exhaust(ctx, key, "units", time.Time{}); err != nil {
		t.Fatal(err)
	}
	mustTake(t, l, key, quota.Units("units", 1))
}

func (s suite) adjust(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	l := s.limiter(t, s.store(t), clock, quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)})
	mustTake(t, l, key, quota.Units("units", 10))
	if err := l.Exhaust(ctx, key, "units", T0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := l.Adjust(ctx, key, "units", 95); err != nil {
		t.Fatal(err)
	}
	if got := used(t, l, key, "units"); got != 95 {
		t.Fatalf("after Adjust(95): used %d", got)
	}
	mustTake(t, l, key, quota.Units("units", 5)) // the exhaustion mark is gone
	mustRefuse(t, l, key, quota.Units("units", 1))
	if err := l.Adjust(ctx, key, "units", 0); err != nil {
		t.Fatal(err)
	}
	if got := used(t, l, key, "units"); got != 0 {
		t.Fatalf("after Adjust(0): used %d", got)
	}
	if err := l.Adjust(ctx, key, "units", 101); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("Adjust over the limit = %v, want ErrInvalid", err)
	}
}
