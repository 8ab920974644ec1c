package quota_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// TestMemoryConcurrentTakesRefund: 32 goroutines x 3,000 Take(1) on the host
// clock, then every reservation refunded. Reading the clock before taking
// the lock recorded entries out of time order, and Refund's search missed
// 248 to 1,589 of them.
func TestMemoryConcurrentTakesRefund(t *testing.T) {
	ctx := context.Background()
	l, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{{Name: "units", Limit: 1 << 40, Window: quota.Sliding(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "s", Label: "k"}
	const workers, each = 32, 3000
	res := make([][]*quota.Reservation, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				r, err := l.Take(ctx, key, quota.Units("units", 1))
				if err != nil {
					t.Error(err)
					return
				}
				res[w] = append(res[w], r)
			}
		}()
	}
	wg.Wait()
	es, err := l.Entries(ctx, key, "units")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(es); i++ {
		if es[i].At.Before(es[i-1].At) {
			t.Fatalf("Entries not oldest first: %v before %v", es[i-1].At, es[i].At)
		}
	}
	failed := 0
	for _, rs := range res {
		for _, r := range rs {
			if err := l.Refund(ctx, r); err != nil {
				failed++
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d refunds of live reservations failed", failed, workers*each)
	}
}

func TestNewRefusesWhatStoresCannotKeep(t *testing.T) {
	st := quota.NewMemoryStore()
	for _, tc := range []struct {
		b    quota.Budget
		want string
	}{
		{quota.Budget{Name: "u", Limit: 10, Window: quota.Sliding(time.Hour / 7)}, "whole number of microseconds"},
		{quota.Budget{Name: "u", Limit: 10, Window: quota.Sliding(1500 * time.Nanosecond)}, "whole number of microseconds"},
		{quota.Budget{Name: "u", Limit: quota.MaxLimit + 1, Window: quota.Sliding(time.Hour)}, "at most 9007199254740991"},
	} {
		if _, err := quota.New(st, "api", []quota.Budget{tc.b}); !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v; want ErrInvalid saying %q", tc.b, err, tc.want)
		}
	}
	if _, err := quota.ParseWindow("sliding:1500ns"); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("ParseWindow(1500ns) = %v, want ErrInvalid", err)
	}
	if _, err := quota.New(st, "api", []quota.Budget{{Name: "u", Limit: quota.MaxLimit, Window: quota.Sliding(time.Hour / 8)}}); err != nil {
		t.Errorf("New with MaxLimit and a whole-µs window: %v", err)
	}
}

// TestNilContext: every Limiter entry point taking a context refuses nil
// with ErrInvalid instead of panicking.
func TestNilContext(t *testing.T) {
	l, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "s"}
	var nilCtx context.Context
	calls := map[string]func() error{
		"Take":     func() error { _, err := l.Take(nilCtx, key, quota.Units("units", 1)); return err },
		"Refund":   func() error { return l.Refund(nilCtx, &quota.Reservation{API: "api"}) },
		"Exhaust":  func() error { return l.Exhaust(nilCtx, key, "units", time.Now()) },
		"Adjust":   func() error { return l.Adjust(nilCtx, key, "units", 1) },
		"Status":   func() error { _, err := l.Status(nilCtx, key); return err },
		"StatusOf": func() error { _, err := l.StatusOf(nilCtx, "fp"); return err },
		"Entries":  func() error { _, err := l.Entries(nilCtx, key, "units"); return err },
		"List":     func() error { _, err := l.List(nilCtx); return err },
		"Load":     func() error { _, err := quota.Load(nilCtx, quota.NewMemoryStore(), "api"); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), "nil context") {
			t.Errorf("%s(nil ctx) = %v; want ErrInvalid naming the nil context", name, err)
		}
	}
}

// TestDailyMidnightSkipped: where DST skips midnight, the day starts at the
// jump, not at 23:00 of the day before.
func TestDailyMidnightSkipped(t *testing.T) {
	scl, err := time.LoadLocation("America/Santiago")
	if err != nil {
		t.Fatal(err)
	}
	w := quota.Daily(scl)
	jump := time.Date(2026, 9, 6, 1, 0, 0, 0, scl)
	eve := time.Date(2026, 9, 5, 23, 30, 0, 0, scl)
	if got := w.NextReset(eve); !got.Equal(jump) {
		t.Errorf("NextReset(%v) = %v, want %v", eve, got, jump)
	}
	if got := w.Start(jump.Add(time.Hour)); !got.Equal(jump) {
		t.Errorf("Start on the short day = %v, want %v", got, jump)
	}
	if got := w.Start(eve); !got.Equal(time.Date(2026, 9, 5, 0, 0, 0, 0, scl)) {
		t.Errorf("Start(%v) = %v", eve, got)
	}
	if b := w.Boundaries(eve); !b[2].Equal(jump) {
		t.Errorf("Boundaries(%v) = %v; the third must be %v", eve, b, jump)
	}
}
