package obslabel

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/quota"
)

// GaugeKey names the gauges of one budget: its API and name, and the
// bounded owner value (Set.Of).
type GaugeKey struct{ API, Budget, Owner string }

// GaugeValue is what the gauges of one budget show at an instant.
type GaugeValue struct {
	GaugeKey
	Used, Limit, Remaining int64
	// Reset is the whole seconds, rounded up, until the budget next
	// frees capacity (view.ResetSeconds' rule); 0 when nothing does.
	Reset float64
}

// Gauges keeps, per budget and owner, what this process last saw of each
// budget: the usage of its last decision, adjusted by its own refunds and
// exhaustion marks since. quota/promquota and quota/otelquota export the
// same gauges from it. Its zero value is ready; it is safe for concurrent
// use.
type Gauges struct {
	mu sync.Mutex
	m  map[GaugeKey]*gauge
}

type gauge struct {
	used, limit, remaining int64
	reset, exhaustedUntil  time.Time
}

// Observe updates the gauges from e, whose bounded owner value is owner.
// clock is the adapter's clock, read only when a refund needs to know
// whether an exhaustion mark still holds.
func (g *Gauges) Observe(e quota.Event, owner string, clock func() time.Time) {
	switch e.Kind {
	case quota.EventDecision:
		if e.Outcome != quota.OutcomeAdmitted && e.Outcome != quota.OutcomeRefused {
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.m == nil {
			g.m = map[GaugeKey]*gauge{}
		}
		for _, u := range e.Usage {
			k := GaugeKey{e.API, u.Budget, owner}
			s := g.m[k]
			if s == nil {
				s = &gauge{}
				g.m[k] = s
			}
			s.used, s.limit, s.remaining = u.Used, u.Limit, u.Remaining
			s.reset, s.exhaustedUntil = u.Reset, u.ExhaustedUntil
		}
	case quota.EventRefund:
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, u := range e.Usage {
			s := g.m[GaugeKey{e.API, u.Budget, owner}]
			if s == nil {
				continue
			}
			s.used = max(s.used-u.Cost, 0)
			if s.used == 0 && !u.Window.IsCalendar() {
				s.reset = time.Time{} // an empty sliding window frees nothing
			}
			if s.exhaustedUntil.IsZero() || !s.exhaustedUntil.After(clock()) {
				s.remaining = min(s.remaining+u.Cost, s.limit)
			}
		}
	case quota.EventExhaust:
		g.mu.Lock()
		defer g.mu.Unlock()
		s := g.m[GaugeKey{e.API, e.Budget, owner}]
		switch {
		case s == nil:
		case e.Until.IsZero(): // the mark was cleared
			s.exhaustedUntil, s.remaining = time.Time{}, max(s.limit-s.used, 0)
		default:
			s.exhaustedUntil, s.remaining = e.Until, 0
			if e.Until.After(s.reset) {
				s.reset = e.Until
			}
		}
	}
}

// Snapshot returns every budget's gauges at now, sorted by API, budget
// and owner. A mark that has ended gives its units back to Remaining.
func (g *Gauges) Snapshot(now time.Time) []GaugeValue {
	g.mu.Lock()
	out := make([]GaugeValue, 0, len(g.m))
	for k, s := range g.m {
		v := GaugeValue{GaugeKey: k, Used: s.used, Limit: s.limit, Remaining: s.remaining}
		if !s.exhaustedUntil.IsZero() && !s.exhaustedUntil.After(now) {
			v.Remaining = max(s.limit-s.used, 0) // the mark has ended
		}
		v.Reset = view.SecondsUntil(s.reset, now)
		out = append(out, v)
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(a, b GaugeValue) int {
		return cmp.Or(cmp.Compare(a.API, b.API), cmp.Compare(a.Budget, b.Budget), cmp.Compare(a.Owner, b.Owner))
	})
	return out
}
