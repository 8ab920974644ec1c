package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// countingStore counts the decisions that reach the store.
type countingStore struct {
	quota.Store
	takes atomic.Int64
}

func (c *countingStore) Take(ctx context.Context, req *backend.TakeRequest) (*backend.TakeResult, error) {
	c.takes.Add(1)
	return c.Store.Take(ctx, req)
}

// counting wraps st in a countingStore that keeps st's state methods
// (operator overrides live there), and returns both.
func counting(st quota.Store) (quota.Store, *countingStore) {
	cs := &countingStore{Store: st}
	if ss, ok := st.(quota.StateStore); ok {
		return struct {
			*countingStore
			quota.StateStore
		}{cs, ss}, cs
	}
	return cs, cs
}

// localRefusals: two limiters ("processes") over one store. A, with local
// refusals, answers a standing refusal with no store call and an exact
// RetryAfter; what B gives back reaches A within the bound; A's own refund
// is seen at once; 64 goroutines hammering a spent budget make at most one
// store call per bound.
func (s suite) localRefusals(t *testing.T) {
	ctx := context.Background()
	st := s.store(t)
	counted, cs := counting(st)
	clock := NewClock(T0)
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	const bound = time.Second
	// (A's override refresh is an hour: what reaches A within the bound
	// below comes through the refusal's own check)
	a, err := quota.New(counted, "api", []quota.Budget{b}, quota.WithClock(clock.Now), quota.WithLocalRefusals(bound),
		quota.WithOverrideRefresh(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	other := s.limiter(t, st, clock, b)
	first := mustTake(t, a, key, quota.Units("units", 4))
	clock.Add(time.Minute)
	mustTake(t, a, key, quota.Units("units", 6))
	clock.Add(time.Minute)
	ee := mustRefuse(t, a, key, quota.Units("units", 2))
	if want := T0.Add(time.Hour); !ee.RetryAt.Equal(want) || ee.RetryAfter != want.Sub(clock.Now()) {
		t.Fatalf("store refusal: RetryAt %v RetryAfter %v", ee.RetryAt, ee.RetryAfter)
	}
	calls := cs.takes.Load()

	// Standing refusal: no store call, exact RetryAfter, until the bound.
	for i := range 10 {
		clock.Add(bound / 20)
		ee := mustRefuse(t, a, key, quota.Units("units", 2))
		if want := T0.Add(time.Hour); !ee.RetryAt.Equal(want) || ee.RetryAfter != want.Sub(clock.Now()) || ee.Budget != "units" || ee.Used != 10 {
			t.Fatalf("local refusal %d at %v: %+v", i, clock.Now(), ee)
		}
	}
	if n := cs.takes.Load() - calls; n != 0 {
		t.Fatalf("local refusals made %d store calls, want 0", n)
	}
	// Another charge (cost 1) is not the refused one: it goes to the store.
	mustRefuse(t, a, key, quota.Units("units", 1))
	if n := cs.takes.Load() - calls; n != 1 {
		t.Fatalf("a different charge made %d store calls, want 1", n)
	}

	// 64 goroutines on the spent budget: still no store call.
	calls = cs.takes.Load()
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := a.Take(ctx, key, quota.Units("units", 2)); !errors.Is(err, quota.ErrExhausted) {
					t.Errorf("Take on a spent budget = %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := cs.takes.Load() - calls; n != 0 {
		t.Fatalf("64 goroutines made %d store calls on a standing refusal, want 0", n)
	}

	// B refunds the first charge: A sees it within the bound, and refuses
	// wrongfully for no longer.
	if err := other.Refund(ctx, first); err != nil {
		t.Fatalf("Refund in the other limiter: %v", err)
	}
	refundAt := clock.Now()
	for {
		_, err := a.Take(ctx, key, quota.Units("units", 2))
		if err == nil {
			break
		}
		if !errors.Is(err, quota.ErrExhausted) {
			t.Fatal(err)
		}
		if clock.Now().Sub(refundAt) > bound {
			t.Fatalf("still refused %v after another process's refund; bound %v", clock.Now().Sub(refundAt), bound)
		}
		clock.Add(bound / 10)
	}
	if clock.Now().Sub(refundAt) == 0 {
		t.Fatalf("the refund was seen at once: the refusal was not answered locally")
	}

	// A's own refund is seen at once.
	mine := mustTake(t, a, key, quota.Units("units", 2)) // used 10 again
	mustRefuse(t, a, key, quota.Units("units", 2))       // a standing refusal
	if err := a.Refund(ctx, mine); err != nil {
		t.Fatalf("Refund: %v", err)
	}
	mustTake(t, a, key, quota.Units("units", 2))

	// B's adjust reaches A within the bound too.
	ee = mustRefuse(t, a, key, quota.Units("units", 2))
	if err := other.Adjust(ctx, key, "units", 0); err != nil {
		t.Fatalf("Adjust: %v", err)
	}
	adjustAt := clock.Now()
	for {
		if _, err := a.Take(ctx, key, quota.Units("units", 2)); err == nil {
			break
		}
		if clock.Now().Sub(adjustAt) > bound {
			t.Fatalf("still refused %v after another process's adjust; bound %v", clock.Now().Sub(adjustAt), bound)
		}
		clock.Add(bound / 4)
	}

	// Capacity that comes back at RetryAt is taken at RetryAt, not later.
	mustTake(t, a, key, quota.Units("units", 8)) // used 10
	ee = mustRefuse(t, a, key, quota.Units("units", 2))
	calls = cs.takes.Load()
	clock.Set(ee.RetryAt.Add(-time.Microsecond))
	mustRefuse(t, a, key, quota.Units("units", 2))
	clock.Set(ee.RetryAt)
	mustTake(t, a, key, quota.Units("units", 2))
	if n := cs.takes.Load() - calls; n < 1 {
		t.Fatalf("admission at RetryAt made %d store calls", n)
	}

	// An operator raising the limit (quotactl budget set) reaches A within
	// the bound too, not at A's next override refresh (an hour away).
	mustTake(t, a, key, quota.Units("units", 8)) // used 10
	mustRefuse(t, a, key, quota.Units("units", 2))
	raised := b
	raised.Limit = 20
	if err := quota.SetOverride(ctx, st, "api", raised, clock.Now()); err != nil {
		t.Fatalf("SetOverride: %v", err)
	}
	setAt := clock.Now()
	for {
		if _, err := a.Take(ctx, key, quota.Units("units", 2)); err == nil {
			break
		} else if !errors.Is(err, quota.ErrExhausted) {
			t.Fatal(err)
		}
		if clock.Now().Sub(setAt) > bound {
			t.Fatalf("still refused %v after the limit was raised elsewhere; bound %v", clock.Now().Sub(setAt), bound)
		}
		clock.Add(bound / 4)
	}
}
