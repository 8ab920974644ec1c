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
	c := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			addr := oldAddr
			if failedOver.Load() {
				addr = newAddr
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
	deadline := time.Now().Add(30 * time.Second)
	var n int
	for {
		n++
		c, cancel := context.WithTimeout(ctx, time.Second)
		_, err := l.Take(c, secret, quota.Units("units", 1))
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the failover, %d decisions failed over 30 s; the last: %v", n, err)
		}
		time.Sleep(10 * time.Millisecond) // the reload is asynchronous
	}
}
