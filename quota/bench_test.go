package quota_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// BenchmarkMemoryTake measures one decision on the memory store, through the
// Limiter, at cost 1 and cost 100, serial and with 64 goroutines. The window
// is short (1ms, a few thousand entries) so the benchmark runs in steady
// state: every decision also expires entries as it appends one.
func BenchmarkMemoryTake(b *testing.B) {
	for _, cost := range []int64{1, 100} {
		for _, par := range []int{1, 64} {
			b.Run("cost="+strconv.FormatInt(cost, 10)+"/goroutines="+strconv.Itoa(par), func(b *testing.B) {
				l, err := quota.New(quota.NewMemoryStore(), "bench", []quota.Budget{{Name: "units", Limit: 1 << 40, Window: quota.Sliding(time.Millisecond)}})
				if err != nil {
					b.Fatal(err)
				}
				ch := quota.Units("units", cost)
				cred := quota.Credential{Secret: "bench-key"}
				ctx := context.Background()
				// Registering the credential is a one-time cost, not a
				// decision's (see run in rate_bench_test.go).
				if _, err := l.Take(ctx, cred, ch); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				if par == 1 {
					for b.Loop() {
						if _, err := l.Take(ctx, cred, ch); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.SetParallelism(max(1, par/runtimeProcs()))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := l.Take(ctx, cred, ch); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// BenchmarkMemoryOwnerLimitTake is BenchmarkMemoryTake's serial cost-1
// decision while 100 owners have limits of their own, the charged one
// among them: what a limit per owner adds to a decision (one map lookup).
func BenchmarkMemoryOwnerLimitTake(b *testing.B) {
	limits := map[string]map[string]int64{}
	for i := range 100 {
		limits["owner-"+strconv.Itoa(i)] = map[string]int64{"units": 1<<40 + int64(i)}
	}
	l, err := quota.New(quota.NewMemoryStore(), "bench", []quota.Budget{{Name: "units", Limit: 1 << 40, Window: quota.Sliding(time.Millisecond)}},
		quota.WithOwnerLimits(limits))
	if err != nil {
		b.Fatal(err)
	}
	ch := quota.Units("units", 1)
	cred := quota.Credential{Secret: "bench-key", Owner: "owner-7"}
	ctx := context.Background()
	r, err := l.Take(ctx, cred, ch)
	if err != nil {
		b.Fatal(err)
	}
	if r.Usage[0].Limit != 1<<40+7 {
		b.Fatalf("limit %d: the owner's limit is not in force", r.Usage[0].Limit)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := l.Take(ctx, cred, ch); err != nil {
			b.Fatal(err)
		}
	}
}
