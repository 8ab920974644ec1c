package quota_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// FuzzTrueUp: whatever a report says, Limiter.TrueUp never panics, and
// either says what is wrong (ErrInvalid) or leaves the budget counting
// at least what the upstream reported, when its reset is ahead, and never
// less than before.
func FuzzTrueUp(f *testing.F) {
	f.Add(int64(40), int64(-1), int64(0), int64(600), "units", int64(10))
	f.Add(int64(-1), int64(25), int64(100), int64(1), "units", int64(0))
	f.Add(int64(-1), int64(-1), int64(0), int64(60), "units", int64(3))
	f.Add(int64(1<<62), int64(-5), int64(-7), int64(-60), "nope", int64(99))
	f.Fuzz(func(t *testing.T, used, remaining, limit, resetSec int64, budget string, taken int64) {
		now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
		l, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
			quota.WithClock(func() time.Time { return now }))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		key := quota.Credential{Secret: "k"}
		taken = min(max(taken, 1), 100)
		if _, err := l.Take(ctx, key, quota.Units("units", taken)); err != nil {
			t.Fatal(err)
		}
		resetSec = min(max(resetSec, -1<<30), 1<<30)
		r := quota.Report{Budget: budget, Used: used, Remaining: remaining, Limit: limit, Reset: now.Add(time.Duration(resetSec) * time.Second)}
		out, err := l.TrueUp(ctx, key, r)
		if err != nil {
			if !errors.Is(err, quota.ErrInvalid) {
				t.Fatalf("TrueUp(%+v) = %v; want nil or ErrInvalid", r, err)
			}
			return
		}
		if out.Added < 0 || out.Counted != taken || out.Usage.Used != taken+out.Added {
			t.Fatalf("TrueUp(%+v) = %+v; want counted %d, added >= 0", r, out, taken)
		}
		if resetSec > 0 && out.Usage.Used < out.Upstream {
			t.Fatalf("TrueUp(%+v) = %+v; want at least the upstream's %d counted", r, out, out.Upstream)
		}
	})
}
