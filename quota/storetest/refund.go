package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

func (s suite) refund(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	l := s.limiter(t, s.store(t), clock,
		quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)},
		quota.Budget{Name: "search", Limit: 10, Window: quota.Sliding(time.Hour)})
	r1 := mustTake(t, l, key, quota.Charge{Units: map[string]int64{"units": 50, "search": 1}})
	clock.Add(time.Second)
	r2 := mustTake(t, l, key, quota.Units("units", 30))
	clock.Add(time.Second)
	if err := l.Refund(ctx, r1); err != nil {
		t.Fatalf("Refund: %v", err)
	}
	if u, s := used(t, l, key, "units"), used(t, l, key, "search"); u != 30 || s != 0 {
		t.Fatalf("after refund: units %d search %d, want 30 and 0", u, s)
	}
	if err := l.Refund(ctx, r1); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("second Refund = %v, want ErrNotFound", err)
	}
	// By ID alone, as `quotactl refund ID` does, from another limiter.
	p, err := quota.ParseReservationID(r2.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, p); err != nil {
		t.Fatalf("Refund by ID: %v", err)
	}
	if u := used(t, l, key, "units"); u != 0 {
		t.Fatalf("after refund by ID: used %d, want 0", u)
	}
	// A refund after the entry left the window finds nothing.
	r3 := mustTake(t, l, key, quota.Units("units", 5))
	clock.Add(time.Hour)
	if err := l.Refund(ctx, r3); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("Refund of expired = %v, want ErrNotFound", err)
	}
	if _, err := quota.ParseReservationID("not-an-id"); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("ParseReservationID(bad) = %v, want ErrInvalid", err)
	}
}

// refundUndefined: a refund by ID through a limiter that no longer
// defines one of the reservation's budgets (deleted from the store, as
// `quotactl budget delete` does) gives back the others and reports the
// rest (ErrPartialRefund); the undefined budget's entries stay, older ones
// included, and a refund once it is defined again gives them back.
func (s suite) refundUndefined(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	units := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	search := quota.Budget{Name: "search", Limit: 10, Window: quota.Daily(time.UTC)}
	l := s.limiter(t, st, clock, units, search)
	mustTake(t, l, key, quota.Units("search", 2))
	clock.Add(30 * time.Minute)
	r := mustTake(t, l, key, quota.Charge{Method: "search.list", Units: map[string]int64{"units": 50, "search": 1}})
	clock.Add(time.Second)
	if err := st.DeleteBudget(ctx, "api", "search"); err != nil {
		t.Fatal(err)
	}
	refund := func() error {
		t.Helper()
		byID, err := quota.Load(ctx, st, "api", quota.WithClock(clock.Now))
		if err != nil {
			t.Fatal(err)
		}
		p, err := quota.ParseReservationID(r.ID())
		if err != nil {
			t.Fatal(err)
		}
		return byID.Refund(ctx, p)
	}
	err := refund()
	var pe *quota.PartialRefundError
	if !errors.As(err, &pe) || !errors.Is(err, quota.ErrPartialRefund) || !reflect.DeepEqual(pe.NotRefunded, []string{"search"}) || pe.Refunded["units"] != 50 {
		t.Fatalf("refund by ID with search undefined = %v; want a partial refund of units 50, search named", err)
	}
	if u, sr := used(t, l, key, "units"), used(t, l, key, "search"); u != 0 || sr != 3 {
		t.Fatalf("after the partial refund: units %d, search %d; want 0 and 3 (both search entries kept)", u, sr)
	}
	if err := st.DefineBudgets(ctx, "api", []quota.Budget{search}); err != nil {
		t.Fatal(err)
	}
	if err := refund(); err != nil {
		t.Fatalf("refund by ID once search is defined again: %v", err)
	}
	if u, sr := used(t, l, key, "units"), used(t, l, key, "search"); u != 0 || sr != 2 {
		t.Fatalf("after the second refund: units %d, search %d; want 0 and 2", u, sr)
	}
}
