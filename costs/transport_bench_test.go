package costs_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
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
}
