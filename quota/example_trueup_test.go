package quota_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// Another client spends the same upstream quota unmetered: a response
// reports more used than the store counts, and TrueUp counts the
// difference until the upstream's reset, so every process refuses what
// the upstream would.
func ExampleLimiter_TrueUp() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	limiter, _ := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{
		{Name: "requests", Limit: 100, Window: quota.Sliding(time.Hour)},
	}, quota.WithClock(func() time.Time { return now }))
	key := quota.Credential{Secret: "token"}
	ctx := context.Background()

	limiter.Take(ctx, key, quota.Units("requests", 10))
	// the upstream's response: 75 of 100 left, reset at 12:20
	out, err := limiter.TrueUp(ctx, key, quota.Report{Budget: "requests", Limit: 100, Used: -1, Remaining: 25,
		Reset: now.Add(20 * time.Minute)})
	if err != nil {
		panic(err)
	}
	fmt.Printf("upstream %d, counted %d, added %d, remaining %d\n", out.Upstream, out.Counted, out.Added, out.Usage.Remaining)

	_, err = limiter.Take(ctx, key, quota.Units("requests", 30))
	var exhausted *quota.ExhaustedError
	if errors.As(err, &exhausted) {
		fmt.Println("30 more: retry at", exhausted.RetryAt.Format("15:04"))
	}
	// Output:
	// upstream 75, counted 10, added 65, remaining 25
	// 30 more: retry at 12:20
}
