package quota_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// TestRefundByIDAfterBudgetDelete: a refund by reservation ID (quotactl
// refund) made after `quotactl budget delete` removed one of the budgets the
// reservation charged gives back what it can, the budgets still defined,
// and says it was partial, naming the budget it could not refund: an error
// matching ErrPartialRefund, never a success. The undefined budget's entry
// stays recorded; once the budget is defined again, a second refund by the
// same ID gives it back, and a third finds nothing.
func TestRefundByIDAfterBudgetDelete(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := t0
	clock := quota.WithClock(func() time.Time { return now })
	search := quota.Budget{Name: "search", Limit: 100, Window: quota.Sliding(24 * time.Hour)}
	budgets := []quota.Budget{{Name: "units", Limit: 10000, Window: quota.Sliding(24 * time.Hour)}, search}
	st := quota.NewMemoryStore()
	prog, err := quota.New(st, "youtube", budgets, clock)
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "AIza-refund-partial", Label: "yt-key-1"}
	both, err := prog.Take(ctx, key, quota.Charge{Method: "search.list", Units: map[string]int64{"units": 100, "search": 1}})
	if err != nil {
		t.Fatal(err)
	}
	searchOnly, err := prog.Take(ctx, key, quota.Units("search", 2))
	if err != nil {
		t.Fatal(err)
	}
	// Another charge of both budgets in the same hour, never refunded.
	if _, err := prog.Take(ctx, key, quota.Charge{Method: "search.list", Units: map[string]int64{"units": 7, "search": 4}}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)

	// quotactl budget delete youtube/search
	if err := st.DeleteBudget(ctx, "youtube", "search"); err != nil {
		t.Fatal(err)
	}
	refund := func(id string) error {
		t.Helper()
		cli, err := quota.Load(ctx, st, "youtube", clock) // what quotactl refund builds
		if err != nil {
			t.Fatal(err)
		}
		p, err := quota.ParseReservationID(id)
		if err != nil {
			t.Fatal(err)
		}
		return cli.Refund(ctx, p)
	}
	used := func(budget string) int64 {
		t.Helper()
		us, err := prog.Status(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			if u.Budget == budget {
				return u.Used
			}
		}
		t.Fatalf("no budget %q", budget)
		return 0
	}

	err = refund(both.ID())
	var pe *quota.PartialRefundError
	if !errors.Is(err, quota.ErrPartialRefund) || !errors.As(err, &pe) {
		t.Fatalf("refund by ID after budget delete = %v; want an error matching ErrPartialRefund", err)
	}
	if !reflect.DeepEqual(pe.NotRefunded, []string{"search"}) || !reflect.DeepEqual(pe.Refunded, map[string]int64{"units": 100}) || pe.API != "youtube" || pe.Reservation != both.ID() {
		t.Errorf("partial refund = %+v; want units 100 refunded, search not", pe)
	}
	if msg := err.Error(); !strings.Contains(msg, "youtube/search") || !strings.Contains(msg, both.ID()) || strings.Contains(msg, key.Secret) {
		t.Errorf("error %q: want it to name youtube/search and the reservation, never the secret", msg)
	}
	if errors.Is(err, quota.ErrNotFound) {
		t.Errorf("error %v matches ErrNotFound: the search entry is still recorded", err)
	}
	if u, s := used("units"), used("search"); u != 7 || s != 7 {
		t.Fatalf("after the partial refund: units %d, search %d; want 7 (units given back) and 7 (search kept)", u, s)
	}
	// A reservation of the deleted budget alone: nothing given back, and said so.
	err = refund(searchOnly.ID())
	if !errors.As(err, &pe) || !reflect.DeepEqual(pe.NotRefunded, []string{"search"}) || len(pe.Refunded) != 0 {
		t.Fatalf("refund of a search-only reservation = %v; want ErrPartialRefund naming search, nothing refunded", err)
	}

	// quotactl budget set youtube/search: the budget is back, with the
	// entries the refund could not give back.
	if err := quota.SetOverride(ctx, st, "youtube", search, now); err != nil {
		t.Fatal(err)
	}
	if s := used("search"); s != 7 {
		t.Fatalf("search after budget set: %d, want 7", s)
	}
	for _, r := range []*quota.Reservation{both, searchOnly} {
		if err := refund(r.ID()); err != nil {
			t.Fatalf("refund of %s once search is defined again: %v", r.ID(), err)
		}
	}
	if u, s := used("units"), used("search"); u != 7 || s != 4 {
		t.Fatalf("after the second refunds: units %d, search %d; want 7 and 4", u, s)
	}
	if err := refund(both.ID()); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("a third refund = %v, want ErrNotFound", err)
	}
}
