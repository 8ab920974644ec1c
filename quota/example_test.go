package quota_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// A limiter meters one API's budgets per credential. Take charges before the
// call; a spent budget is an *ExhaustedError saying exactly when to retry.
func ExampleNew() {
	la, _ := time.LoadLocation("America/Los_Angeles")
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, la) // a fixed clock, for the example's output

	limiter, err := quota.New(quota.NewMemoryStore(), "youtube", []quota.Budget{
		{Name: "units", Limit: 10000, Window: quota.Daily(la)}, // resets at midnight Pacific
		{Name: "search", Limit: 100, Window: quota.Daily(la)},  // search.list's own bucket
	}, quota.WithClock(func() time.Time { return now }))
	if err != nil {
		panic(err)
	}
	key := quota.Credential{Secret: "AIza...", Label: "yt-key-1"}
	ctx := context.Background()

	res, err := limiter.Take(ctx, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 1}})
	if err != nil {
		panic(err)
	}
	fmt.Println("units left:", res.Remaining("units"))

	for i := 0; ; i++ {
		_, err := limiter.Take(ctx, key, quota.Charge{Method: "search.list", Units: map[string]int64{"search": 1}})
		var exhausted *quota.ExhaustedError
		if errors.As(err, &exhausted) {
			fmt.Printf("after %d searches: %s/%s spent, retry in %v\n", i, exhausted.API, exhausted.Budget, exhausted.RetryAfter)
			break
		}
		if err != nil {
			panic(err) // not a spent budget: the store failed, or the charge is wrong
		}
	}
	// Output:
	// units left: 9999
	// after 100 searches: youtube/search spent, retry in 15h0m0s
}

// A sliding window is exact over any trailing span: capacity comes back
// entry by entry, and RetryAfter says when enough of it has.
func ExampleSliding() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	limiter, _ := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{
		{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)},
	}, quota.WithClock(func() time.Time { return now }))
	key := quota.Credential{Secret: "token"}
	ctx := context.Background()

	limiter.Take(ctx, key, quota.Units("units", 60)) // at 12:00
	now = now.Add(10 * time.Minute)
	limiter.Take(ctx, key, quota.Units("units", 40)) // at 12:10

	_, err := limiter.Take(ctx, key, quota.Units("units", 50))
	var exhausted *quota.ExhaustedError
	errors.As(err, &exhausted)
	fmt.Println("50 more units at", exhausted.RetryAt.Format("15:04"))
	// Output:
	// 50 more units at 13:00
}

// A monthly window resets at local midnight on the 1st: what the month
// spent counts, whatever its day, and a refusal's RetryAt is the 1st of
// the next month, in the budget's zone.
func ExampleMonthly() {
	paris, _ := time.LoadLocation("Europe/Paris")
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, paris)
	limiter, _ := quota.New(quota.NewMemoryStore(), "llm", []quota.Budget{
		{Name: "tokens", Limit: 1000000, Window: quota.Monthly(paris)},
	}, quota.WithClock(func() time.Time { return now }))
	key := quota.Credential{Secret: "token"}
	ctx := context.Background()

	limiter.Take(ctx, key, quota.Units("tokens", 600000)) // March 2nd
	now = time.Date(2026, 3, 30, 18, 0, 0, 0, paris)
	limiter.Take(ctx, key, quota.Units("tokens", 300000)) // March 30th

	_, err := limiter.Take(ctx, key, quota.Units("tokens", 200000))
	var exhausted *quota.ExhaustedError
	errors.As(err, &exhausted)
	fmt.Println("used:", exhausted.Used)
	fmt.Println("200000 more tokens on", exhausted.RetryAt.In(paris).Format("Jan 2 15:04 MST"))
	// Output:
	// used: 900000
	// 200000 more tokens on Apr 1 00:00 CEST
}

// Allow is Take for a caller that will neither refund nor settle: it says
// only whether the charge was admitted, and on the MemoryStore makes no
// allocation (x/time/rate's AllowN, with an exact weighted log behind it).
func ExampleLimiter_Allow() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	limiter, _ := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{
		{Name: "units", Limit: 10, Window: quota.Sliding(time.Minute)},
	}, quota.WithClock(func() time.Time { return now }))
	key := quota.Credential{Secret: "token"}
	ctx := context.Background()

	admitted := 0
	for range 4 {
		err := limiter.Allow(ctx, key, quota.Units("units", 3))
		var exhausted *quota.ExhaustedError
		if errors.As(err, &exhausted) {
			fmt.Println("refused; retry in", exhausted.RetryAfter)
			continue
		}
		if err != nil {
			panic(err) // not a spent budget: the store failed, or the charge is wrong
		}
		admitted++
	}
	fmt.Println("admitted:", admitted)
	// Output:
	// refused; retry in 1m0s
	// admitted: 3
}
