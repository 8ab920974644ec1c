package quota_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// hidden is a Store without TrueUp (its methods are backend.Store's only).
type hidden struct{ quota.Store }

// TestLimiterTrueUp: the upstream's used is derived from what a report
// says (Used; else Limit-Remaining; else the local limit less Remaining),
// and bad reports or stores are errors that say what is wrong.
func TestLimiterTrueUp(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	budgets := []quota.Budget{{Name: "req", Limit: 100, Window: quota.Sliding(time.Hour)}}
	clock := quota.WithClock(func() time.Time { return now })
	key := quota.Credential{Secret: "tok", Owner: "proj"}
	reset := now.Add(10 * time.Minute)
	for _, c := range []struct {
		what     string
		r        quota.Report
		upstream int64
	}{
		{"used said", quota.Report{Budget: "req", Limit: 500, Used: 40, Remaining: 1, Reset: reset}, 40},
		{"limit and remaining", quota.Report{Budget: "req", Limit: 500, Used: -1, Remaining: 450, Reset: reset}, 50},
		{"remaining only: the local limit", quota.Report{Budget: "req", Used: -1, Remaining: 30, Reset: reset}, 70},
		{"remaining above the limit", quota.Report{Budget: "req", Used: -1, Remaining: 300, Reset: reset}, 0},
	} {
		l, err := quota.New(quota.NewMemoryStore(), "api", budgets, clock)
		if err != nil {
			t.Fatal(err)
		}
		out, err := l.TrueUp(ctx, key, c.r)
		if err != nil || out.Upstream != c.upstream || out.Added != c.upstream || out.Usage.Used != c.upstream ||
			out.Usage.Remaining != 100-c.upstream || out.Budget != "req" {
			t.Fatalf("%s: TrueUp = %+v, %v; want upstream, added and used %d", c.what, out, err, c.upstream)
		}
		// the owner's other credentials see it
		if us, err := l.Status(ctx, quota.Credential{Secret: "other", Owner: "proj"}); err != nil || us[0].Used != c.upstream {
			t.Fatalf("%s: Status of another key of the owner = %+v, %v", c.what, us, err)
		}
	}
	l, _ := quota.New(quota.NewMemoryStore(), "api", budgets, clock)
	for _, c := range []struct {
		what, want string
		r          quota.Report
	}{
		{"unknown budget", `"nope"`, quota.Report{Budget: "nope", Used: 1, Reset: reset}},
		{"nothing said", "neither used nor remaining", quota.Report{Budget: "req", Used: -1, Remaining: -1, Reset: reset}},
	} {
		if _, err := l.TrueUp(ctx, key, c.r); !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: TrueUp error %v; want ErrInvalid naming %s", c.what, err, c.want)
		}
	}
	h, _ := quota.New(hidden{quota.NewMemoryStore()}, "api", budgets, clock)
	if _, err := h.TrueUp(ctx, key, quota.Report{Budget: "req", Used: 1, Reset: reset}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("TrueUp on a store without TrueUpper: %v; want errors.ErrUnsupported", err)
	}
}
