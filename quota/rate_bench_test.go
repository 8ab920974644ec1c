package quota_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/quotactl/quotactl/quota"
)

// BenchmarkVersusRate runs the memory store's Take through the Limiter and
// golang.org/x/time/rate's AllowN side by side in one run, on the same
// workload: cost 1, every call admitted, serial and with 64 goroutines.
// x/time/rate is the in-process reference a memory-store decision is held to
// (issue 13: at most 2x its time, at most one allocation). quota-allow is
// Limiter.Allow, the same decision without a Reservation: AllowN's
// counterpart.
func BenchmarkVersusRate(b *testing.B) {
	for _, par := range []int{1, 64} {
		// every call admitted: a limit no run reaches, a window that keeps
		// the log short
		admitting := func(b *testing.B) *quota.Limiter {
			l, err := quota.New(quota.NewMemoryStore(), "bench", []quota.Budget{{Name: "units", Limit: 1 << 40, Window: quota.Sliding(time.Millisecond)}})
			if err != nil {
				b.Fatal(err)
			}
			return l
		}
		ch := quota.Units("units", 1)
		cred := quota.Credential{Secret: "bench-key"}
		ctx := context.Background()
		b.Run("quota/goroutines="+strconv.Itoa(par), func(b *testing.B) {
			l := admitting(b)
			run(b, par, func() error {
				_, err := l.Take(ctx, cred, ch)
				return err
			})
		})
		b.Run("quota-allow/goroutines="+strconv.Itoa(par), func(b *testing.B) {
			// Allow: the same decision, no Reservation (x/time/rate's AllowN)
			l := admitting(b)
			run(b, par, func() error { return l.Allow(ctx, cred, ch) })
		})
		b.Run("quota-local-refusals-spent/goroutines="+strconv.Itoa(par), func(b *testing.B) {
			l, err := quota.New(quota.NewMemoryStore(), "bench", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Daily(time.UTC)}},
				quota.WithLocalRefusals(0))
			if err != nil {
				b.Fatal(err)
			}
			cred := quota.Credential{Secret: "bench-key"}
			ctx := context.Background()
			if _, err := l.Take(ctx, cred, quota.Units("units", 10)); err != nil {
				b.Fatal(err)
			}
			ch := quota.Units("units", 1)
			run(b, par, func() error {
				if _, err := l.Take(ctx, cred, ch); !errors.Is(err, quota.ErrExhausted) {
					return fmt.Errorf("take on a spent budget: %v", err)
				}
				return nil
			})
		})
		b.Run("x-time-rate/goroutines="+strconv.Itoa(par), func(b *testing.B) {
			lim := rate.NewLimiter(rate.Limit(1e15), 1<<40)
			run(b, par, func() error {
				if !lim.AllowN(time.Now(), 1) {
					b.Fatal("x/time/rate refused")
				}
				return nil
			})
		})
	}
}

// run times f, serially or on par goroutines. It calls f once before the
// clock starts: the first Take of a secret in a process derives its
// fingerprint (DefaultFingerprint, slow on purpose, then cached) and
// registers the credential in the store, once per credential, not per
// decision; in the run it would add tens of ns to every op of a short run.
func run(b *testing.B, par int, f func() error) {
	if err := f(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	runtime.GC() // the garbage a row before left is not collected in this one's time
	b.ResetTimer()
	if par == 1 {
		for b.Loop() {
			if err := f(); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(max(1, par/runtimeProcs()))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := f(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
