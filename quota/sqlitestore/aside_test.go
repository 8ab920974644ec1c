package sqlitestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// TestAdjustedDailyLogOutlivesItsDay: a daily log whose last write is an
// adjust keeps that usage DailyKeep, as an admission's would, so that the
// budget redefined in another zone still counts it. Before, the adjust
// made the log idle at its reset: the sweep dropped it, and a Tokyo budget
// adjusted to 81 of 100 at 12:58 UTC, redefined in Los Angeles (whose day
// still held 12:58) the next morning, admitted 20 more.
func TestAdjustedDailyLogOutlivesItsDay(t *testing.T) {
	ctx := context.Background()
	st, _ := openTemp(t, sqlitestore.WithSweepEvery(1))
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Daily(tokyo)}
	adj := time.Date(2026, 11, 23, 12, 58, 0, 0, time.UTC) // Tokyo resets at 15:00 UTC
	if err := st.Adjust(ctx, &backend.AdjustRequest{API: "api", Owner: "o", Budget: b, Used: 81, Nonce: "adj", Now: adj}); err != nil {
		t.Fatal(err)
	}
	// decisions of another owner after the Tokyo reset run the sweep
	later := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC) // Los Angeles: still Nov 23
	for i := range 3 {
		req := &backend.TakeRequest{API: "api", Owner: "x", Nonce: "x", Now: later.Add(time.Duration(i) * time.Minute), Debits: []backend.Debit{{Budget: b, Cost: 1}}}
		if _, err := st.Take(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	b.Window = quota.Daily(la)
	req := &backend.TakeRequest{API: "api", Owner: "o", Nonce: "n", Now: later.Add(time.Hour), Debits: []backend.Debit{{Budget: b, Cost: 20}}}
	res, err := st.Take(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Usage[0].Used != 81 {
		t.Fatalf("in Los Angeles the next morning: ok %v, used %d; want refused with the adjust's 81 counted", res.OK, res.Usage[0].Used)
	}
}
