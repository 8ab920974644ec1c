package quota_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/quota"
)

// trBenchTable is a one-method table whose budget never runs out in a
// benchmark: the YouTube route and pricing work, without the daily limit.
func trBenchTable(tb testing.TB) *costs.Table {
	tb.Helper()
	t, err := costs.New(costs.Spec{
		API:     "youtube",
		Budgets: []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Sliding(time.Minute)}},
		Methods: []costs.Method{{Name: "videos.list", Routes: []string{"GET /youtube/v3/videos"}, Cost: map[string]int64{"units": 1}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// trBenchUpstream is a loopback server answering every request with a small
// JSON body.
func trBenchUpstream(tb testing.TB) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"youtube#videoListResponse","items":[]}`)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// trBenchGet runs b.N GETs through client, reading each body.
func trBenchGet(b *testing.B, client *http.Client, url string) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.Status)
		}
	}
}

// BenchmarkTransport measures the metered transport's added latency: the
// same GET over loopback through a bare http.Client and through
// quota.NewTransport on a MemoryStore. The difference is the meter's cost
// (pricing, credential, one Take, tracing); the Redis variant is
// costs.BenchmarkTransportRedis.
func BenchmarkTransport(b *testing.B) {
	srv := trBenchUpstream(b)
	url := srv.URL + "/youtube/v3/videos?part=snippet&chart=mostPopular&key=bench-key"
	b.Run("bare", func(b *testing.B) {
		client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		defer client.CloseIdleConnections()
		trBenchGet(b, client, url)
	})
	b.Run("metered/memory", func(b *testing.B) {
		table := trBenchTable(b)
		lim, err := quota.New(quota.NewMemoryStore(), table.API, table.Budgets)
		if err != nil {
			b.Fatal(err)
		}
		base := http.DefaultTransport.(*http.Transport).Clone()
		client := &http.Client{Transport: quota.NewTransport(lim, table, quota.WithBase(base))}
		defer base.CloseIdleConnections()
		trBenchGet(b, client, url)
	})
}

// BenchmarkTransportPrice measures pricing alone: route resolution and
// credential lookup inputs, no I/O.
func BenchmarkTransportPrice(b *testing.B) {
	table, err := costs.Builtin("youtube")
	if err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "https://youtube.googleapis.com/youtube/v3/videos?part=snippet&chart=mostPopular&key=k", nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := table.Price(req); err != nil {
			b.Fatal(err)
		}
	}
}

// trStubTransport answers every request at once, without I/O.
type trStubTransport struct{}

func (trStubTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// BenchmarkTransportOverhead measures the meter alone: RoundTrip through a
// base that answers at once, so no network time hides the meter's cost.
func BenchmarkTransportOverhead(b *testing.B) {
	table := trBenchTable(b)
	lim, err := quota.New(quota.NewMemoryStore(), table.API, table.Budgets)
	if err != nil {
		b.Fatal(err)
	}
	tr := quota.NewTransport(lim, table, quota.WithBase(trStubTransport{}))
	req, _ := http.NewRequest("GET", "http://127.0.0.1/youtube/v3/videos?part=snippet&chart=mostPopular&key=bench-key", nil)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

// BenchmarkTransportOverheadUnnamedOwner is BenchmarkTransportOverhead
// over a table that keeps budgets per owner, with no owner named: every
// request carries the unnamed owner for the limiter's registrations.
func BenchmarkTransportOverheadUnnamedOwner(b *testing.B) {
	table, err := costs.New(costs.Spec{
		API: "youtube", Owner: "project",
		Budgets: []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Sliding(time.Minute)}},
		Methods: []costs.Method{{Name: "videos.list", Routes: []string{"GET /youtube/v3/videos"}, Cost: map[string]int64{"units": 1}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	lim, err := quota.New(quota.NewMemoryStore(), table.API, table.Budgets)
	if err != nil {
		b.Fatal(err)
	}
	tr := quota.NewTransport(lim, table, quota.WithBase(trStubTransport{}), quota.WithTransportLogger(slog.New(slog.DiscardHandler)))
	req, _ := http.NewRequest("GET", "http://127.0.0.1/youtube/v3/videos?part=snippet&chart=mostPopular&key=bench-key", nil)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

// BenchmarkTransportAdded interleaves a bare and a metered GET in every
// iteration and reports the median of their difference as added-µs/op: the
// meter's added latency, less disturbed by a loaded host than comparing two
// separate runs.
func BenchmarkTransportAdded(b *testing.B) {
	srv := trBenchUpstream(b)
	url := srv.URL + "/youtube/v3/videos?part=snippet&chart=mostPopular&key=bench-key"
	table := trBenchTable(b)
	lim, err := quota.New(quota.NewMemoryStore(), table.API, table.Budgets)
	if err != nil {
		b.Fatal(err)
	}
	bareBase := http.DefaultTransport.(*http.Transport).Clone()
	meteredBase := http.DefaultTransport.(*http.Transport).Clone()
	defer bareBase.CloseIdleConnections()
	defer meteredBase.CloseIdleConnections()
	bare := &http.Client{Transport: bareBase}
	metered := &http.Client{Transport: quota.NewTransport(lim, table, quota.WithBase(meteredBase))}
	b.ReportMetric(trAdded(b, bare, metered, url), "added-µs/op")
}

// trAdded runs b.N interleaved GETs through both clients and returns the
// median of metered minus bare, in µs.
func trAdded(b *testing.B, bare, metered *http.Client, url string) float64 {
	b.Helper()
	get := func(c *http.Client) time.Duration {
		start := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start)
	}
	var diffs []float64
	for i := 0; b.Loop(); i++ {
		var d time.Duration
		if i%2 == 0 { // alternate the order, so neither always goes first
			d = -get(bare) + get(metered)
		} else {
			d = get(metered) - get(bare)
		}
		diffs = append(diffs, float64(d.Nanoseconds())/1e3)
	}
	sort.Float64s(diffs)
	if len(diffs) == 0 {
		return 0
	}
	return diffs[len(diffs)/2]
}
