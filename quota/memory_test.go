package quota_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) quota.Store { return quota.NewMemoryStore() })
}

// TestMemoryStoreNonces: a Limiter's decision on the MemoryStore records
// the nonce the store makes; the reservation's ID names it, as Entries
// does, and a refund by that ID (in another process, say) finds the entry
// by it, and by nothing but it.
func TestMemoryStoreNonces(t *testing.T) {
	ctx := context.Background()
	st := quota.NewMemoryStore()
	budgets := []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}}
	l, err := quota.New(st, "api", budgets)
	if err != nil {
		t.Fatal(err)
	}
	other, err := quota.New(st, "api", budgets)
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "s"}
	var ids []string
	for _, lim := range []*quota.Limiter{l, other, l} {
		r, err := lim.Take(ctx, cred, quota.Units("units", 1))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID())
	}
	es, err := l.Entries(ctx, cred, "units")
	if err != nil || len(es) != 3 {
		t.Fatalf("entries: %v, %v; want 3", es, err)
	}
	seen := map[string]bool{}
	for i, e := range es {
		if _, nonce, _ := strings.Cut(ids[i], "."); e.Nonce != nonce || seen[nonce] {
			t.Fatalf("entry %d nonce %q; want %q (ID %s), unique", i, e.Nonce, nonce, ids[i])
		}
		seen[e.Nonce] = true
	}
	// A nonce naming the same number another way (a leading zero) is
	// another nonce.
	api, rest, _ := strings.Cut(ids[1], "/")
	owner, rest, _ := strings.Cut(rest, "/")
	ts, nonce, _ := strings.Cut(rest, ".")
	padded, err := quota.ParseReservationID(api + "/" + owner + "/" + ts + "." + nonce[:8] + "0" + nonce[8:])
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Refund(ctx, padded); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("refund by a padded nonce: %v; want ErrNotFound", err)
	}
	byID, err := quota.ParseReservationID(ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, byID); err != nil {
		t.Fatalf("refund by ID: %v", err)
	}
	if err := l.Refund(ctx, byID); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("second refund by ID: %v; want ErrNotFound", err)
	}
	if us, err := l.Status(ctx, cred); err != nil || us[0].Used != 2 {
		t.Fatalf("status after the refund: %v, %v; want 2 used", us, err)
	}
}

// TestMemoryLeasesSeeChanges: another Limiter's Adjust and Exhaust on the
// same memory store reach an open lease within CheckEvery.
func TestMemoryLeasesSeeChanges(t *testing.T) {
	st := quota.NewMemoryStore()
	storetest.LeasesSeeChanges(t, st, st)
}

// TestMemoryTakeAllocations: a Take on the MemoryStore makes one
// allocation, the Reservation it returns with its usage (issue 13). The
// log's ring doubling as it fills is a few allocations in a thousand
// decisions, under one per decision.
func TestMemoryTakeAllocations(t *testing.T) {
	ctx := context.Background()
	l, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{{Name: "units", Limit: quota.MaxLimit, Window: quota.Sliding(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	cred, ch := quota.Credential{Secret: "s"}, quota.Units("units", 1)
	if _, err := l.Take(ctx, cred, ch); err != nil { // registers the credential
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := l.Take(ctx, cred, ch); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Fatalf("Take made %v allocations, want at most 1", n)
	}
}

// TestMemoryAllowAllocations: Allow on the MemoryStore, an admission
// without a Reservation, makes no allocation (issue 13: x/time/rate's
// AllowN makes none); the log's ring doubling as it fills is a few in a
// thousand decisions.
func TestMemoryAllowAllocations(t *testing.T) {
	ctx := context.Background()
	l, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{{Name: "units", Limit: quota.MaxLimit, Window: quota.Sliding(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	cred, ch := quota.Credential{Secret: "s"}, quota.Units("units", 1)
	if err := l.Allow(ctx, cred, ch); err != nil { // registers the credential
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if err := l.Allow(ctx, cred, ch); err != nil {
			t.Fatal(err)
		}
	}); n >= 0.1 {
		t.Fatalf("Allow made %v allocations per admission, want none", n)
	}
	us, err := l.Status(ctx, cred)
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Used != 1002 { // AllocsPerRun runs it once more to warm up
		t.Fatalf("the store counts %d units after 1002 admissions", us[0].Used)
	}
}

// TestAllowDecidesAsTake: Allow and Take, on two stores driven through the
// same random charges on the same clock, admit and refuse alike (the same
// budget, RetryAfter and usage in each refusal), and leave the same usage
// after every step: Allow saves the Reservation, nothing else.
func TestAllowDecidesAsTake(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 23, 50, 0, 0, time.UTC) // a daily reset ahead
	clock := quota.WithClock(func() time.Time { return now })
	budgets := []quota.Budget{
		{Name: "minute", Limit: 50, Window: quota.Sliding(time.Minute)},
		{Name: "day", Limit: 400, Window: quota.Daily(time.UTC)},
	}
	take, err := quota.New(quota.NewMemoryStore(), "api", budgets, clock)
	if err != nil {
		t.Fatal(err)
	}
	allow, err := quota.New(quota.NewMemoryStore(), "api", budgets, clock)
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "s"}
	rng := rand.New(rand.NewPCG(1, 2))
	var admitted, refused int
	for step := range 3000 {
		units := map[string]int64{}
		switch rng.IntN(3) {
		case 0:
			units["minute"] = 1 + rng.Int64N(12)
		case 1:
			units["day"] = 1 + rng.Int64N(12)
		default:
			units["minute"], units["day"] = 1+rng.Int64N(12), 1+rng.Int64N(12)
		}
		ch := quota.Charge{Method: "m", Units: units}
		_, errT := take.Take(ctx, cred, ch)
		errA := allow.Allow(ctx, cred, ch)
		var et, ea *quota.ExhaustedError
		switch {
		case errT == nil && errA == nil:
			admitted++
		case errors.As(errT, &et) && errors.As(errA, &ea):
			refused++
			if et.Budget != ea.Budget || et.RetryAfter != ea.RetryAfter || et.Used != ea.Used || et.Limit != ea.Limit || et.Cost != ea.Cost {
				t.Fatalf("step %d: Take refused %+v, Allow %+v", step, et, ea)
			}
		default:
			t.Fatalf("step %d: Take %v, Allow %v", step, errT, errA)
		}
		ut, err := take.Status(ctx, cred)
		if err != nil {
			t.Fatal(err)
		}
		ua, err := allow.Status(ctx, cred)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ut {
			if ut[i].Used != ua[i].Used || !ut[i].Reset.Equal(ua[i].Reset) {
				t.Fatalf("step %d, %s: Take's store %+v, Allow's %+v", step, ut[i].Budget, ut[i], ua[i])
			}
		}
		now = now.Add(time.Duration(rng.Int64N(int64(2 * time.Second))))
	}
	if admitted < 500 || refused < 500 {
		t.Fatalf("%d admitted, %d refused: too few to mean much", admitted, refused)
	}
}

// TestSharedOwnerLimits: limits per owner recorded through one handle of
// the memory store decide through two limiters (storetest.SharedOwnerLimits).
func TestSharedOwnerLimits(t *testing.T) {
	st := quota.NewMemoryStore()
	storetest.SharedOwnerLimits(t, st, st)
}
