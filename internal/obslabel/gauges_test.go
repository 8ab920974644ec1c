package obslabel

import (
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// TestGaugesResetRoundsUp: quota_reset_seconds (and OpenTelemetry's
// quota.reset) follow the rule of quota_store_reset_seconds, the dashboard
// and quotactl: whole seconds rounded up, never 0 while capacity is still
// to come back.
func TestGaugesResetRoundsUp(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 17, 0, 0, 0, time.UTC)
	var g Gauges
	g.Observe(quota.Event{Kind: quota.EventDecision, Outcome: quota.OutcomeAdmitted, API: "github", Usage: []quota.Usage{
		{Budget: "core", Window: quota.Sliding(time.Minute), Limit: 10, Used: 10, Reset: t0.Add(time.Minute)},
	}}, "ci", func() time.Time { return t0 })
	for _, tt := range []struct {
		at   time.Duration
		want float64
	}{{0, 60}, {59*time.Second + 700*time.Millisecond, 1}, {time.Minute, 0}} {
		s := g.Snapshot(t0.Add(tt.at))
		if len(s) != 1 || s[0].Reset != tt.want {
			t.Errorf("%v after the charge: %+v, want reset %v", tt.at, s, tt.want)
		}
	}
}
