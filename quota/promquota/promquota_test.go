package promquota_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/promquota"
)

// scrape GETs the registry's /metrics over a real HTTP server and returns
// the quota_ lines.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "quota_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

var sumLine = regexp.MustCompile(`(?m)^(quota_decision_duration_seconds_sum\{[^}]*\}) (\S+)$`)

func TestScrapeAfterCharges(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	c := promquota.New(promquota.WithClock(clock), promquota.WithBuckets([]float64{10}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	l, err := quota.New(quota.NewMemoryStore(), "yt", []quota.Budget{
		{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)},
		{Name: "search", Limit: 100, Window: quota.Daily(time.UTC)},
	}, quota.WithClock(clock), quota.WithObserver(c))
	if err != nil {
		t.Fatal(err)
	}
	projectKey := quota.Credential{Secret: "secret-of-project-a", Label: "yt-key-1", Owner: "project-a"}
	labelled := quota.Credential{Secret: "secret-of-key-2", Label: "yt-key-2"}
	bare := quota.Credential{Secret: "secret-of-key-3"}
	take := func(c quota.Credential, method string, units map[string]int64) (*quota.Reservation, error) {
		t.Helper()
		r, err := l.Take(ctx, c, quota.Charge{Method: method, Units: units})
		if ferr := l.Flush(ctx); ferr != nil {
			t.Fatal(ferr)
		}
		return r, err
	}
	if _, err := take(projectKey, "search.list", map[string]int64{"units": 5, "search": 1}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(10 * time.Minute)
	if _, err := take(projectKey, "videos.list", map[string]int64{"units": 5}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(10 * time.Minute)
	if _, err := take(projectKey, "videos.list", map[string]int64{"units": 1}); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("want a refusal: %v", err)
	}
	r, err := take(labelled, "videos.list", map[string]int64{"units": 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := take(bare, "videos.update", map[string]int64{"units": 4}); err != nil {
		t.Fatal(err)
	}
	if err := l.Exhaust(ctx, projectKey, "search", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := scrape(t, reg)
	for _, m := range sumLine.FindAllStringSubmatch(got, -1) {
		if v, err := strconv.ParseFloat(m[2], 64); err != nil || v <= 0 || v > 1 {
			t.Errorf("%s = %s: want a latency in (0, 1s]", m[1], m[2])
		}
	}
	got = sumLine.ReplaceAllString(got, "$1 SUM")
	want := `quota_decision_duration_seconds_bucket{api="yt",outcome="admitted",le="10"} 4
quota_decision_duration_seconds_bucket{api="yt",outcome="admitted",le="+Inf"} 4
quota_decision_duration_seconds_sum{api="yt",outcome="admitted"} SUM
quota_decision_duration_seconds_count{api="yt",outcome="admitted"} 4
quota_decision_duration_seconds_bucket{api="yt",outcome="refused",le="10"} 1
quota_decision_duration_seconds_bucket{api="yt",outcome="refused",le="+Inf"} 1
quota_decision_duration_seconds_sum{api="yt",outcome="refused"} SUM
quota_decision_duration_seconds_count{api="yt",outcome="refused"} 1
quota_decisions_total{api="yt",method="search.list",outcome="admitted",owner="project-a"} 1
quota_decisions_total{api="yt",method="videos.list",outcome="admitted",owner="project-a"} 1
quota_decisions_total{api="yt",method="videos.list",outcome="admitted",owner="yt-key-2"} 1
quota_decisions_total{api="yt",method="videos.list",outcome="refused",owner="project-a"} 1
quota_decisions_total{api="yt",method="videos.update",outcome="admitted",owner="unlabelled"} 1
quota_exhaust_marks_total{api="yt",budget="search",owner="project-a"} 1
quota_limit_units{api="yt",budget="search",owner="project-a"} 100
quota_limit_units{api="yt",budget="units",owner="project-a"} 10
quota_limit_units{api="yt",budget="units",owner="unlabelled"} 10
quota_limit_units{api="yt",budget="units",owner="yt-key-2"} 10
quota_refunded_units_total{api="yt",budget="units",method="videos.list",owner="yt-key-2"} 3
quota_remaining_units{api="yt",budget="search",owner="project-a"} 0
quota_remaining_units{api="yt",budget="units",owner="project-a"} 0
quota_remaining_units{api="yt",budget="units",owner="unlabelled"} 6
quota_remaining_units{api="yt",budget="units",owner="yt-key-2"} 10
quota_reset_seconds{api="yt",budget="search",owner="project-a"} 49200
quota_reset_seconds{api="yt",budget="units",owner="project-a"} 2400
quota_reset_seconds{api="yt",budget="units",owner="unlabelled"} 3600
quota_reset_seconds{api="yt",budget="units",owner="yt-key-2"} 0
quota_threshold_crossings_total{api="yt",budget="units",owner="project-a",percent="100"} 1
quota_threshold_crossings_total{api="yt",budget="units",owner="project-a",percent="50"} 1
quota_threshold_crossings_total{api="yt",budget="units",owner="project-a",percent="80"} 1
quota_threshold_crossings_total{api="yt",budget="units",owner="project-a",percent="95"} 1
quota_units_total{api="yt",budget="search",method="search.list",outcome="admitted",owner="project-a"} 1
quota_units_total{api="yt",budget="units",method="search.list",outcome="admitted",owner="project-a"} 5
quota_units_total{api="yt",budget="units",method="videos.list",outcome="admitted",owner="project-a"} 5
quota_units_total{api="yt",budget="units",method="videos.list",outcome="admitted",owner="yt-key-2"} 3
quota_units_total{api="yt",budget="units",method="videos.list",outcome="refused",owner="project-a"} 1
quota_units_total{api="yt",budget="units",method="videos.update",outcome="admitted",owner="unlabelled"} 4
quota_used_units{api="yt",budget="search",owner="project-a"} 1
quota_used_units{api="yt",budget="units",owner="project-a"} 10
quota_used_units{api="yt",budget="units",owner="unlabelled"} 4
quota_used_units{api="yt",budget="units",owner="yt-key-2"} 0
`
	if got != want {
		t.Fatalf("scrape:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(got, "secret") {
		t.Fatal("a secret reached a label")
	}
}

// TestCardinalityBound: owners and methods past the bounds are counted
// under "other".
func TestCardinalityBound(t *testing.T) {
	c := promquota.New(promquota.WithMaxOwners(2), promquota.WithMaxMethods(1))
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	for _, who := range []string{"a", "b", "c", "d"} {
		c.Observe(quota.Event{Kind: quota.EventDecision, API: "yt", Label: who, Method: "m-" + who, Outcome: quota.OutcomeRefused,
			Usage: []quota.Usage{{Budget: "units", Cost: 1}}})
	}
	got := scrape(t, reg)
	want := `quota_decisions_total{api="yt",method="m-a",outcome="refused",owner="a"} 1
quota_decisions_total{api="yt",method="other",outcome="refused",owner="b"} 1
quota_decisions_total{api="yt",method="other",outcome="refused",owner="other"} 2
`
	var lines []string
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "quota_decisions_total") {
			lines = append(lines, l)
		}
	}
	if g := strings.Join(lines, "\n") + "\n"; g != want {
		t.Fatalf("decisions:\n%s\nwant:\n%s", g, want)
	}
}

// TestReportCounters: reports, ignored values, true-ups (drift) and learned
// limits reach their counters; a lowering counts apart from a true-up.
func TestReportCounters(t *testing.T) {
	c := promquota.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	r := &quota.Report{Budget: "core", Used: 40, Remaining: -1}
	for _, e := range []quota.Event{
		{Kind: quota.EventReport, API: "github", Owner: "octocat", Budget: "core", Report: r},
		{Kind: quota.EventReport, API: "github", Owner: "octocat", Budget: "core", Report: r},
		{Kind: quota.EventReportIgnored, API: "github", Err: errors.New("x-ratelimit-used: not a count")},
		{Kind: quota.EventTrueUp, API: "github", Owner: "octocat", Budget: "core", Units: 40, Report: r},
		{Kind: quota.EventTrueUp, API: "github", Owner: "octocat", Budget: "core", Units: -5, Report: r},
		{Kind: quota.EventLimitLearned, API: "github", Owner: "octocat", Budget: "core", Units: 1000, Outcome: quota.OutcomeApplied},
	} {
		c.Observe(e)
	}
	got := scrape(t, reg)
	for _, want := range []string{
		`quota_upstream_reports_total{api="github",budget="core",owner="octocat"} 2`,
		`quota_upstream_reports_ignored_total{api="github"} 1`,
		`quota_trueup_units_total{api="github",budget="core",owner="octocat"} 40`,
		`quota_truedown_units_total{api="github",budget="core",owner="octocat"} 5`,
		`quota_limits_learned_total{api="github",budget="core",outcome="applied",owner="octocat"} 1`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %s in:\n%s", want, got)
		}
	}
}

// TestSettleCounters: settle outcomes count by outcome, and an excess adds
// its units per budget.
func TestSettleCounters(t *testing.T) {
	c := promquota.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	for _, e := range []quota.Event{
		{Kind: quota.EventSettle, API: "openai", Owner: "proj", Method: "chat.completions", Outcome: quota.OutcomeSettled},
		{Kind: quota.EventSettle, API: "openai", Owner: "proj", Method: "chat.completions", Outcome: quota.OutcomeSettled},
		{Kind: quota.EventSettle, API: "openai", Owner: "proj", Method: "chat.completions", Outcome: quota.OutcomeKept, Err: errors.New("closed early")},
		{Kind: quota.EventSettle, API: "openai", Owner: "proj", Method: "chat.completions", Outcome: quota.OutcomeExcess, Budget: "tokens", Units: 150},
		{Kind: quota.EventSettle, API: "openai", Owner: "proj", Method: "chat.completions", Outcome: quota.OutcomeExcess, Budget: "tokens", Units: 50},
	} {
		c.Observe(e)
	}
	got := scrape(t, reg)
	for _, want := range []string{
		`quota_settles_total{api="openai",method="chat.completions",outcome="settled",owner="proj"} 2`,
		`quota_settles_total{api="openai",method="chat.completions",outcome="kept",owner="proj"} 1`,
		`quota_settles_total{api="openai",method="chat.completions",outcome="excess",owner="proj"} 2`,
		`quota_excess_units_total{api="openai",budget="tokens",method="chat.completions",owner="proj"} 200`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %s in:\n%s", want, got)
		}
	}
}
