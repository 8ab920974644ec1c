package quota_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/storetest"
)

// TestOperatorOverridePrecedence: an operator's definition (quotactl budget
// set) is not undone by a program defining the same budget: the program's
// limiter applies it, leaves it in the catalog, and goes back to its own
// definition once the operator removes it.
func TestOperatorOverridePrecedence(t *testing.T) {
	ctx := context.Background()
	st := quota.NewMemoryStore()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return at }
	key := quota.Credential{Secret: "s", Label: "k"}
	if err := quota.SetOverride(ctx, st, "api", quota.Budget{Name: "units", Limit: 5, Window: quota.Sliding(time.Hour)}, at); err != nil {
		t.Fatal(err)
	}
	own := []quota.Budget{
		{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)},
		{Name: "other", Limit: 7, Window: quota.Sliding(time.Hour)},
	}
	l, err := quota.New(st, "api", own, quota.WithClock(clock), quota.WithOverrideRefresh(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := l.Take(ctx, key, quota.Units("units", 1)); err != nil {
			t.Fatalf("take %d: %v", i, err)
		}
	}
	_, err = l.Take(ctx, key, quota.Units("units", 1))
	var ee *quota.ExhaustedError
	if !errors.As(err, &ee) || ee.Limit != 5 {
		t.Fatalf("sixth take: %v; want refused by the operator's limit 5", err)
	}
	if _, err := l.Take(ctx, key, quota.Units("units", 6)); !errors.Is(err, quota.ErrCostExceedsLimit) {
		t.Fatalf("a cost over the operator's limit: %v; want ErrCostExceedsLimit", err)
	}
	apis, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]quota.Budget{}
	for _, b := range apis[0].Budgets {
		got[b.Name] = b
	}
	if got["units"].Limit != 5 || got["other"].Limit != 7 {
		t.Fatalf("catalog after the program's first take: %+v; want the operator's units (5) and the program's other (7)", apis[0].Budgets)
	}
	if bs := l.Budgets(); bs[0].Limit != 5 {
		t.Fatalf("Budgets() = %+v; want the definition in force", bs)
	}
	// The operator removes the override: the program's definition applies.
	if removed, err := quota.RemoveOverride(ctx, st, "api", "units"); err != nil || !removed {
		t.Fatalf("RemoveOverride = %v, %v", removed, err)
	}
	r, err := l.Take(ctx, key, quota.Units("units", 1))
	if err != nil || r.Usage[0].Limit != 100 || r.Usage[0].Used != 6 {
		t.Fatalf("after the override is removed: %v, %v; want limit 100, used 6", r, err)
	}
	// A limiter refreshing on its own schedule picks an override up later.
	l2, err := quota.New(st, "api", own, quota.WithClock(clock), quota.WithOverrideRefresh(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l2.Take(ctx, key, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	if err := quota.SetOverride(ctx, st, "api", quota.Budget{Name: "units", Limit: 3, Window: quota.Daily(time.UTC)}, at); err != nil {
		t.Fatal(err)
	}
	if r, err := l2.Take(ctx, key, quota.Units("units", 1)); err != nil || r.Usage[0].Limit != 100 {
		t.Fatalf("within the refresh interval: %v, %v; want the old definition still", r, err)
	}
	if _, err := l.Take(ctx, key, quota.Units("units", 1)); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("a limiter refreshing every call: %v; want refused by the new override (limit 3)", err)
	}
}

// flakyState is a memory store whose state reads fail as an unreachable
// store's would, counting them.
type flakyState struct {
	*quota.MemoryStore
	loads atomic.Int64
}

func (f *flakyState) LoadState(ctx context.Context, key string) ([]byte, error) {
	f.loads.Add(1)
	return nil, fmt.Errorf("%w: state read refused", quota.ErrStoreUnavailable)
}

// TestOverrideRefreshBacksOff: while the overrides cannot be read, the
// limiter tries again within a second, not on every decision (each would
// otherwise wait on a down store twice).
func TestOverrideRefreshBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &flakyState{MemoryStore: quota.NewMemoryStore()}
		l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}})
		if err != nil {
			t.Fatal(err)
		}
		key := quota.Credential{Secret: "s", Label: "k"}
		for i := range 10 {
			if _, err := l.Take(ctx, key, quota.Units("units", 1)); err != nil {
				t.Fatalf("take %d: %v", i, err)
			}
		}
		if n := st.loads.Load(); n != 1 {
			t.Fatalf("override reads in 10 decisions at one instant: %d, want 1", n)
		}
		<-time.After(time.Second) // synctest: the bubble's clock moves, no real wait
		if _, err := l.Take(ctx, key, quota.Units("units", 1)); err != nil {
			t.Fatal(err)
		}
		if n := st.loads.Load(); n != 2 {
			t.Fatalf("override reads a second later: %d, want 2", n)
		}
	})
}

// TestConcurrentOverrides: overrides set and removed at once by many
// goroutines all take effect (storetest.ConcurrentOverrides; the SQLite and
// Redis stores run it across connections).
func TestConcurrentOverrides(t *testing.T) {
	storetest.ConcurrentOverrides(t, []quota.Store{quota.NewMemoryStore()})
}

// TestOverrideUpdateWaitsWhileOthersProgress: an update queued behind many
// others (a burst of `quotactl budget set` from a deploy script, a slow
// store) waits as long as the lease keeps changing hands, however long that
// takes in all; it gives up only on one holder keeping the lease for twice
// its lifetime. It used to give up after a fixed 10 s of waiting.
func TestOverrideUpdateWaitsWhileOthersProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := quota.NewMemoryStore()
		key := "quota/overrides/api"
		take := func(holder string) backend.StateLease {
			l, err := st.AcquireLease(ctx, &backend.StateLeaseRequest{Key: key, Holder: holder, TTL: 5 * time.Second})
			if err != nil {
				t.Fatalf("%s: %v", holder, err)
			}
			return l
		}
		// six updates, one after another, each holding the lease for 4 s:
		// 24 s in all, every hand-over with no instant between them
		l := take("update 0")
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 1; i <= 6; i++ {
				<-time.After(4 * time.Second) // synctest: the bubble's clock moves, no real wait
				if err := st.ReleaseLease(ctx, &backend.StateLeaseRequest{Key: key, Token: l.Token}); err != nil {
					t.Error(err)
				}
				if i < 6 {
					l = take(fmt.Sprint("update ", i))
				}
			}
		}()
		start := time.Now()
		b := quota.Budget{Name: "units", Limit: 5, Window: quota.Daily(time.UTC)}
		err := quota.SetOverride(ctx, st, "api", b, start)
		waited := time.Since(start)
		<-done
		if err != nil {
			t.Fatalf("an update behind six others that made progress: %v", err)
		}
		if waited < 24*time.Second {
			t.Fatalf("the update went through after %v, while others held the lease", waited)
		}

		// one holder that never lets go (a process paused mid-update, its
		// lease renewed by a bug): the update gives up, naming the holder
		stuck := take("stuck")
		renewed := make(chan struct{})
		go func() {
			defer close(renewed)
			for range 5 {
				<-time.After(4 * time.Second)
				if _, err := st.RenewLease(ctx, &backend.StateLeaseRequest{Key: key, Token: stuck.Token, TTL: 5 * time.Second}); err != nil {
					t.Error(err)
				}
			}
		}()
		err = quota.SetOverride(ctx, st, "api", b, time.Now())
		<-renewed
		if !errors.Is(err, backend.ErrLeaseHeld) {
			t.Fatalf("an update behind a holder that never lets go: %v; want backend.ErrLeaseHeld", err)
		}
	})
}

// TestOverrideReachesRunningLimiterWithinASecond: an operator lowering a
// limit (`quotactl budget set`, the upstream lowered it) is obeyed by a
// running limiter of another process within DefaultOverrideRefresh (1 s):
// it reloaded the overrides only every 30 s, and admitted to the old limit
// until then.
func TestOverrideReachesRunningLimiterWithinASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := quota.NewMemoryStore()
		key := quota.Credential{Secret: "s", Label: "k"}
		l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Take(ctx, key, quota.Units("units", 10)); err != nil {
			t.Fatal(err)
		}
		if err := quota.SetOverride(ctx, st, "api", quota.Budget{Name: "units", Limit: 12, Window: quota.Daily(time.UTC)}, time.Now()); err != nil {
			t.Fatal(err)
		}
		<-time.After(time.Second) // synctest: the bubble's clock moves, no real wait
		admitted := int64(10)
		for range 10 {
			if _, err := l.Take(ctx, key, quota.Units("units", 1)); err == nil {
				admitted++
			} else if !errors.Is(err, quota.ErrExhausted) {
				t.Fatal(err)
			}
		}
		if admitted != 12 {
			t.Fatalf("1s after the limit was lowered to 12, the running limiter had admitted %d", admitted)
		}
	})
}
