package jobs_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

// logBuf collects a scheduler's log lines from any goroutine.
type logBuf struct{ testkit.Buffer }

// lines returns the logged lines that contain every one of subs.
func (l *logBuf) lines(subs ...string) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		ok := line != ""
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

func (l *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// newClock returns a clock tests move by hand, at 09:00 UTC on a Monday.
func newClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
}

// newLimiter returns a limiter on store for api "youtube" with the budgets
// given as name, limit pairs over a 1h sliding window, on clock.
func newLimiter(t *testing.T, store quota.Store, clock func() time.Time, budgets ...any) *quota.Limiter {
	t.Helper()
	var bs []quota.Budget
	for i := 0; i < len(budgets); i += 2 {
		bs = append(bs, quota.Budget{Name: budgets[i].(string), Limit: int64(budgets[i+1].(int)), Window: quota.Sliding(time.Hour)})
	}
	l, err := quota.New(store, "youtube", bs, quota.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var key = quota.Credential{Secret: "AIza-test-key", Label: "yt-key-1"}

// take charges n units of budget under ctx.
func take(ctx context.Context, l *quota.Limiter, budget string, n int64) (*quota.Reservation, error) {
	return l.Take(ctx, key, quota.Units(budget, n))
}

func history(t *testing.T, store quota.StateStore, job string) []jobs.Record {
	t.Helper()
	h, err := jobs.History(context.Background(), store, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
