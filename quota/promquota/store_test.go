package promquota_test

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/promquota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// TestStoreCollectorExactSeries: after a known sequence of charges, a
// refund and an exhaust mark, a scrape holds exactly the store's gauges.
func TestStoreCollectorExactSeries(t *testing.T) {
	st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "quota.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	la, _ := time.LoadLocation("America/Los_Angeles")
	now := time.Date(2026, 11, 22, 17, 0, 0, 0, time.UTC) // 09:00 in Los Angeles
	clock := func() time.Time { return now }
	l, err := quota.New(st, "youtube", []quota.Budget{
		{Name: "units", Limit: 10000, Window: quota.Daily(la)},
		{Name: "search", Limit: 100, Window: quota.Sliding(time.Hour)},
	}, quota.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := quota.Credential{Secret: "secret-a", Label: "key-a"}
	b := quota.Credential{Secret: "secret-b"} // no label: the short fingerprint
	now = now.Add(-30 * time.Minute)
	if _, err := l.Take(ctx, a, quota.Charge{Method: "search.list", Units: map[string]int64{"units": 100, "search": 1}}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(20 * time.Minute)
	res, err := l.Take(ctx, a, quota.Units("units", 50))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, res); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx, b, quota.Units("units", 9000)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(10 * time.Minute) // 09:00 LA
	if err := l.Exhaust(ctx, b, "search", now.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	fpB := quota.DefaultFingerprint("secret-b")[:8]

	c := promquota.NewStoreCollector(st, promquota.WithStoreClock(clock))
	// units reset at midnight LA: 15h away; a's search entry (30 minutes old)
	// leaves its hour in 30 minutes; b's search is empty but marked spent for
	// 2h: nothing frees before the mark ends.
	want := `
# HELP quota_budget_info Always 1: a budget's unit (what its series count: units by default, tokens, usd-micro for micro-dollars) and window. Join on (api, budget) to read another series in its unit.
# TYPE quota_budget_info gauge
quota_budget_info{api="youtube",budget="search",unit="units",window="sliding:1h0m0s"} 1
quota_budget_info{api="youtube",budget="units",unit="units",window="daily:America/Los_Angeles"} 1
# HELP quota_store_exhausted 1 while the budget is marked spent (the upstream said so), else 0.
# TYPE quota_store_exhausted gauge
quota_store_exhausted{api="youtube",budget="search",owner="FPB"} 1
quota_store_exhausted{api="youtube",budget="search",owner="key-a"} 0
quota_store_exhausted{api="youtube",budget="units",owner="FPB"} 0
quota_store_exhausted{api="youtube",budget="units",owner="key-a"} 0
# HELP quota_store_limit_units The budget's limit in units per window.
# TYPE quota_store_limit_units gauge
quota_store_limit_units{api="youtube",budget="search",owner="FPB"} 100
quota_store_limit_units{api="youtube",budget="search",owner="key-a"} 100
quota_store_limit_units{api="youtube",budget="units",owner="FPB"} 10000
quota_store_limit_units{api="youtube",budget="units",owner="key-a"} 10000
# HELP quota_store_remaining_units Units left in the budget's window now (0 while the budget is marked spent).
# TYPE quota_store_remaining_units gauge
quota_store_remaining_units{api="youtube",budget="search",owner="FPB"} 0
quota_store_remaining_units{api="youtube",budget="search",owner="key-a"} 99
quota_store_remaining_units{api="youtube",budget="units",owner="FPB"} 1000
quota_store_remaining_units{api="youtube",budget="units",owner="key-a"} 9900
# HELP quota_store_reset_seconds Seconds until capacity next frees: a daily budget's reset, or when a sliding window's oldest entry leaves it, and no earlier than the end of a mark that the budget is spent (0 when the window is empty and unmarked).
# TYPE quota_store_reset_seconds gauge
quota_store_reset_seconds{api="youtube",budget="search",owner="FPB"} 7200
quota_store_reset_seconds{api="youtube",budget="search",owner="key-a"} 1800
quota_store_reset_seconds{api="youtube",budget="units",owner="FPB"} 54000
quota_store_reset_seconds{api="youtube",budget="units",owner="key-a"} 54000
# HELP quota_store_up 1 if the last scrape read the store, 0 if the store could not be read.
# TYPE quota_store_up gauge
quota_store_up 1
# HELP quota_store_used_units Units counted in the budget's window now, as the store holds them.
# TYPE quota_store_used_units gauge
quota_store_used_units{api="youtube",budget="search",owner="FPB"} 0
quota_store_used_units{api="youtube",budget="search",owner="key-a"} 1
quota_store_used_units{api="youtube",budget="units",owner="FPB"} 9000
quota_store_used_units{api="youtube",budget="units",owner="key-a"} 100
`
	want = strings.ReplaceAll(want, "FPB", fpB)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c); n != 23 {
		t.Errorf("%d series, want 23 (5 kinds x 2 budgets x 2 owners + up + each budget's info)", n)
	}

	// A store that cannot be read: up is 0 and no usage series is reported.
	st.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP quota_store_up 1 if the last scrape read the store, 0 if the store could not be read.
# TYPE quota_store_up gauge
quota_store_up 0
`)); err != nil {
		t.Error(err)
	}
}

// ExampleNewStoreCollector exports the usage every process recorded in a
// shared store, read on each scrape.
func ExampleNewStoreCollector() {
	now := time.Date(2026, 11, 22, 17, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store := quota.NewMemoryStore()
	lim, _ := quota.New(store, "github", []quota.Budget{{Name: "core", Limit: 5000, Window: quota.Sliding(time.Hour)}}, quota.WithClock(clock))
	if _, err := lim.Take(context.Background(), quota.Credential{Secret: "ghp_...", Label: "ci-bot"}, quota.Units("core", 1200)); err != nil {
		panic(err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(promquota.NewStoreCollector(store, promquota.WithStoreClock(clock)))
	// In a program: http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			fmt.Println(mf.GetName(), m.GetGauge().GetValue())
		}
	}
	// Output:
	// quota_budget_info 1
	// quota_store_exhausted 0
	// quota_store_limit_units 5000
	// quota_store_remaining_units 3800
	// quota_store_reset_seconds 3600
	// quota_store_up 1
	// quota_store_used_units 1200
}

// TestStoreCollectorOwnerLabelsUnique: a key labelled "k1" that is its own
// owner and a project named "k1" are two accounts; each keeps its own
// series (the registry drops a second series with the same labels, and a
// scrape then hides one account's usage). A rotated key's account is named
// by the same value whatever order the store lists its credentials in.
func TestStoreCollectorOwnerLabelsUnique(t *testing.T) {
	st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "quota.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 11, 22, 17, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	l, err := quota.New(st, "youtube", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}}, quota.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	take := func(c quota.Credential, n int64) {
		t.Helper()
		if _, err := l.Take(ctx, c, quota.Units("units", n)); err != nil {
			t.Fatal(err)
		}
	}
	take(quota.Credential{Secret: "secret-k1", Label: "k1"}, 4)
	take(quota.Credential{Secret: "secret-k3", Label: "k3", Owner: "k1"}, 2)
	take(quota.Credential{Secret: "secret-old", Label: "rot"}, 5)
	if _, err := l.Rotate(ctx, "rot", quota.Credential{Secret: "secret-new"}); err != nil {
		t.Fatal(err)
	}
	take(quota.Credential{Secret: "secret-new", Label: "rot"}, 1)

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promquota.NewStoreCollector(st, promquota.WithStoreClock(clock)))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	used := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != promquota.StoreUsedName {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "owner" {
					used[lp.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	fp := func(s string) string { return quota.DefaultFingerprint(s)[:8] }
	want := map[string]float64{"k1": 2, fp("secret-k1"): 4, fp("secret-old"): 6}
	if fmt.Sprint(used) != fmt.Sprint(want) {
		t.Errorf("quota_store_used_units by owner = %v, want %v", used, want)
	}
}

// TestStoreCollectorResetSecondsRoundUp: quota_store_reset_seconds is whole
// seconds rounded up, as the dashboard's and quotactl's reset_seconds: a
// budget whose oldest entry leaves its window in 0.3s says 1, not 0.3 (nor
// 0, which would read as "free now" while it is still spent).
func TestStoreCollectorResetSecondsRoundUp(t *testing.T) {
	now := time.Date(2026, 11, 22, 17, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st := quota.NewMemoryStore()
	l, err := quota.New(st, "github", []quota.Budget{{Name: "core", Limit: 10, Window: quota.Sliding(time.Minute)}}, quota.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(context.Background(), quota.Credential{Secret: "ghp_x", Label: "ci"}, quota.Units("core", 10)); err != nil {
		t.Fatal(err)
	}
	c := promquota.NewStoreCollector(st, promquota.WithStoreClock(clock))
	for _, tt := range []struct {
		after time.Duration
		want  string
	}{{0, "60"}, {59*time.Second + 700*time.Millisecond, "1"}, {20 * time.Second, "40"}, {20*time.Second + time.Nanosecond, "40"}} {
		now = time.Date(2026, 11, 22, 17, 0, 0, 0, time.UTC).Add(tt.after)
		want := "# HELP quota_store_reset_seconds Seconds until capacity next frees: a daily budget's reset, or when a sliding window's oldest entry leaves it, and no earlier than the end of a mark that the budget is spent (0 when the window is empty and unmarked).\n# TYPE quota_store_reset_seconds gauge\nquota_store_reset_seconds{api=\"github\",budget=\"core\",owner=\"ci\"} " + tt.want + "\n"
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), promquota.StoreResetName); err != nil {
			t.Errorf("%v after the charge: %v", tt.after, err)
		}
	}
}

// TestStoreCollectorBudgetInfo: quota_budget_info says each budget's unit
// and window, one series per api and budget (a budget nothing was charged
// to included), and joins with every usage series on (api, budget): the
// labels it shares with them are theirs, spelled the same.
func TestStoreCollectorBudgetInfo(t *testing.T) {
	now := time.Date(2026, 11, 22, 17, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st := quota.NewMemoryStore()
	la, _ := time.LoadLocation("America/Los_Angeles")
	llm, err := quota.New(st, "openai", []quota.Budget{
		{Name: "tokens", Limit: 30000, Window: quota.Sliding(time.Minute), Unit: "tokens"},
		{Name: "spend", Limit: 500_000_000, Window: quota.Monthly(la), Unit: quota.UnitUSDMicro},
	}, quota.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	yt, err := quota.New(st, "youtube", []quota.Budget{
		{Name: "units", Limit: 10000, Window: quota.Daily(la)},
		{Name: "search", Limit: 100, Window: quota.Daily(la)}, // never charged
	}, quota.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{"enrich", "summarize"} {
		if _, err := llm.Take(ctx, quota.Credential{Secret: "sk-" + k, Label: k}, quota.Charge{Method: "chat.completions", Units: map[string]int64{"tokens": 1234, "spend": 12_340_000}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := yt.Take(ctx, quota.Credential{Secret: "AIza-info", Label: "yt"}, quota.Units("units", 7)); err != nil {
		t.Fatal(err)
	}
	c := promquota.NewStoreCollector(st, promquota.WithStoreClock(clock))
	want := `
# HELP quota_budget_info Always 1: a budget's unit (what its series count: units by default, tokens, usd-micro for micro-dollars) and window. Join on (api, budget) to read another series in its unit.
# TYPE quota_budget_info gauge
quota_budget_info{api="openai",budget="spend",unit="usd-micro",window="monthly:America/Los_Angeles"} 1
quota_budget_info{api="openai",budget="tokens",unit="tokens",window="sliding:1m0s"} 1
quota_budget_info{api="youtube",budget="search",unit="units",window="daily:America/Los_Angeles"} 1
quota_budget_info{api="youtube",budget="units",unit="units",window="daily:America/Los_Angeles"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), promquota.StoreBudgetInfoName); err != nil {
		t.Error(err)
	}

	// The join: each usage series finds exactly one info series on its
	// api and budget, whose unit is its budget's.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	series := map[string][]map[string]string{} // each series' labels, by name
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			series[mf.GetName()] = append(series[mf.GetName()], l)
		}
	}
	info := map[string][]map[string]string{} // by api/budget
	for _, l := range series[promquota.StoreBudgetInfoName] {
		info[l["api"]+"/"+l["budget"]] = append(info[l["api"]+"/"+l["budget"]], l)
	}
	units := map[string]string{}
	for _, name := range []string{promquota.StoreUsedName, promquota.StoreLimitName, promquota.StoreRemainingName, promquota.StoreResetName, promquota.StoreExhaustedName} {
		for _, l := range series[name] {
			on := info[l["api"]+"/"+l["budget"]]
			if len(on) != 1 {
				t.Errorf("%s%v joins %d info series, want 1", name, l, len(on))
				continue
			}
			units[l["api"]+"/"+l["budget"]+"/"+l["owner"]] = on[0]["unit"]
		}
	}
	if want := map[string]string{"openai/spend/enrich": "usd-micro", "openai/spend/summarize": "usd-micro", "openai/tokens/enrich": "tokens", "openai/tokens/summarize": "tokens", "youtube/search/yt": "units", "youtube/units/yt": "units"}; !maps.Equal(units, want) {
		t.Errorf("the store gauges joined with their unit: %v, want %v", units, want)
	}
}
