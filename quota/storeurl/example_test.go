package storeurl_test

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storeurl"
)

func ExampleOpen() {
	ctx := context.Background()
	store, err := storeurl.Open(ctx, "memory:")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	l, err := quota.New(store, "youtube", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(24 * time.Hour)}})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := l.Take(ctx, quota.Credential{Secret: "AIza...", Label: "yt-key-1"}, quota.Units("units", 30))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("remaining:", res.Remaining("units"))
	// Output: remaining: 70
}

func ExampleParse() {
	s, err := storeurl.Parse("redis+sentinel://:hunter2@10.0.0.1,10.0.0.2:26380/main/2?prefix=ingest:")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Kind, s.Addrs, s.Master, s.DB, s.Prefix)
	fmt.Println(s) // the password is redacted

	_, err = storeurl.Parse("redis://:hunter2@cache:6379/x")
	fmt.Println(err)
	// Output:
	// sentinel [10.0.0.1:26379 10.0.0.2:26380] main 2 ingest:
	// redis+sentinel://:xxxxx@10.0.0.1:26379,10.0.0.2:26380/main/2?prefix=ingest%3A
	// storeurl: bad store URL "redis://:xxxxx@cache:6379/x": bad database number "x"
}
