package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// ConcurrentOverrides checks that operator overrides set and removed at
// once, through stores (handles on one shared store: other connections,
// other clients, as other processes would hold), all take effect: the
// overrides of an API are one value, and a read, change and write racing
// another loses one of them unless updates take turns.
func ConcurrentOverrides(t *testing.T, stores []quota.Store) {
	t.Helper()
	ctx := context.Background()
	const n = 12
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	budget := func(i int) quota.Budget {
		return quota.Budget{Name: fmt.Sprint("b", i), Limit: int64(100 + i), Window: quota.Daily(time.UTC)}
	}
	run := func(f func(i int) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { errs[i] = f(i) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("update %d: %v", i, err)
			}
		}
	}
	run(func(i int) error { return quota.SetOverride(ctx, stores[i%len(stores)], "api", budget(i), at) })
	over, err := quota.Overrides(ctx, stores[0], "api")
	if err != nil {
		t.Fatal(err)
	}
	if len(over) != n {
		t.Fatalf("%d concurrent SetOverride left %d overrides: %v", n, len(over), over)
	}
	for i := range n {
		if o := over[budget(i).Name]; o.Budget != budget(i) {
			t.Fatalf("override %d: %+v, want %+v", i, o.Budget, budget(i))
		}
	}
	// remove the even ones while setting the odd ones again, with other limits
	run(func(i int) error {
		st := stores[(i+1)%len(stores)]
		if i%2 == 0 {
			removed, err := quota.RemoveOverride(ctx, st, "api", budget(i).Name)
			if err == nil && !removed {
				err = fmt.Errorf("override %d was not there to remove", i)
			}
			return err
		}
		b := budget(i)
		b.Limit += 1000
		return quota.SetOverride(ctx, st, "api", b, at)
	})
	if over, err = quota.Overrides(ctx, stores[len(stores)-1], "api"); err != nil {
		t.Fatal(err)
	}
	if len(over) != n/2 {
		t.Fatalf("after removing %d of %d overrides at once, %d remain: %v", n/2, n, len(over), over)
	}
	for i := 1; i < n; i += 2 {
		if o := over[budget(i).Name]; o.Limit != budget(i).Limit+1000 {
			t.Fatalf("override %d: limit %d, want %d", i, o.Limit, budget(i).Limit+1000)
		}
	}
}
