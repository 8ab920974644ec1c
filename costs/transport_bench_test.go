package costs_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// BenchmarkTransportRedis measures the metered transport on the Redis store
// (it lives here, not in package quota, so that quota's tests do not pull in
// go-redis): a bare loopback GET, one Limiter.Take on Redis (the store round
// trip), and the same GET metered. The meter's budget is one store round
// trip plus 50µs: metered - bare <= take + 50µs. Redis comes from
// internal/redistest ($REDIS_URL, else redis-server on PATH, else
// miniredis).
func BenchmarkTransportRedis(b *testing.B) {
	table, err := costs.New(costs.Spec{
		API:     "youtube",
		Budgets: []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Sliding(time.Minute)}},
		Methods: []costs.Method{{Name: "videos.list", Routes: []string{"GET /youtube/v3/videos"}, Cost: map[string]int64{"units": 1}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"youtube#videoListResponse","items":[]}`)
	}))
	defer srv.Close()
	url := srv.URL + "/youtube/v3/videos?part=snippet&chart=mostPopular&key=bench-key"
	newLimiter := func(b *testing.B) *quota.Limiter {
		store := redisstore.New(redistest.Client(b), redisstore.WithPrefix(redistest.Prefix(b)))
		lim, err := quota.New(store, table.API, table.Budgets)
		if err != nil {
			b.Fatal(err)
		}
		return lim
	}
	get := func(b *testing.B, client *http.Client) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := client.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("bare", func(b *testing.B) {
		base := http.DefaultTransport.(*http.Transport).Clone()
		defer base.CloseIdleConnections()
		get(b, &http.Client{Transport: base})
	})
	b.Run("take", func(b *testing.B) {
		lim := newLimiter(b)
		ch, _ := table.Charge("videos.list")
		cred := quota.Credential{Secret: "bench-key"}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := lim.Take(ctx, cred, ch); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("metered", func(b *testing.B) {
		base := http.DefaultTransport.(*http.Transport).Clone()
		defer base.CloseIdleConnections()
		get(b, &http.Client{Transport: quota.NewTransport(newLimiter(b), table, quota.WithBase(base))})
	})
	// Interleaved: each iteration times a bare GET, a metered GET and a
	// Take, and reports the medians of metered-bare (added-µs/op) and of the
	// Take (take-µs/op); a loaded host disturbs them less than separate runs.
	b.Run("interleaved", func(b *testing.B) {
		lim := newLimiter(b)
		bareBase := http.DefaultTransport.(*http.Transport).Clone()
		meteredBase := http.DefaultTransport.(*http.Transport).Clone()
		defer bareBase.CloseIdleConnections()
		defer meteredBase.CloseIdleConnections()
		bare := &http.Client{Transport: bareBase}
		metered := &http.Client{Transport: quota.NewTransport(lim, table, quota.WithBase(meteredBase))}
		ch, _ := table.Charge("videos.list")
		cred := quota.Credential{Secret: "bench-key"}
		ctx := context.Background()
		timed := func(c *http.Client) time.Duration {
			start := time.Now()
			resp, err := c.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return time.Since(start)
		}
		var added, take []float64
		for i := 0; b.Loop(); i++ {
			var d time.Duration
			if i%2 == 0 {
				d = -timed(bare) + timed(metered)
			} else {
				d = timed(metered) - timed(bare)
			}
			start := time.Now()
			if _, err := lim.Take(ctx, cred, ch); err != nil {
				b.Fatal(err)
			}
			added = append(added, float64(d.Nanoseconds())/1e3)
			take = append(take, float64(time.Since(start).Nanoseconds())/1e3)
		}
		b.ReportMetric(median(added), "added-µs/op")
		b.ReportMetric(median(take), "take-µs/op")
	})
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	return xs[len(xs)/2]
}
