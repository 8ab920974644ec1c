package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// ExampleOpen meters a credential's YouTube Data API units in Redis, shared
// by every process that uses the same Redis and prefix. It runs on an
// in-process miniredis so that it works anywhere; give Open a client of your
// own server (redis.NewClient, redis.NewFailoverClient for Sentinel,
// redis.NewClusterClient) instead. Open, unlike New, refuses a server whose
// eviction policy could drop the limiter's keys.
func ExampleOpen() {
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	la, _ := time.LoadLocation("America/Los_Angeles")
	srv.SetTime(time.Date(2026, 11, 22, 23, 0, 0, 0, la)) // Redis TIME is the store's clock

	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()
	ctx := context.Background()
	store, err := redisstore.Open(ctx, client, redisstore.WithPrefix("ingest:"))
	if err != nil {
		panic(err)
	}

	limiter, err := quota.New(store, "youtube", []quota.Budget{
		{Name: "units", Limit: 10000, Window: quota.Daily(la)},
		{Name: "search", Limit: 100, Window: quota.Daily(la)},
	})
	if err != nil {
		panic(err)
	}
	key := quota.Credential{Secret: "AIza-your-api-key", Label: "yt-key-1"}

	res, err := limiter.Take(ctx, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 9999}})
	if err != nil {
		panic(err)
	}
	fmt.Println("units left:", res.Remaining("units"))

	_, err = limiter.Take(ctx, key, quota.Charge{Method: "search.list", Units: map[string]int64{"units": 100, "search": 1}})
	var ee *quota.ExhaustedError
	if errors.As(err, &ee) {
		fmt.Printf("refused: %s/%s used %d of %d, retry after %v\n", ee.API, ee.Budget, ee.Used, ee.Limit, ee.RetryAfter)
	}

	srv.SetTime(time.Date(2026, 11, 23, 0, 0, 0, 0, la)) // midnight in Los Angeles
	res, err = limiter.Take(ctx, key, quota.Charge{Method: "search.list", Units: map[string]int64{"units": 100, "search": 1}})
	if err != nil {
		panic(err)
	}
	fmt.Println("after the reset:", res.Remaining("units"), "units,", res.Remaining("search"), "searches left")
	// Output:
	// units left: 1
	// refused: youtube/units used 9999 of 10000, retry after 1h0m0s
	// after the reset: 9900 units, 99 searches left
}
