package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// TestTakeNewLogsBesideKnownOnes: a charge of budgets some of which have a
// log and some not yet records each debit in its own log (the decision
// keeps the logs it loaded and those it creates side by side).
func TestTakeNewLogsBesideKnownOnes(t *testing.T) {
	st, _ := openTemp(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	budget := func(name string) quota.Budget {
		return quota.Budget{Name: name, Limit: 1000, Window: quota.Sliding(time.Hour)}
	}
	take := func(nonce string, at time.Time, costs map[string]int64, names ...string) {
		t.Helper()
		req := &backend.TakeRequest{API: "api", Owner: "o", Nonce: nonce, Now: at}
		for _, n := range names {
			req.Debits = append(req.Debits, backend.Debit{Budget: budget(n), Cost: costs[n]})
		}
		if res, err := st.Take(ctx, req); err != nil || !res.OK {
			t.Fatalf("Take(%v) = %+v, %v", names, res, err)
		}
	}
	costs := map[string]int64{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}
	take("n1", t0, costs, "b", "d")
	// New logs before, between and after the known ones.
	take("n2", t0.Add(time.Second), costs, "a", "b", "c", "d", "e")
	take("n3", t0.Add(2*time.Second), costs, "e", "a")
	want := map[string]int64{"a": 2, "b": 4, "c": 3, "d": 8, "e": 10}
	var bs []quota.Budget
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		bs = append(bs, budget(n))
	}
	us, err := st.Usage(ctx, &backend.UsageRequest{API: "api", Owner: "o", Budgets: bs, Now: t0.Add(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if u.Used != want[u.Budget] {
			t.Errorf("budget %s: Used = %d, want %d", u.Budget, u.Used, want[u.Budget])
		}
	}
}

// TestTakeWithDoneContext: a decision whose context is done fails with the
// context's error and records nothing, whether the context ends before its
// turn or during its transaction.
func TestTakeWithDoneContext(t *testing.T) {
	st, _ := openTemp(t)
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	// Both the gate and the done context are ready: either may win, so
	// try enough times to see both (1 in 2^40 to miss one).
	for i := range 40 {
		req := &backend.TakeRequest{API: "api", Owner: "o", Nonce: fmt.Sprint("n", i), Now: t0, Debits: []backend.Debit{{Budget: b, Cost: 1}}}
		if _, err := st.Take(done, req); !errors.Is(err, context.Canceled) || !errors.Is(err, quota.ErrStoreUnavailable) {
			t.Fatalf("Take with a done context = %v, want Canceled and ErrStoreUnavailable", err)
		}
	}
	us, err := st.Usage(context.Background(), &backend.UsageRequest{API: "api", Owner: "o", Budgets: []quota.Budget{b}, Now: t0})
	if err != nil || us[0].Used != 0 {
		t.Fatalf("Usage = %+v, %v; want nothing recorded", us, err)
	}
	// The store goes on deciding.
	req := &backend.TakeRequest{API: "api", Owner: "o", Nonce: "ok", Now: t0, Debits: []backend.Debit{{Budget: b, Cost: 1}}}
	if res, err := st.Take(context.Background(), req); err != nil || !res.OK || res.Usage[0].Used != 1 {
		t.Fatalf("Take after = %+v, %v", res, err)
	}
}

// TestTakeAllocations bounds the allocations of a decision (issue 13: a
// decision through database/sql made 165): the result, and the two stat
// calls of the identity check.
func TestTakeAllocations(t *testing.T) {
	st, _ := openTemp(t)
	ctx := context.Background()
	debits := []backend.Debit{{Budget: quota.Budget{Name: "units", Limit: quota.MaxLimit, Window: quota.Sliding(time.Hour)}, Cost: 1}}
	req := &backend.TakeRequest{API: "api", Owner: "o", Nonce: "n", Method: "m", Job: "j", Debits: debits}
	const most = 8
	if n := testing.AllocsPerRun(200, func() {
		if res, err := st.Take(ctx, req); err != nil || !res.OK {
			t.Fatal(res, err)
		}
	}); n > most {
		t.Fatalf("Take made %v allocations, want at most %d", n, most)
	}
}
