package promquota

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/quota"
)

// The series a StoreCollector reports, one of each per api, budget and
// owner: the store's view, shared by every process that uses it.
const (
	StoreUsedName       = "quota_store_used_units"
	StoreLimitName      = "quota_store_limit_units"
	StoreRemainingName  = "quota_store_remaining_units"
	StoreResetName      = "quota_store_reset_seconds"
	StoreExhaustedName  = "quota_store_exhausted"
	StoreUpName         = "quota_store_up"
	storeDefaultTimeout = 10 * time.Second
)

// StoreBudgetInfoName is the series a StoreCollector reports once per api
// and budget (not per owner), always 1, whose labels name the budget's
// unit and window.
const StoreBudgetInfoName = "quota_budget_info"

var (
	storeLabels   = []string{"api", "budget", "owner"}
	storeUsed     = prometheus.NewDesc(StoreUsedName, "Units counted in the budget's window now, as the store holds them.", storeLabels, nil)
	storeLimit    = prometheus.NewDesc(StoreLimitName, "The budget's limit in units per window.", storeLabels, nil)
	storeRemain   = prometheus.NewDesc(StoreRemainingName, "Units left in the budget's window now (0 while the budget is marked spent).", storeLabels, nil)
	storeReset    = prometheus.NewDesc(StoreResetName, "Seconds until capacity next frees: a daily budget's reset, or when a sliding window's oldest entry leaves it, and no earlier than the end of a mark that the budget is spent (0 when the window is empty and unmarked).", storeLabels, nil)
	storeExhaust  = prometheus.NewDesc(StoreExhaustedName, "1 while the budget is marked spent (the upstream said so), else 0.", storeLabels, nil)
	storeUpMetric = prometheus.NewDesc(StoreUpName, "1 if the last scrape read the store, 0 if the store could not be read.", nil, nil)
	storeInfo     = prometheus.NewDesc(StoreBudgetInfoName, "Always 1: a budget's unit (what its series count: units by default, tokens, usd-micro for micro-dollars) and window. Join on (api, budget) to read another series in its unit.", []string{"api", "budget", "unit", "window"}, nil)
)

// StoreCollector is a prometheus.Collector that reads a quota.Store on every
// scrape and reports, per api, budget and owner, the units used, the limit,
// the units remaining, the seconds until capacity next frees (ResetSeconds)
// and whether the budget is marked spent: the figures the dashboard and
// `quotactl status --json` show, built by the same code. Because it reads the shared store, one collector
// (such as `quotactl serve`'s /metrics) exports the usage of every process
// that charges the store, not only its own.
//
// Those series count in the budget's unit without saying it (a label added
// to them would break the queries that use them): quota_budget_info{api,
// budget,unit,window}, always 1, says it, one series per budget the store
// defines, with the api and budget labels of the others, so that
//
//	quota_store_used_units * on(api, budget) group_left(unit) quota_budget_info
//
// is the usage with its unit ("tokens"; "usd-micro": micro-dollars, divide
// by 1e6 for dollars; "units" when the budget declares none). The
// Collector's quota_*_units series join with it the same way.
//
// Cardinality: one series of each kind per (api, budget, owner) the store
// lists (quota_budget_info: per (api, budget)): bounded by the budgets defined and the credentials recorded, never by
// traffic. The owner label is the owner's name; for a credential that is its
// own owner (and the keys rotated under it), its label, or the first 8
// digits of its fingerprint when it has none or a named owner of the API
// bears that label (the name the dashboard shows): each account has its own
// series; never a secret, which the store never holds.
//
// A StoreCollector is safe for concurrent use. Build one with
// NewStoreCollector.
type StoreCollector struct {
	store   quota.Store
	clock   func() time.Time
	timeout time.Duration
}

var _ prometheus.Collector = (*StoreCollector)(nil)

// StoreOption configures a StoreCollector.
type StoreOption func(*StoreCollector)

// WithStoreClock makes the collector read usage as of clock's time instead of
// the store's own clock (for tests; quota.WithClock is passed the same clock).
func WithStoreClock(clock func() time.Time) StoreOption {
	return func(c *StoreCollector) { c.clock = clock }
}

// WithStoreTimeout bounds how long one scrape may read the store. Default 10s.
func WithStoreTimeout(d time.Duration) StoreOption {
	return func(c *StoreCollector) { c.timeout = d }
}

// NewStoreCollector returns a collector over store. Register it with a
// prometheus.Registry.
func NewStoreCollector(store quota.Store, opts ...StoreOption) *StoreCollector {
	c := &StoreCollector{store: store, timeout: storeDefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{storeUsed, storeLimit, storeRemain, storeReset, storeExhaust, storeUpMetric, storeInfo} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it reads every budget of every
// owner the store lists. When the store cannot be read, quota_store_up is 0
// and the scrape carries no usage series, so an alert on stale values cannot
// mistake an outage for a quiet day.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	ms, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(storeUpMetric, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(storeUpMetric, prometheus.GaugeValue, 1)
	for _, m := range ms {
		ch <- m
	}
}

// read gathers every usage series, or fails whole: one of each kind per
// row of view.Status that has an owner, labelled with the owner's name,
// and the info series of every budget defined.
func (c *StoreCollector) read(ctx context.Context) ([]prometheus.Metric, error) {
	var opts []view.Option
	if c.clock != nil {
		opts = append(opts, view.WithClock(c.clock))
	}
	r := view.New(c.store, opts...)
	apis, err := r.APIs(ctx)
	if err != nil {
		return nil, fmt.Errorf("promquota: %w", err)
	}
	rows, err := r.Status(ctx, apis...)
	if err != nil {
		return nil, fmt.Errorf("promquota: %w", err)
	}
	var out []prometheus.Metric
	for _, a := range apis {
		for _, b := range a.Budgets {
			out = append(out, prometheus.MustNewConstMetric(storeInfo, prometheus.GaugeValue, 1, a.Name, b.Name, b.UnitOf(), b.Window.String()))
		}
	}
	for _, s := range rows {
		if s.Owner == "" {
			continue // a budget nothing was charged to: no owner yet
		}
		lv := []string{s.API, s.Budget, s.OwnerName}
		exhausted := 0.0
		if s.ExhaustedUntil != nil {
			exhausted = 1
		}
		out = append(out,
			prometheus.MustNewConstMetric(storeUsed, prometheus.GaugeValue, float64(s.Used), lv...),
			prometheus.MustNewConstMetric(storeLimit, prometheus.GaugeValue, float64(s.Limit), lv...),
			prometheus.MustNewConstMetric(storeRemain, prometheus.GaugeValue, float64(s.Remaining), lv...),
			prometheus.MustNewConstMetric(storeReset, prometheus.GaugeValue, s.ResetSeconds, lv...),
			prometheus.MustNewConstMetric(storeExhaust, prometheus.GaugeValue, exhausted, lv...),
		)
	}
	return out, nil
}

// ResetSeconds returns the time from now until u's capacity next frees, in
// whole seconds rounded up (so it says 0 only once capacity is back): a
// daily budget's next reset, else when a sliding window's oldest counted
// entry leaves it; 0 when nothing is counted. While the budget is marked
// spent (u.ExhaustedUntil), nothing frees before the mark ends. It is the
// value of quota_store_reset_seconds, of the dashboard's reset_seconds and
// of `quotactl status --json`.
func ResetSeconds(u quota.Usage, now time.Time) float64 { return view.ResetSeconds(u, now) }
