package quota_test

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// An Observer hears of each threshold a budget crosses, once per window
// across every process sharing the store.
func ExampleWithObserver() {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) // a test clock
	alert := quota.ObserverFunc(func(e quota.Event) {
		if e.Kind == quota.EventThreshold {
			u := e.Usage[0]
			fmt.Printf("%s/%s of %s crossed %d%%: %d of %d used\n", e.API, e.Budget, e.Label, e.Percent, u.Used, u.Limit)
		}
	})
	lim, err := quota.New(quota.NewMemoryStore(), "youtube",
		[]quota.Budget{{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}},
		quota.WithObserver(alert), quota.WithClock(func() time.Time { return now }))
	if err != nil {
		panic(err)
	}
	key := quota.Credential{Secret: "AIzaSy-example", Label: "yt-key-1"}
	for range 9 {
		if _, err := lim.Take(ctx, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 10}}); err != nil {
			panic(err)
		}
	}
	_ = lim.Flush(ctx) // events are delivered off the decision path
	// Output:
	// youtube/units of yt-key-1 crossed 50%: 50 of 100 used
	// youtube/units of yt-key-1 crossed 80%: 80 of 100 used
}
