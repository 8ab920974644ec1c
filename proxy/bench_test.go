package proxy_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/proxy"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// BenchmarkProxyAdded measures the latency the proxy adds over calling the
// upstream directly: the same b.N calls of a trivial upstream, first
// direct, then through the proxy, by 1 and 64 concurrent clients, over the
// memory store and Redis. It reports p50 and p99 of each and what the
// proxy adds (µs). Run: go test ./proxy -run '^$' -bench ProxyAdded -benchtime 4000x
func BenchmarkProxyAdded(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"items":[{"id":"a"}]}`)
	}))
	defer up.Close()
	table, err := costs.New(costs.Spec{
		API:     "bench",
		Budgets: []quota.Budget{{Name: "units", Limit: 1 << 40, Window: quota.Sliding(time.Hour)}},
		Methods: []costs.Method{{Name: "items.list", Routes: []string{"GET /v1/items"}, Cost: map[string]int64{"units": 1}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	stores := map[string]func(b *testing.B) quota.Store{
		"memory": func(*testing.B) quota.Store { return quota.NewMemoryStore() },
		"redis": func(b *testing.B) quota.Store {
			return redisstore.New(redistest.Client(b), redisstore.WithPrefix(redistest.Prefix(b)))
		},
	}
	for _, store := range []string{"memory", "redis"} {
		for _, clients := range []int{1, 64} {
			b.Run(fmt.Sprintf("store=%s/clients=%d", store, clients), func(b *testing.B) {
				lim, err := quota.New(stores[store](b), table.API, table.Budgets)
				if err != nil {
					b.Fatal(err)
				}
				p, err := proxy.New(proxy.Config{Upstream: up.URL, Table: table, Limiter: lim, Owner: "bench", Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				srv := httptest.NewServer(p)
				defer srv.Close()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * clients}}
				defer client.CloseIdleConnections()
				b.ResetTimer()
				direct := latencies(b, client, up.URL+"/v1/items", clients)
				proxied := latencies(b, client, srv.URL+"/v1/items", clients)
				b.StopTimer()
				d50, d99 := pct(direct, 50), pct(direct, 99)
				p50, p99 := pct(proxied, 50), pct(proxied, 99)
				b.ReportMetric(d50, "direct-p50-µs")
				b.ReportMetric(p50, "proxy-p50-µs")
				b.ReportMetric(p50-d50, "added-p50-µs")
				b.ReportMetric(p99-d99, "added-p99-µs")
			})
		}
	}
}

// latencies makes b.N calls of url by clients goroutines and returns each
// call's latency.
func latencies(b *testing.B, client *http.Client, url string, clients int) []time.Duration {
	out := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	next := make(chan int, b.N)
	for i := range b.N {
		next <- i
	}
	close(next)
	for range clients {
		wg.Go(func() {
			for i := range next {
				start := time.Now()
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("Authorization", "Bearer bench-key")
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					b.Error(err)
					return
				}
				out[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	return out
}

// pct returns the p-th percentile of ds in microseconds.
func pct(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[(len(s)-1)*p/100]) / float64(time.Microsecond)
}
