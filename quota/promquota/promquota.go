// Package promquota exports a quota.Limiter's events as Prometheus metrics.
// A Collector is both a quota.Observer (give it to quota.WithObserver) and
// a prometheus.Collector (register it):
//
//	c := promquota.New()
//	prometheus.MustRegister(c)
//	lim, _ := quota.New(store, "youtube", budgets, quota.WithObserver(c))
//
// The series, all from the decisions this process makes:
//
//	quota_decisions_total{api,owner,method,outcome}        counter
//	quota_units_total{api,budget,owner,method,outcome}     counter: units admitted (or unmetered), or asked and refused (or failed)
//	quota_refunded_units_total{api,budget,owner,method}    counter
//	quota_decision_duration_seconds{api,outcome}           histogram: time to decide, store round trip included
//	quota_threshold_crossings_total{api,budget,owner,percent} counter: thresholds this process reported (once per window across processes)
//	quota_exhaust_marks_total{api,budget,owner}            counter: budgets marked spent (the upstream said so)
//	quota_store_errors_total{api}                          counter
//	quota_store_losses_total{api,budget}                   counter: the store lost recorded usage
//	quota_upstream_reports_total{api,budget,owner}         counter: reports read from upstream responses
//	quota_upstream_reports_ignored_total{api}              counter: report values that could not be read
//	quota_trueup_units_total{api,budget,owner}             counter: units the upstream counted that the meter had not (drift)
//	quota_truedown_units_total{api,budget,owner}           counter: units given back by opt-in lowering
//	quota_limits_learned_total{api,budget,owner,outcome}   counter: limits read from reports (applied, recorded)
//	quota_settles_total{api,owner,method,outcome}          counter: estimated calls settled to their actual cost (settled, kept; excess: per budget over)
//	quota_excess_units_total{api,budget,owner,method}      counter: units calls cost beyond their estimate, recorded on top
//	quota_used_units{api,budget,owner}                     gauge: units used in the window, as of the last decision seen
//	quota_limit_units{api,budget,owner}                    gauge
//	quota_remaining_units{api,budget,owner}                gauge: 0 while the budget is marked spent
//	quota_reset_seconds{api,budget,owner}                  gauge: seconds until capacity next frees (a daily reset, or a sliding window's oldest entry expiring); 0 when nothing is used
//
// A StoreCollector (NewStoreCollector) reads the shared store on each
// scrape instead, for every process that charges it:
//
//	quota_store_used_units{api,budget,owner}               gauge (and quota_store_limit_units, _remaining_units, _reset_seconds, _exhausted)
//	quota_store_up                                         gauge: 0 when the store could not be read
//	quota_budget_info{api,budget,unit,window}              gauge, always 1: the unit the budget's series count (units, tokens, usd-micro) and its window
//
// Amounts count in the budget's unit (quota.Budget.Unit: a spend budget in
// micro-dollars), which no series but quota_budget_info names; join it on
// (api, budget): quota_store_used_units * on(api, budget) group_left(unit)
// quota_budget_info.
//
// outcome is admitted, refused, unmetered or failed (quota.Outcome).
//
// Cardinality is bounded. api and budget come from the Limiter's budget
// definitions; method from its cost table; owner is the credential's owner
// name (quota.Credential.Owner), else its label, else "unlabelled": never a
// fingerprint or a secret. As a guard against an unbounded set reaching a
// label (a table that names methods from request paths, labels made per
// request), at most WithMaxOwners distinct owners (default 100) and
// WithMaxMethods distinct methods (default 200) get series of their own;
// the rest are counted under "other". The worst case is about
// apis x budgets x owners x methods x 4 outcomes series of
// quota_units_total.
//
// The gauges show what this process last saw (adjusted by its own refunds
// and exhaust marks): with several processes sharing a store, each exports
// its own view; `quotactl serve` exports /metrics computed from the store.
package promquota

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotactl/quotactl/internal/obslabel"
	"github.com/quotactl/quotactl/quota"
)

// Collector turns quota events into Prometheus metrics. It is safe for
// concurrent use and may observe several Limiters. Make one with New.
type Collector struct {
	clock  func() time.Time
	labels obslabel.Set // bounded owner and method label values

	decisions *prometheus.CounterVec
	units     *prometheus.CounterVec
	refunded  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	crossings *prometheus.CounterVec
	exhausts  *prometheus.CounterVec
	errors    *prometheus.CounterVec
	losses    *prometheus.CounterVec
	reports   *prometheus.CounterVec
	ignored   *prometheus.CounterVec
	trueUp    *prometheus.CounterVec
	lowered   *prometheus.CounterVec
	learned   *prometheus.CounterVec
	settles   *prometheus.CounterVec
	excess    *prometheus.CounterVec

	usedDesc, limitDesc, remainingDesc, resetDesc *prometheus.Desc

	gauges obslabel.Gauges
}

var (
	_ quota.Observer       = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)

// Option configures a Collector in New.
type Option func(*Collector)

// WithClock sets the clock quota_reset_seconds counts from. Default:
// time.Now. Give the Limiter's clock when it has one (quota.WithClock).
func WithClock(clock func() time.Time) Option { return func(c *Collector) { c.clock = clock } }

// WithMaxOwners sets how many distinct owner label values get series of
// their own; later ones are counted as "other". Default: 100.
func WithMaxOwners(n int) Option { return func(c *Collector) { c.labels.MaxOwners = n } }

// WithMaxMethods sets how many distinct method label values get series of
// their own; later ones are counted as "other". Default: 200.
func WithMaxMethods(n int) Option { return func(c *Collector) { c.labels.MaxMethods = n } }

// WithBuckets sets the upper bounds (seconds) of the decision latency
// histogram. Default: DefaultBuckets.
func WithBuckets(b []float64) Option {
	return func(c *Collector) { c.latency = newLatency(b) }
}

// DefaultBuckets are the decision latency histogram's upper bounds in
// seconds: 100µs to 1s.
var DefaultBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// Other is the label value that stands for owners and methods past the
// WithMaxOwners and WithMaxMethods bounds.
const Other = obslabel.Other

// Unlabelled is the owner label of a credential with neither an owner name
// nor a label.
const Unlabelled = obslabel.Unlabelled

func newLatency(b []float64) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "quota_decision_duration_seconds", Help: "Time a quota Limiter took to decide a charge, store round trip included.",
		Buckets: b,
	}, []string{"api", "outcome"})
}

// New returns a Collector; see the package doc for its series.
func New(opts ...Option) *Collector {
	c := &Collector{
		clock: time.Now, labels: obslabel.Set{MaxOwners: 100, MaxMethods: 200},
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_decisions_total", Help: "Charges decided, by outcome (admitted, refused, unmetered, failed).",
		}, []string{"api", "owner", "method", "outcome"}),
		units: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_units_total", Help: "Units of the charges decided, per budget and outcome: admitted or unmetered units spent, refused or failed units asked.",
		}, []string{"api", "budget", "owner", "method", "outcome"}),
		refunded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_refunded_units_total", Help: "Units given back by refunds (requests that never reached the upstream).",
		}, []string{"api", "budget", "owner", "method"}),
		latency: newLatency(DefaultBuckets),
		crossings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_threshold_crossings_total", Help: "Budget thresholds crossed (percent of the limit), once per window across processes.",
		}, []string{"api", "budget", "owner", "percent"}),
		exhausts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_exhaust_marks_total", Help: "Budgets marked spent until their reset (the upstream said so).",
		}, []string{"api", "budget", "owner"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_store_errors_total", Help: "Store operations that failed (unreachable, timed out).",
		}, []string{"api"}),
		losses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_store_losses_total", Help: "Times the store was found to have lost recorded usage.",
		}, []string{"api", "budget"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_upstream_reports_total", Help: "Reports of a budget's standing read from upstream responses.",
		}, []string{"api", "budget", "owner"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_upstream_reports_ignored_total", Help: "Upstream report values that could not be read (malformed, contradictory).",
		}, []string{"api"}),
		trueUp: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_trueup_units_total", Help: "Units the upstream reported spent that the meter had not counted (drift), added to the store.",
		}, []string{"api", "budget", "owner"}),
		lowered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_truedown_units_total", Help: "Units given back because the upstream reported more left (opt-in lowering).",
		}, []string{"api", "budget", "owner"}),
		learned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_limits_learned_total", Help: "Limits read from upstream reports that differ from the one in force, by outcome (applied, recorded).",
		}, []string{"api", "budget", "owner", "outcome"}),
		settles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_settles_total", Help: "Estimated calls settled to the cost their response reported, by outcome (settled; kept: the estimate stayed; excess: once per budget that cost more).",
		}, []string{"api", "owner", "method", "outcome"}),
		excess: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quota_excess_units_total", Help: "Units calls cost beyond their estimate, recorded on top of it.",
		}, []string{"api", "budget", "owner", "method"}),
		usedDesc:      prometheus.NewDesc("quota_used_units", "Units used in the budget's window, as of the last decision this process saw.", []string{"api", "budget", "owner"}, nil),
		limitDesc:     prometheus.NewDesc("quota_limit_units", "The budget's limit.", []string{"api", "budget", "owner"}, nil),
		remainingDesc: prometheus.NewDesc("quota_remaining_units", "Units left in the budget's window (0 while marked spent).", []string{"api", "budget", "owner"}, nil),
		resetDesc:     prometheus.NewDesc("quota_reset_seconds", "Seconds until the budget next frees capacity (0 when nothing is used).", []string{"api", "budget", "owner"}, nil),
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Observe implements quota.Observer.
func (c *Collector) Observe(e quota.Event) {
	owner, method := c.labels.Of(e)
	c.gauges.Observe(e, owner, c.clock)
	switch e.Kind {
	case quota.EventDecision:
		out := string(e.Outcome)
		c.decisions.WithLabelValues(e.API, owner, method, out).Inc()
		c.latency.WithLabelValues(e.API, out).Observe(e.Latency.Seconds())
		for _, u := range e.Usage {
			c.units.WithLabelValues(e.API, u.Budget, owner, method, out).Add(float64(u.Cost))
		}
	case quota.EventRefund:
		for _, u := range e.Usage {
			c.refunded.WithLabelValues(e.API, u.Budget, owner, method).Add(float64(u.Cost))
		}
	case quota.EventThreshold:
		c.crossings.WithLabelValues(e.API, e.Budget, owner, strconv.Itoa(e.Percent)).Inc()
	case quota.EventExhaust:
		if !e.Until.IsZero() {
			c.exhausts.WithLabelValues(e.API, e.Budget, owner).Inc()
		}
	case quota.EventStoreError:
		c.errors.WithLabelValues(e.API).Inc()
	case quota.EventStoreLoss:
		c.losses.WithLabelValues(e.API, e.Budget).Inc()
	case quota.EventReport:
		c.reports.WithLabelValues(e.API, e.Budget, owner).Inc()
	case quota.EventReportIgnored:
		c.ignored.WithLabelValues(e.API).Inc()
	case quota.EventTrueUp:
		if e.Units > 0 {
			c.trueUp.WithLabelValues(e.API, e.Budget, owner).Add(float64(e.Units))
		} else if e.Units < 0 {
			c.lowered.WithLabelValues(e.API, e.Budget, owner).Add(float64(-e.Units))
		}
	case quota.EventLimitLearned:
		c.learned.WithLabelValues(e.API, e.Budget, owner, string(e.Outcome)).Inc()
	case quota.EventSettle:
		c.settles.WithLabelValues(e.API, owner, method, string(e.Outcome)).Inc()
		if e.Outcome == quota.OutcomeExcess && e.Err == nil {
			c.excess.WithLabelValues(e.API, e.Budget, owner, method).Add(float64(e.Units))
		}
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.vecs() {
		v.Describe(ch)
	}
	ch <- c.usedDesc
	ch <- c.limitDesc
	ch <- c.remainingDesc
	ch <- c.resetDesc
}

func (c *Collector) vecs() []prometheus.Collector {
	return []prometheus.Collector{c.decisions, c.units, c.refunded, c.latency, c.crossings, c.exhausts, c.errors, c.losses, c.reports, c.ignored, c.trueUp, c.lowered, c.learned, c.settles, c.excess}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, v := range c.vecs() {
		v.Collect(ch)
	}
	for _, g := range c.gauges.Snapshot(c.clock()) {
		ch <- prometheus.MustNewConstMetric(c.usedDesc, prometheus.GaugeValue, float64(g.Used), g.API, g.Budget, g.Owner)
		ch <- prometheus.MustNewConstMetric(c.limitDesc, prometheus.GaugeValue, float64(g.Limit), g.API, g.Budget, g.Owner)
		ch <- prometheus.MustNewConstMetric(c.remainingDesc, prometheus.GaugeValue, float64(g.Remaining), g.API, g.Budget, g.Owner)
		ch <- prometheus.MustNewConstMetric(c.resetDesc, prometheus.GaugeValue, g.Reset, g.API, g.Budget, g.Owner)
	}
}
