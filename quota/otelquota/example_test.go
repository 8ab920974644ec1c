package otelquota_test

import (
	"context"
	"fmt"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/otelquota"
)

// An Observer makes a span per decision, a child of the span in the
// request's context, and reports the same metrics as promquota through the
// OTel metrics API. Here the providers record in memory; in a program,
// pass otel.GetTracerProvider() and otel.GetMeterProvider().
func ExampleNew() {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	o, err := otelquota.New(tp, mp)
	if err != nil {
		panic(err)
	}
	lim, err := quota.New(quota.NewMemoryStore(), "youtube",
		[]quota.Budget{{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}}, quota.WithObserver(o))
	if err != nil {
		panic(err)
	}
	key := quota.Credential{Secret: "AIzaSy-example", Label: "yt-key-1"}
	for range 3 {
		_, _ = lim.Take(ctx, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 40}})
	}
	_ = lim.Flush(ctx) // events are delivered off the decision path

	for _, s := range spans.Ended() {
		for _, a := range s.Attributes() {
			if a.Key == "quota.outcome" {
				fmt.Println(s.Name(), a.Value.Emit())
			}
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[float64]); ok && m.Name == "quota.remaining" {
				fmt.Println(m.Name, g.DataPoints[0].Value)
			}
		}
	}
	// Output:
	// quota.take admitted
	// quota.take admitted
	// quota.take refused
	// quota.remaining 20
}
