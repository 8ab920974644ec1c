package redisstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestClusterMasterGone: a Cluster master is killed and its replica
// promoted. go-redis reloads its slot map on MOVED or READONLY, or once per
// ClusterStateReloadInterval (a minute by default), not when the node it
// knows is gone: every decision on the dead master's slots failed with
// ErrStoreUnavailable, dialing it, until then (staged: still failing 18 s
// after the promotion). The store now asks the client to reload on such an
// error, so decisions go to the new master as soon as the cluster says so.
// The slot map here comes from the test (ClusterSlots), and the reload
// interval is an hour: only the store's request can reload it.
func TestClusterMasterGone(t *testing.T) {
	old, promoted := redistest.Mini(t), redistest.Mini(t)
	oldAddr, newAddr := old.Addr(), promoted.Addr()
	var failedOver atomic.Bool
	reloaded := make(chan struct{}, 1) // the slot map was asked for after the failover
	c := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			addr := oldAddr
			if failedOver.Load() {
				addr = newAddr
				select {
				case reloaded <- struct{}{}:
				default:
				}
			}
			return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: addr}}}}, nil
		},
		ClusterStateReloadInterval: time.Hour,
		MaxRedirects:               1,
	})
	t.Cleanup(func() { _ = c.Close() })
	st := redisstore.New(c, redisstore.WithPrefix(redistest.Prefix(t)))
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Take(ctx, secret, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	copyMini(t, old, promoted) // the replica has every write
	old.Close()                // the master dies
	failedOver.Store(true)
	take := func() error {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := l.Take(c, secret, quota.Units("units", 1))
		return err
	}
	// The first decision after the failover dials the dead master and
	// fails; that failure is what asks the client for the slot map again.
	if err := take(); err == nil {
		t.Fatal("a decision on the dead master's slots succeeded before any reload")
	}
	select {
	case <-reloaded:
	case <-time.After(30 * time.Second):
		t.Fatal("after a decision failed on the dead master, the slot map was never asked for again")
	}
	// go-redis swaps the new map in just after ClusterSlots returns: a
	// decision may still meet the old one once or twice.
	var n int
	for err := take(); err != nil; err = take() {
		if n++; n == 100 {
			t.Fatalf("the slot map was reloaded, but %d decisions failed; the last: %v", n, err)
		}
	}
}
