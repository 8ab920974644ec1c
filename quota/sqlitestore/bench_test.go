package sqlitestore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// benchLimiter returns a limiter over a fresh file with a budget the
// benchmark never exhausts, on the host clock (the store's own).
func benchLimiter(b *testing.B) *quota.Limiter {
	b.Helper()
	st, _ := openTemp(b)
	l, err := quota.New(st, "bench", []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Sliding(24 * time.Hour)}})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkTake is one process making decisions one after another.
func BenchmarkTake(b *testing.B) {
	l := benchLimiter(b)
	ctx := context.Background()
	key := quota.Credential{Secret: "bench-key"}
	ch := quota.Units("units", 7)
	for b.Loop() {
		if _, err := l.Take(ctx, key, ch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkTakeParallel is one process making decisions from GOMAXPROCS
// goroutines (-cpu to vary), for a few credentials.
func BenchmarkTakeParallel(b *testing.B) {
	l := benchLimiter(b)
	ctx := context.Background()
	ch := quota.Units("units", 7)
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := quota.Credential{Secret: fmt.Sprint("bench-key-", n.Add(1))}
		for pb.Next() {
			if _, err := l.Take(ctx, key, ch); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkStoreTake is BenchmarkTake without the Limiter: Store.Take
// called directly, so that the store's own share of a decision's time and
// allocations shows apart from the core's.
func BenchmarkStoreTake(b *testing.B) {
	st, _ := openTemp(b)
	ctx := context.Background()
	debits := []backend.Debit{{Budget: quota.Budget{Name: "units", Limit: 1 << 50, Window: quota.Sliding(24 * time.Hour)}, Cost: 7}}
	// Nonces made before the loop, so that making them is not measured; a
	// nonce repeats only after 4096 decisions, which no one refunds here.
	nonces := make([]string, 4096)
	for i := range nonces {
		nonces[i] = fmt.Sprint("n", i)
	}
	req := &backend.TakeRequest{API: "bench", Owner: "bench-owner", Debits: debits}
	i := 0
	for b.Loop() {
		req.Nonce = nonces[i%len(nonces)]
		i++
		res, err := st.Take(ctx, req)
		if err != nil || !res.OK {
			b.Fatal(res, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
