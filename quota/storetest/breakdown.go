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

func breakdown(t *testing.T, st quota.Store, owner string, since, now time.Time, budgets ...string) string {
	t.Helper()
	rows, err := st.Breakdown(context.Background(), &backend.BreakdownRequest{API: "api", Owner: owner, Budgets: budgets, Since: since, Now: now})
	if err != nil {
		t.Fatalf("Breakdown: %v", err)
	}
	var s string
	for _, r := range rows {
		s += fmt.Sprintf("%s %s %s %s %d\n", r.Hour.UTC().Format("15:04"), r.Budget, r.Method, r.Job, r.Units)
	}
	return s
}

// breakdownByMethod: Take adds to the row of its hour, method and job,
// Refund subtracts from it, Settle subtracts what it frees, and Breakdown reads rows from a start on,
// filtered by budget, per owner.
func (s suite) breakdownByMethod(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0) // 10:00 UTC
	st := s.store(t)
	l := s.limiter(t, st, clock,
		quota.Budget{Name: "units", Limit: 10000, Window: quota.Sliding(24 * time.Hour)},
		quota.Budget{Name: "search", Limit: 100, Window: quota.Daily(time.UTC)})
	trending := quota.ContextWithJob(ctx, "trending")
	var owner string // the account the key's budgets are kept under
	for range 3 {
		r, err := l.Take(trending, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 1}})
		if err != nil {
			t.Fatal(err)
		}
		owner = r.Owner
	}
	clock.Add(30 * time.Minute)
	mustTake(t, l, key, quota.Charge{Method: "search.list", Units: map[string]int64{"units": 100, "search": 1}})
	clock.Add(35 * time.Minute) // 11:05
	mustTake(t, l, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 1}})
	backfill := quota.ContextWithJob(ctx, "backfill")
	r, err := l.Take(backfill, key, quota.Charge{Method: "videos.update", Units: map[string]int64{"units": 50}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Job != "backfill" {
		t.Fatalf("Reservation.Job = %q, want backfill", r.Job)
	}
	clock.Add(time.Minute)
	if err := l.Refund(backfill, r); err != nil { // the row goes back to 0 and is not reported
		t.Fatal(err)
	}
	for range 2 {
		if _, err := l.Take(backfill, key, quota.Charge{Method: "videos.update", Units: map[string]int64{"units": 50}}); err != nil {
			t.Fatal(err)
		}
	}
	// Settle gives back what was not spent: the row keeps the actual.
	r, err = l.Take(backfill, key, quota.Charge{Method: "captions.download", Units: map[string]int64{"units": 200}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Settle(backfill, 20); err != nil {
		t.Fatal(err)
	}
	// A refused charge spends nothing.
	mustRefuse(t, l, key, quota.Charge{Method: "videos.insert", Units: map[string]int64{"units": 10000}})
	now := clock.Now()

	want := "10:00 search search.list  1\n" +
		"10:00 units search.list  100\n" +
		"10:00 units videos.list trending 3\n" +
		"11:00 units captions.download backfill 20\n" +
		"11:00 units videos.list  1\n" +
		"11:00 units videos.update backfill 100\n"
	if got := breakdown(t, st, owner, T0.Add(-24*time.Hour), now); got != want {
		t.Fatalf("Breakdown over the window:\n%s\nwant:\n%s", got, want)
	}
	if got, want := breakdown(t, st, owner, T0.Add(-24*time.Hour), now, "search"), "10:00 search search.list  1\n"; got != want {
		t.Fatalf("Breakdown of search:\n%s\nwant:\n%s", got, want)
	}
	// Since is inside 11:00: that hour, not 10:00.
	if got, want := breakdown(t, st, owner, T0.Add(time.Hour+10*time.Minute), now), "11:00 units captions.download backfill 20\n11:00 units videos.list  1\n11:00 units videos.update backfill 100\n"; got != want {
		t.Fatalf("Breakdown since 11:10:\n%s\nwant:\n%s", got, want)
	}
	// A refund by reservation ID alone knows no method or job: it is
	// subtracted under method "", so the hour's total stays exact.
	r7 := mustTake(t, l, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 7}})
	byID, err := quota.ParseReservationID(r7.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, byID); err != nil {
		t.Fatal(err)
	}
	if got, want := breakdown(t, st, owner, T0.Add(time.Hour), now), "11:00 units   -7\n11:00 units captions.download backfill 20\n11:00 units videos.list  8\n11:00 units videos.update backfill 100\n"; got != want {
		t.Fatalf("Breakdown after a refund by ID:\n%s\nwant:\n%s", got, want)
	}
	if got := breakdown(t, st, "another-owner", T0.Add(-24*time.Hour), now); got != "" {
		t.Fatalf("Breakdown of an owner that spent nothing:\n%s", got)
	}
	// A day later the window holds none of those hours.
	clock.Add(25 * time.Hour)
	if got := breakdown(t, st, owner, clock.Now().Add(-24*time.Hour), clock.Now()); got != "" {
		t.Fatalf("Breakdown a day later:\n%s", got)
	}
}

// crossings: MarkCrossing is set-if-absent per (api, owner, budget,
// percent) until the mark lapses.
func (s suite) crossings(t *testing.T) {
	ctx := context.Background()
	st := s.store(t)
	fp := "owner-1"
	mark := func(o, budget string, pct int, until, now time.Time) bool {
		t.Helper()
		first, err := st.MarkCrossing(ctx, &backend.CrossingMark{API: "api", Owner: o, Budget: budget, Percent: pct, Until: until, Now: now})
		if err != nil {
			t.Fatalf("MarkCrossing(%s %d%%): %v", budget, pct, err)
		}
		return first
	}
	end := T0.Add(14 * time.Hour) // the window's reset
	if !mark(fp, "units", 80, end, T0) {
		t.Fatal("first mark: first = false")
	}
	if mark(fp, "units", 80, end, T0.Add(time.Minute)) {
		t.Fatal("second mark in the same window: first = true")
	}
	if !mark(fp, "units", 95, end, T0.Add(time.Minute)) || !mark(fp, "search", 80, end, T0) || !mark("owner-2", "units", 80, end, T0) {
		t.Fatal("marks of another threshold, budget or owner are their own")
	}
	if mark(fp, "units", 80, end.Add(24*time.Hour), end.Add(-time.Microsecond)) {
		t.Fatal("mark just before it lapses: first = true")
	}
	if !mark(fp, "units", 80, end.Add(24*time.Hour), end) {
		t.Fatal("mark in the next window: first = false")
	}
	if mark(fp, "units", 80, end.Add(24*time.Hour), end.Add(time.Hour)) {
		t.Fatal("second mark in the next window: first = true")
	}
	for _, pct := range []int{0, 101} {
		if _, err := st.MarkCrossing(ctx, &backend.CrossingMark{API: "api", Owner: fp, Budget: "units", Percent: pct, Until: end, Now: T0}); !errors.Is(err, quota.ErrInvalid) {
			t.Fatalf("MarkCrossing(%d%%) = %v, want ErrInvalid", pct, err)
		}
	}
}
