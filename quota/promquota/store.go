package promquota

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotactl/quotactl/quota"
)

// The series a StoreCollector reports, one of each per api, budget and
// owner: the store's view, shared by every process that uses it.
const (
	StoreUsedName         = "quota_store_used_units"
	StoreLimitName        = "quota_store_limit_units"
	StoreRemainingName    = "quota_store_remaining_units"
	StoreResetName        = "quota_store_reset_seconds"
	StoreExhaustedName    = "quota_store_exhausted"
	StoreUpName           = "quota_store_up"
	storeDefaultTimeout   = 10 * time.Second
	shortFingerprintChars = 8
)

var (
	storeLabels   = []string{"api", "budget", "owner"}
	storeUsed     = prometheus.NewDesc(StoreUsedName, "Units counted in the budget's window now, as the store holds them.", storeLabels, nil)
	storeLimit    = prometheus.NewDesc(StoreLimitName, "The budget's limit in units per window.", storeLabels, nil)
	storeRemain   = prometheus.NewDesc(StoreRemainingName, "Units left in the budget's window now (0 while the budget is marked spent).", storeLabels, nil)
	storeReset    = prometheus.NewDesc(StoreResetName, "Seconds until capacity next frees: a daily budget's reset, or when a sliding window's oldest entry leaves it, and no earlier than the end of a mark that the budget is spent (0 when the window is empty and unmarked).", storeLabels, nil)
	storeExhaust  = prometheus.NewDesc(StoreExhaustedName, "1 while the budget is marked spent (the upstream said so), else 0.", storeLabels, nil)
	storeUpMetric = prometheus.NewDesc(StoreUpName, "1 if the last scrape read the store, 0 if the store could not be read.", nil, nil)
)

// StoreCollector is a prometheus.Collector that reads a quota.Store on every
// scrape and reports, per api, budget and owner, the units used, the limit,
// the units remaining, the seconds until capacity next frees and whether the
// budget is marked spent. Because it reads the shared store, one collector
// (such as `quotactl serve`'s /metrics) exports the usage of every process
// that charges the store, not only its own.
//
// Cardinality: one series of each kind per (api, budget, owner) the store
// lists: bounded by the budgets defined and the credentials recorded, never by
// traffic. The owner label is the owner's name; for a credential that is its
// own owner (and the keys rotated under it), its label, or the first 8
// digits of its fingerprint when it has none or a named owner of the API
// bears that label (the same short form quotactl prints): each account has
// its own series; never a secret, which the store never holds.
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
	for _, d := range []*prometheus.Desc{storeUsed, storeLimit, storeRemain, storeReset, storeExhaust, storeUpMetric} {
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

// read gathers every usage series, or fails whole.
func (c *StoreCollector) read(ctx context.Context) ([]prometheus.Metric, error) {
	apis, err := c.store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("promquota: list store: %w", err)
	}
	var out []prometheus.Metric
	for _, a := range apis {
		// An operator's definition ('quotactl budget set') is the one in
		// force over the program's.
		over, err := quota.Overrides(ctx, c.store, a.Name)
		if err != nil {
			return nil, fmt.Errorf("promquota: overrides of %s: %w", a.Name, err)
		}
		a.Budgets, _ = quota.ApplyOverrides(a.Budgets, over)
		if len(a.Budgets) == 0 {
			continue
		}
		var opts []quota.Option
		if c.clock != nil {
			opts = append(opts, quota.WithClock(c.clock))
		}
		l, err := quota.New(c.store, a.Name, a.Budgets, opts...)
		if err != nil {
			return nil, fmt.Errorf("promquota: stored budgets of %s: %w", a.Name, err)
		}
		for _, acct := range ownerLabels(a.Credentials) {
			key, owner := acct[0], acct[1]
			us, err := l.StatusOf(ctx, key)
			if err != nil {
				return nil, fmt.Errorf("promquota: usage of %s: %w", a.Name, err)
			}
			now := c.now()
			for _, u := range us {
				lv := []string{a.Name, u.Budget, owner}
				exhausted := 0.0
				if !u.ExhaustedUntil.IsZero() {
					exhausted = 1
				}
				out = append(out,
					prometheus.MustNewConstMetric(storeUsed, prometheus.GaugeValue, float64(u.Used), lv...),
					prometheus.MustNewConstMetric(storeLimit, prometheus.GaugeValue, float64(u.Limit), lv...),
					prometheus.MustNewConstMetric(storeRemain, prometheus.GaugeValue, float64(u.Remaining), lv...),
					prometheus.MustNewConstMetric(storeReset, prometheus.GaugeValue, ResetSeconds(u, now), lv...),
					prometheus.MustNewConstMetric(storeExhaust, prometheus.GaugeValue, exhausted, lv...),
				)
			}
		}
	}
	return out, nil
}

func (c *StoreCollector) now() time.Time {
	if c.clock != nil {
		return c.clock()
	}
	return time.Now()
}

// ResetSeconds returns the seconds from now until u's capacity next frees: a
// daily budget's next reset, else when a sliding window's oldest counted
// entry leaves it; 0 when nothing is counted. While the budget is marked
// spent (u.ExhaustedUntil), nothing frees before the mark ends.
func ResetSeconds(u quota.Usage, now time.Time) float64 {
	at := u.Reset
	if u.Window.IsDaily() {
		at = u.Window.NextReset(now)
	}
	if u.ExhaustedUntil.After(at) {
		at = u.ExhaustedUntil
	}
	if at.IsZero() || !at.After(now) {
		return 0
	}
	return at.Sub(now).Seconds()
}

// accountOf is the account a credential's budgets are kept under: its
// owner, or the credential itself (its fingerprint) when it is its own.
func accountOf(c quota.CredentialInfo) string {
	if c.Owner != "" {
		return c.Owner
	}
	return c.ID
}

// ownerLabels returns, for each account of one API's credentials, sorted by
// account, the account and its owner label value: a named owner's name; for
// an account that is a credential's fingerprint (a credential that is its
// own owner, and the keys rotated under it), the label of that credential,
// else the short form of the fingerprint. Label values are unique within
// the API: a credential's label that a named owner also bears (a key
// labelled "k1" and a project named "k1") would merge two accounts into one
// set of series, and the registry would drop one of them; such an account
// is labelled by its short fingerprint (the full one if that too is taken),
// as quotactl status shows it.
func ownerLabels(creds []quota.CredentialInfo) [][2]string {
	selfLabel := map[string]string{} // fingerprint account -> its credential's label
	for _, c := range creds {
		acct := accountOf(c)
		if _, ok := selfLabel[acct]; !ok && isFingerprint(acct) {
			selfLabel[acct] = ""
		}
		if acct == c.ID && c.Label != "" {
			selfLabel[acct] = c.Label
		}
	}
	taken := map[string]bool{}
	var named, self []string
	for _, c := range creds {
		acct := accountOf(c)
		if _, ok := selfLabel[acct]; ok {
			if !slices.Contains(self, acct) {
				self = append(self, acct)
			}
		} else if !taken[acct] {
			taken[acct] = true
			named = append(named, acct)
		}
	}
	slices.Sort(self)
	out := make([][2]string, 0, len(named)+len(self))
	for _, acct := range named {
		out = append(out, [2]string{acct, acct})
	}
	for _, acct := range self {
		v := acct
		for _, try := range []string{selfLabel[acct], acct[:min(shortFingerprintChars, len(acct))]} {
			if try != "" && !taken[try] {
				v = try
				break
			}
		}
		taken[v] = true
		out = append(out, [2]string{acct, v})
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return out
}

// isFingerprint reports whether an account is a credential's fingerprint
// rather than an owner's name.
func isFingerprint(account string) bool {
	return len(account) == quota.FingerprintLen && strings.Trim(account, "0123456789abcdef") == ""
}
