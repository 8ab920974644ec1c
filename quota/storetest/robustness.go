package storetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

func (s suite) badInput(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	l := s.limiter(t, st, clock, quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)})
	mustTake(t, l, key, quota.Units("units", 3))
	for _, tc := range []struct {
		name string
		cred quota.Credential
		ch   quota.Charge
		want error
	}{
		{"zero cost", key, quota.Units("units", 0), quota.ErrInvalid},
		{"negative cost", key, quota.Units("units", -5), quota.ErrInvalid},
		{"unknown budget", key, quota.Units("nope", 1), quota.ErrInvalid},
		{"no budget", key, quota.Charge{Method: "x"}, quota.ErrInvalid},
		{"empty credential", quota.Credential{}, quota.Units("units", 1), quota.ErrInvalid},
		{"over the limit", key, quota.Units("units", 11), quota.ErrCostExceedsLimit},
	} {
		_, err := l.Take(ctx, tc.cred, tc.ch)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := used(t, l, key, "units"); got != 3 {
		t.Fatalf("bad input changed usage: %d, want 3", got)
	}
	for _, tc := range []struct {
		name    string
		api     string
		budgets []quota.Budget
	}{
		{"limit 0", "a", []quota.Budget{{Name: "u", Limit: 0, Window: quota.Sliding(time.Hour)}}},
		{"zero window", "a", []quota.Budget{{Name: "u", Limit: 1}}},
		{"zero duration", "a", []quota.Budget{{Name: "u", Limit: 1, Window: quota.Sliding(0)}}},
		{"nil zone", "a", []quota.Budget{{Name: "u", Limit: 1, Window: quota.Daily(nil)}}},
		{"duplicate", "a", []quota.Budget{{Name: "u", Limit: 1, Window: quota.Sliding(time.Hour)}, {Name: "u", Limit: 2, Window: quota.Sliding(time.Hour)}}},
		{"bad budget name", "a", []quota.Budget{{Name: "a/b", Limit: 1, Window: quota.Sliding(time.Hour)}}},
		{"bad api name", "x y", []quota.Budget{{Name: "u", Limit: 1, Window: quota.Sliding(time.Hour)}}},
		{"no budgets", "a", nil},
	} {
		if _, err := quota.New(st, tc.api, tc.budgets); !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("New with %s: err = %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, err := quota.ParseWindow("daily:Mars/Olympus_Mons"); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("unknown zone: %v", err)
	}
}

// concurrency: many goroutines with random costs at one instant. Accepted
// units never pass the limit, and no charge is refused while the budget
// could pay it (used only grows, so a refusal of cost c is right only if
// c > limit - final used).
func (s suite) concurrency(t *testing.T) {
	clock := NewClock(T0)
	st := s.store(t)
	const limit = 5000
	l := s.limiter(t, st, clock,
		quota.Budget{Name: "units", Limit: limit, Window: quota.Sliding(time.Hour)},
		quota.Budget{Name: "calls", Limit: 1000, Window: quota.Sliding(time.Hour)})
	creds := []quota.Credential{key, {Secret: "k2"}}
	var accepted [2]atomic.Int64
	var mu sync.Mutex
	refused := map[int][]int64{}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 40 {
				ci := g % 2
				cost := rng.Int64N(100) + 1
				_, err := l.Take(context.Background(), creds[ci], quota.Charge{Units: map[string]int64{"units": cost, "calls": 1}})
				switch {
				case err == nil:
					accepted[ci].Add(cost)
				case errors.Is(err, quota.ErrExhausted):
					mu.Lock()
					refused[ci] = append(refused[ci], cost)
					mu.Unlock()
				default:
					t.Errorf("Take: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for ci, c := range creds {
		u := used(t, l, c, "units")
		if u != accepted[ci].Load() || u > limit {
			t.Fatalf("credential %d: store says used %d, callers accepted %d, limit %d", ci, u, accepted[ci].Load(), limit)
		}
		if len(refused[ci]) == 0 {
			t.Fatalf("credential %d: nothing refused; the test did not reach the limit", ci)
		}
		for _, cost := range refused[ci] {
			if cost <= limit-u {
				t.Fatalf("credential %d: refused cost %d while %d units were free at the end", ci, cost, limit-u)
			}
		}
	}
}
