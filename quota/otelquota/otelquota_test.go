package otelquota_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/otelquota"
)

func attrs(s attribute.Set) string {
	var kv []string
	for _, a := range s.ToSlice() {
		kv = append(kv, fmt.Sprintf("%s=%s", a.Key, a.Value.Emit()))
	}
	return "{" + strings.Join(kv, ",") + "}"
}

// flatten returns one line per data point, sorted; histograms as their
// count and bucket counts (their sums are wall-clock latencies).
func flatten(t *testing.T, rm metricdata.ResourceMetrics) string {
	t.Helper()
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s%s %d", m.Name, attrs(p.Attributes), p.Value))
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s%s %g", m.Name, attrs(p.Attributes), p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if p.Sum <= 0 || p.Sum > float64(p.Count) {
						t.Errorf("%s%s sum %g: want a latency in (0, 1s] per decision", m.Name, attrs(p.Attributes), p.Sum)
					}
					lines = append(lines, fmt.Sprintf("%s%s count=%d", m.Name, attrs(p.Attributes), p.Count))
				}
			default:
				t.Fatalf("unexpected data %T for %s", m.Data, m.Name)
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

func TestSpansAndMetricsAfterCharges(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	o, err := otelquota.New(tp, mp, otelquota.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	l, err := quota.New(quota.NewMemoryStore(), "yt", []quota.Budget{
		{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)},
		{Name: "search", Limit: 100, Window: quota.Daily(time.UTC)},
	}, quota.WithClock(clock), quota.WithObserver(o))
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "ingest")
	projectKey := quota.Credential{Secret: "secret-of-project-a", Label: "yt-key-1", Owner: "project-a"}
	labelled := quota.Credential{Secret: "secret-of-key-2", Label: "yt-key-2"}
	take := func(c quota.Credential, method string, units map[string]int64) (*quota.Reservation, error) {
		t.Helper()
		r, err := l.Take(quota.ContextWithJob(ctx, "trending"), c, quota.Charge{Method: method, Units: units})
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
	if err := l.Exhaust(ctx, projectKey, "search", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	parent.End()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	want := `quota.decision.duration{api=yt,outcome=admitted} count=3
quota.decision.duration{api=yt,outcome=refused} count=1
quota.decisions{api=yt,method=search.list,outcome=admitted,owner=project-a} 1
quota.decisions{api=yt,method=videos.list,outcome=admitted,owner=project-a} 1
quota.decisions{api=yt,method=videos.list,outcome=admitted,owner=yt-key-2} 1
quota.decisions{api=yt,method=videos.list,outcome=refused,owner=project-a} 1
quota.exhaust_marks{api=yt,budget=search,owner=project-a} 1
quota.limit{api=yt,budget=search,owner=project-a} 100
quota.limit{api=yt,budget=units,owner=project-a} 10
quota.limit{api=yt,budget=units,owner=yt-key-2} 10
quota.refunded_units{api=yt,budget=units,method=videos.list,owner=yt-key-2} 3
quota.remaining{api=yt,budget=search,owner=project-a} 0
quota.remaining{api=yt,budget=units,owner=project-a} 0
quota.remaining{api=yt,budget=units,owner=yt-key-2} 10
quota.reset{api=yt,budget=search,owner=project-a} 49200
quota.reset{api=yt,budget=units,owner=project-a} 2400
quota.reset{api=yt,budget=units,owner=yt-key-2} 0
quota.threshold_crossings{api=yt,budget=units,owner=project-a,percent=100} 1
quota.threshold_crossings{api=yt,budget=units,owner=project-a,percent=50} 1
quota.threshold_crossings{api=yt,budget=units,owner=project-a,percent=80} 1
quota.threshold_crossings{api=yt,budget=units,owner=project-a,percent=95} 1
quota.units{api=yt,budget=search,method=search.list,outcome=admitted,owner=project-a} 1
quota.units{api=yt,budget=units,method=search.list,outcome=admitted,owner=project-a} 5
quota.units{api=yt,budget=units,method=videos.list,outcome=admitted,owner=project-a} 5
quota.units{api=yt,budget=units,method=videos.list,outcome=admitted,owner=yt-key-2} 3
quota.units{api=yt,budget=units,method=videos.list,outcome=refused,owner=project-a} 1
quota.used{api=yt,budget=search,owner=project-a} 1
quota.used{api=yt,budget=units,owner=project-a} 10
quota.used{api=yt,budget=units,owner=yt-key-2} 0
`
	if got := flatten(t, rm); got != want {
		t.Fatalf("metrics:\n%s\nwant:\n%s", got, want)
	}

	var got []string
	for _, s := range spans.Ended() {
		if s.Name() != "quota.take" {
			continue
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %v: parent %v, want the caller's span", s.Name(), s.Parent().SpanID())
		}
		if !s.EndTime().After(s.StartTime()) {
			t.Errorf("span from %v to %v", s.StartTime(), s.EndTime())
		}
		var kv []string
		for _, a := range s.Attributes() {
			kv = append(kv, fmt.Sprintf("%s=%s", a.Key, a.Value.Emit()))
		}
		got = append(got, fmt.Sprintf("%s %s [%s]", s.Name(), s.Status().Code, strings.Join(kv, " ")))
	}
	wantSpans := []string{
		"quota.take Unset [quota.api=yt quota.owner=project-a quota.method=search.list quota.budgets=[\"units\",\"search\"] quota.cost=6 quota.outcome=admitted quota.job=trending]",
		"quota.take Unset [quota.api=yt quota.owner=project-a quota.method=videos.list quota.budgets=[\"units\"] quota.cost=5 quota.outcome=admitted quota.job=trending]",
		"quota.take Unset [quota.api=yt quota.owner=project-a quota.method=videos.list quota.budgets=[\"units\"] quota.cost=1 quota.outcome=refused quota.job=trending quota.budget=units quota.retry_after=2400]",
		"quota.take Unset [quota.api=yt quota.owner=yt-key-2 quota.method=videos.list quota.budgets=[\"units\"] quota.cost=3 quota.outcome=admitted quota.job=trending]",
	}
	if !slices.Equal(got, wantSpans) {
		t.Fatalf("spans:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantSpans, "\n"))
	}
}

// TestFailedDecisionSpanIsError: a decision the store could not make ends
// its span with status Error.
func TestFailedDecisionSpanIsError(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	o, err := otelquota.New(tp, sdkmetric.NewMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	o.Observe(quota.Event{Kind: quota.EventDecision, API: "yt", Method: "videos.list", Outcome: quota.OutcomeFailed,
		Start: time.Now(), Latency: time.Millisecond, Usage: []quota.Usage{{Budget: "units", Cost: 1}}})
	if e := spans.Ended(); len(e) != 1 || e[0].Status().Code.String() != "Error" || e[0].EndTime().Sub(e[0].StartTime()) != time.Millisecond {
		t.Fatalf("spans %v", e)
	}
}
