// Package otelquota reports a quota.Limiter's events through OpenTelemetry:
// a span per decision and the metrics of quota/promquota through the OTel
// metrics API. An Observer is a quota.Observer:
//
//	o, err := otelquota.New(otel.GetTracerProvider(), otel.GetMeterProvider())
//	lim, _ := quota.New(store, "youtube", budgets, quota.WithObserver(o))
//
// Spans: "quota.take", one per decision (each metered request, each retry
// attempt), a child of the span in the Take's context, from when the
// limiter began deciding to when it decided, with the attributes
// quota.api, quota.owner, quota.method, quota.job, quota.budgets,
// quota.cost (units, all budgets), quota.outcome and, when refused,
// quota.budget and quota.retry_after (seconds). A failed decision (store
// unreachable) has status Error; a refusal is a normal outcome.
//
// Metrics (attributes as in promquota; owner is the owner name, else the
// credential label, else "unlabelled", bounded the same way):
//
//	quota.decisions            counter {api, owner, method, outcome}
//	quota.units                counter {api, budget, owner, method, outcome}, unit {unit}
//	quota.refunded_units       counter {api, budget, owner, method}
//	quota.decision.duration    histogram {api, outcome}, seconds
//	quota.threshold_crossings  counter {api, budget, owner, percent}
//	quota.exhaust_marks        counter {api, budget, owner}
//	quota.store_errors         counter {api}
//	quota.store_losses         counter {api, budget}
//	quota.upstream_reports     counter {api, budget, owner}
//	quota.trueup_units         counter {api, budget, owner}: units the upstream counted that the meter had not (drift)
//	quota.settles              counter {api, owner, outcome}: estimated calls settled (settled, kept; excess: per budget over)
//	quota.excess_units         counter {api, budget, owner}: units calls cost beyond their estimate, recorded on top
//	quota.used, quota.limit, quota.remaining   gauges {api, budget, owner}, units
//	quota.reset                gauge {api, budget, owner}, seconds until capacity frees
package otelquota

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/quotactl/quotactl/internal/obslabel"
	"github.com/quotactl/quotactl/quota"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/quotactl/quotactl/quota/otelquota"

// Observer turns quota events into OpenTelemetry spans and metrics. It is
// safe for concurrent use and may observe several Limiters. Make one with
// New.
type Observer struct {
	tracer trace.Tracer
	clock  func() time.Time
	labels obslabel.Set // bounded owner and method attribute values

	decisions, units, refunded, crossings, exhausts, errors, losses metric.Int64Counter
	reports, trueUp, settles, excess                                metric.Int64Counter
	latency                                                         metric.Float64Histogram

	gauges obslabel.Gauges
}

var _ quota.Observer = (*Observer)(nil)

// Option configures an Observer in New.
type Option func(*Observer)

// WithClock sets the clock the quota.reset gauge counts from. Default:
// time.Now.
func WithClock(clock func() time.Time) Option { return func(o *Observer) { o.clock = clock } }

// WithMaxOwners bounds the distinct owner attribute values (default 100);
// later ones are reported as "other".
func WithMaxOwners(n int) Option { return func(o *Observer) { o.labels.MaxOwners = n } }

// WithMaxMethods bounds the distinct method attribute values (default
// 200); later ones are reported as "other".
func WithMaxMethods(n int) Option { return func(o *Observer) { o.labels.MaxMethods = n } }

// Other is the attribute value that stands for owners and methods past
// the bounds; Unlabelled the owner of a credential with no owner name and
// no label.
const (
	Other      = obslabel.Other
	Unlabelled = obslabel.Unlabelled
)

// New returns an Observer that makes spans with tp's tracer and metrics
// with mp's meter (both named ScopeName). Errors come from creating the
// instruments.
func New(tp trace.TracerProvider, mp metric.MeterProvider, opts ...Option) (*Observer, error) {
	o := &Observer{
		tracer: tp.Tracer(ScopeName), clock: time.Now, labels: obslabel.Set{MaxOwners: 100, MaxMethods: 200},
	}
	for _, opt := range opts {
		opt(o)
	}
	m := mp.Meter(ScopeName)
	var err error
	counter := func(name, unit, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	o.decisions = counter("quota.decisions", "{decision}", "Charges decided, by outcome (admitted, refused, unmetered, failed).")
	o.units = counter("quota.units", "{unit}", "Units of the charges decided: admitted or unmetered units spent, refused or failed units asked.")
	o.refunded = counter("quota.refunded_units", "{unit}", "Units given back by refunds.")
	o.crossings = counter("quota.threshold_crossings", "{crossing}", "Budget thresholds crossed, once per window across processes.")
	o.exhausts = counter("quota.exhaust_marks", "{mark}", "Budgets marked spent until their reset.")
	o.errors = counter("quota.store_errors", "{error}", "Store operations that failed.")
	o.losses = counter("quota.store_losses", "{loss}", "Times the store was found to have lost recorded usage.")
	o.reports = counter("quota.upstream_reports", "{report}", "Reports of a budget's standing read from upstream responses.")
	o.trueUp = counter("quota.trueup_units", "{unit}", "Units the upstream reported spent that the meter had not counted (drift).")
	o.settles = counter("quota.settles", "{settle}", "Estimated calls settled to the cost their response reported, by outcome.")
	o.excess = counter("quota.excess_units", "{unit}", "Units calls cost beyond their estimate, recorded on top of it.")
	if err != nil {
		return nil, fmt.Errorf("otelquota: %w", err)
	}
	if o.latency, err = m.Float64Histogram("quota.decision.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a quota Limiter took to decide a charge, store round trip included.")); err != nil {
		return nil, fmt.Errorf("otelquota: %w", err)
	}
	gaugeOf := func(name, unit, desc string) metric.Float64ObservableGauge {
		if err != nil {
			return nil
		}
		var g metric.Float64ObservableGauge
		g, err = m.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return g
	}
	used := gaugeOf("quota.used", "{unit}", "Units used in the budget's window, as of the last decision seen.")
	limit := gaugeOf("quota.limit", "{unit}", "The budget's limit.")
	remaining := gaugeOf("quota.remaining", "{unit}", "Units left in the budget's window (0 while marked spent).")
	reset := gaugeOf("quota.reset", "s", "Seconds until the budget next frees capacity (0 when nothing is used).")
	if err != nil {
		return nil, fmt.Errorf("otelquota: %w", err)
	}
	_, err = m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		for _, g := range o.gauges.Snapshot(o.clock()) {
			attrs := metric.WithAttributes(attribute.String("api", g.API), attribute.String("budget", g.Budget), attribute.String("owner", g.Owner))
			ob.ObserveFloat64(used, float64(g.Used), attrs)
			ob.ObserveFloat64(limit, float64(g.Limit), attrs)
			ob.ObserveFloat64(remaining, float64(g.Remaining), attrs)
			ob.ObserveFloat64(reset, g.Reset, attrs)
		}
		return nil
	}, used, limit, remaining, reset)
	if err != nil {
		return nil, fmt.Errorf("otelquota: %w", err)
	}
	return o, nil
}

// Observe implements quota.Observer.
func (o *Observer) Observe(e quota.Event) {
	owner, method := o.labels.Of(e)
	o.gauges.Observe(e, owner, o.clock)
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	api := attribute.String("api", e.API)
	switch e.Kind {
	case quota.EventDecision:
		o.span(ctx, e, owner)
		out := attribute.String("outcome", string(e.Outcome))
		o.decisions.Add(ctx, 1, metric.WithAttributes(api, attribute.String("owner", owner), attribute.String("method", method), out))
		o.latency.Record(ctx, e.Latency.Seconds(), metric.WithAttributes(api, out))
		for _, u := range e.Usage {
			o.units.Add(ctx, u.Cost, metric.WithAttributes(api, attribute.String("budget", u.Budget), attribute.String("owner", owner), attribute.String("method", method), out))
		}
	case quota.EventRefund:
		for _, u := range e.Usage {
			o.refunded.Add(ctx, u.Cost, metric.WithAttributes(api, attribute.String("budget", u.Budget), attribute.String("owner", owner), attribute.String("method", method)))
		}
	case quota.EventThreshold:
		o.crossings.Add(ctx, 1, metric.WithAttributes(api, attribute.String("budget", e.Budget), attribute.String("owner", owner), attribute.Int("percent", e.Percent)))
	case quota.EventExhaust:
		if !e.Until.IsZero() {
			o.exhausts.Add(ctx, 1, metric.WithAttributes(api, attribute.String("budget", e.Budget), attribute.String("owner", owner)))
		}
	case quota.EventStoreError:
		o.errors.Add(ctx, 1, metric.WithAttributes(api))
	case quota.EventStoreLoss:
		o.losses.Add(ctx, 1, metric.WithAttributes(api, attribute.String("budget", e.Budget)))
	case quota.EventReport:
		o.reports.Add(ctx, 1, metric.WithAttributes(api, attribute.String("budget", e.Budget), attribute.String("owner", owner)))
	case quota.EventTrueUp:
		if e.Units > 0 {
			o.trueUp.Add(ctx, e.Units, metric.WithAttributes(api, attribute.String("budget", e.Budget), attribute.String("owner", owner)))
		}
	case quota.EventSettle:
		o.settles.Add(ctx, 1, metric.WithAttributes(api, attribute.String("owner", owner), attribute.String("outcome", string(e.Outcome))))
		if e.Outcome == quota.OutcomeExcess && e.Err == nil {
			o.excess.Add(ctx, e.Units, metric.WithAttributes(api, attribute.String("budget", e.Budget), attribute.String("owner", owner)))
		}
	}
}

// span records the decision's span, after the fact, with its own start and
// end times.
func (o *Observer) span(ctx context.Context, e quota.Event, owner string) {
	start := e.Start
	if start.IsZero() {
		start = time.Now().Add(-e.Latency)
	}
	var cost int64
	budgets := make([]string, 0, len(e.Usage))
	for _, u := range e.Usage {
		cost += u.Cost
		budgets = append(budgets, u.Budget)
	}
	attrs := []attribute.KeyValue{
		attribute.String("quota.api", e.API),
		attribute.String("quota.owner", owner),
		attribute.String("quota.method", e.Method),
		attribute.StringSlice("quota.budgets", budgets),
		attribute.Int64("quota.cost", cost),
		attribute.String("quota.outcome", string(e.Outcome)),
	}
	if e.Job != "" {
		attrs = append(attrs, attribute.String("quota.job", e.Job))
	}
	if e.Outcome == quota.OutcomeRefused {
		attrs = append(attrs, attribute.String("quota.budget", e.Budget), attribute.Float64("quota.retry_after", e.RetryAfter.Seconds()))
	}
	_, sp := o.tracer.Start(ctx, "quota.take", trace.WithTimestamp(start), trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindInternal))
	if e.Outcome == quota.OutcomeFailed {
		sp.SetStatus(codes.Error, "quota: store unavailable")
	}
	sp.End(trace.WithTimestamp(start.Add(e.Latency)))
}
