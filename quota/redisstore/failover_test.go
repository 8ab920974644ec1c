package redisstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// failoverRig is a master and a replica behind one client that follows
// the master. breakLink stops replication (writes on the master from then
// on reach no replica); failover promotes the replica, losing them.
type failoverRig struct {
	client    *redis.Client
	breakLink func()
	failover  func()
}

// newFailoverRig starts a real master, replica and Sentinel (redis-server
// --sentinel; SENTINEL FAILOVER), or without redis-server on PATH (and
// without $QUOTA_REQUIRE_REDIS=1, a failure then) two miniredis servers:
// breakLink copies the master's data to the replica (all that replicated
// so far), and failover closes the master and points the client at the
// replica; each plays WAIT as a real pair would.
func newFailoverRig(t *testing.T) *failoverRig {
	t.Helper()
	ctx := context.Background()
	if redistest.HaveServer(t, "a Sentinel failover") {
		r := redistest.NewReplicated(t)
		mc := r.Master.Client(t)
		return &failoverRig{
			client: r.Client(t),
			breakLink: func() {
				// The replica can no longer authenticate to the master;
				// clients already connected keep writing to it.
				if err := mc.ConfigSet(ctx, "requirepass", "failover-test").Err(); err != nil {
					t.Fatal(err)
				}
				if err := mc.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
					t.Fatal(err)
				}
			},
			failover: func() {
				r.Failover(t)
				// The old master follows the new one (as Sentinel would
				// have it do), so that WAIT has a replica again.
				auth := redis.NewClient(&redis.Options{Addr: r.Master.Addr(), Password: "failover-test"})
				defer auth.Close()
				if err := auth.ConfigSet(ctx, "requirepass", "").Err(); err != nil {
					t.Fatal(err)
				}
				if err := auth.Do(ctx, "REPLICAOF", "127.0.0.1", r.Replica.Port()).Err(); err != nil {
					t.Fatal(err)
				}
				nc := r.Replica.Client(t)
				deadline := time.Now().Add(30 * time.Second)
				for {
					info, err := nc.Info(ctx, "replication").Result()
					if err == nil && strings.Contains(info, "connected_slaves:1") {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("the old master never followed the new one: %q %v", info, err)
					}
					tick := time.NewTimer(10 * time.Millisecond)
					<-tick.C
				}
			},
		}
	}
	master, replica := miniredis.RunT(t), miniredis.RunT(t)
	// WAIT counts one replica while the link is up (the master), and once
	// the old master follows the new one (the replica, after failover).
	var linked, followed atomic.Bool
	linked.Store(true)
	waitHook := func(up *atomic.Bool) server.Hook {
		return func(p *server.Peer, cmd string, args ...string) bool {
			if cmd != "WAIT" {
				return false
			}
			if up.Load() {
				p.WriteInt(1)
			} else {
				p.WriteInt(0)
			}
			return true
		}
	}
	master.Server().SetPreHook(waitHook(&linked))
	replica.Server().SetPreHook(waitHook(&followed))
	var addr atomic.Value
	addr.Store(master.Addr())
	c := redis.NewClient(&redis.Options{
		Addr: master.Addr(),
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr.Load().(string))
		},
	})
	t.Cleanup(func() { _ = c.Close() })
	return &failoverRig{
		client: c,
		breakLink: func() {
			copyMini(t, master, replica)
			linked.Store(false)
		},
		failover: func() {
			addr.Store(replica.Addr())
			master.Close()
			followed.Store(true)
		},
	}
}

// copyMini copies every key of from (strings, hashes, sets, sorted sets)
// with its TTL into to: what a replica holds when its link breaks.
func copyMini(t *testing.T, from, to *miniredis.Miniredis) {
	t.Helper()
	for _, k := range from.Keys() {
		var err error
		switch from.Type(k) {
		case "string":
			var v string
			if v, err = from.Get(k); err == nil {
				err = to.Set(k, v)
			}
		case "hash":
			var fs []string
			fs, err = from.HKeys(k)
			for _, f := range fs {
				to.HSet(k, f, from.HGet(k, f))
			}
		case "set":
			var ms []string
			if ms, err = from.Members(k); err == nil {
				_, err = to.SAdd(k, ms...)
			}
		case "zset":
			var ms []string
			ms, err = from.ZMembers(k)
			for _, m := range ms {
				s, _ := from.ZScore(k, m)
				if _, err = to.ZAdd(k, s, m); err != nil {
					break
				}
			}
		}
		if err != nil {
			t.Fatalf("copy %s: %v", k, err)
		}
		if ttl := from.TTL(k); ttl > 0 {
			to.SetTTL(k, ttl)
		}
	}
}

// TestFailoverLostWrites: under load (8 goroutines taking 1 unit at a
// time), replication breaks, 500 more units are granted on the master, and
// SENTINEL FAILOVER promotes the replica, which never got them: the issue
// saw 16,813 such decisions lost, to be spent again. The first decision on
// the new master finds that the owner's sequence went back, and the budget
// counts as spent: what the store still allows never exceeds the limit
// less what was granted (0 units over the limit). With WithReplicas(1), no
// decision is granted once replication breaks (WAIT fails:
// ErrStoreUnavailable), so none is lost and no loss is found.
func TestFailoverLostWrites(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []redisstore.Option
		replicas bool
	}{
		{"async", nil, false},
		{"replicas=1", []redisstore.Option{redisstore.WithReplicas(1, 100*time.Millisecond)}, true},
		{"async pipelined", []redisstore.Option{redisstore.WithPipelining(2)}, false},
		{"replicas=1 pipelined", []redisstore.Option{redisstore.WithReplicas(1, 100*time.Millisecond), redisstore.WithPipelining(2)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const limit = 1_000_000
			ctx := context.Background()
			rig := newFailoverRig(t)
			st, err := redisstore.Open(ctx, rig.client, append(tc.opts, redisstore.WithPrefix(redistest.Prefix(t)))...)
			if err != nil {
				t.Fatal(err)
			}
			la, _ := time.LoadLocation("America/Los_Angeles")
			l, err := quota.New(st, "youtube", []quota.Budget{{Name: "units", Limit: limit, Window: quota.Daily(la)}},
				quota.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				t.Fatal(err)
			}
			var granted, refused, unavailable atomic.Int64
			var other atomic.Value
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
						_, err := l.Take(ctx, secret, quota.Units("units", 1))
						cancel()
						switch {
						case err == nil:
							granted.Add(1)
						case errors.Is(err, quota.ErrExhausted):
							refused.Add(1)
						case errors.Is(err, quota.ErrStoreUnavailable):
							unavailable.Add(1)
						default:
							other.Store(err)
						}
					}
				})
			}
			halted := false
			halt := func() {
				if !halted {
					halted = true
					close(stop)
					wg.Wait()
				}
			}
			defer halt()
			wait := func(what string, done func() bool) {
				t.Helper()
				deadline := time.NewTimer(30 * time.Second)
				defer deadline.Stop()
				tick := time.NewTicker(time.Millisecond)
				defer tick.Stop()
				for !done() {
					select {
					case <-deadline.C:
						t.Fatalf("gave up after 30s waiting for %s (granted %d, refused %d, unavailable %d)", what, granted.Load(), refused.Load(), unavailable.Load())
					case <-tick.C:
					}
				}
			}

			wait("500 grants", func() bool { return granted.Load() >= 500 })
			rig.breakLink()
			before, unav := granted.Load(), unavailable.Load()
			wait("500 more grants (or WAIT failures) with replication broken", func() bool {
				return granted.Load() >= before+500 || unavailable.Load() >= unav+50
			})
			lostAtMost := granted.Load()
			rig.failover()
			after := granted.Load() + refused.Load()
			wait("200 decisions on the new master", func() bool { return granted.Load()+refused.Load() >= after+200 })
			halt()
			if e := other.Load(); e != nil {
				t.Fatalf("a Take failed with neither ErrExhausted nor ErrStoreUnavailable: %v", e)
			}
			us, err := l.Status(ctx, secret)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("granted %d (%d before the failover); %d refused, %d unavailable; %d loss finding(s); the store: used %d, remaining %d",
				granted.Load(), lostAtMost, refused.Load(), unavailable.Load(), l.StoreLosses(), us[0].Used, us[0].Remaining)
			if over := us[0].Remaining - (limit - granted.Load()); over > 0 {
				t.Fatalf("the store allows %d units over the limit (remaining %d after %d granted of %d)", over, us[0].Remaining, granted.Load(), limit)
			}
			if !tc.replicas && l.StoreLosses() == 0 {
				t.Fatal("the failover lost writes and no loss was found")
			}
			if tc.replicas && l.StoreLosses() != 0 {
				t.Fatalf("with replicas=1, %d losses found; want none", l.StoreLosses())
			}
			if during := lostAtMost - before; tc.replicas && during > 8 {
				t.Fatalf("with replicas=1, %d units were granted while replication was broken; want at most the 8 in flight", during)
			}
		})
	}
}

// TestReplicasShort: with WithReplicas(1) and no replica to acknowledge
// (a standalone server, and a Cluster whose masters have none), an
// admission is an error wrapping ErrStoreUnavailable that says so, and the
// decision still counts on the master; a refusal stands as a refusal.
func TestReplicasShort(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { return redistest.Server(t).Client(t) }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.NewCluster(t).Client(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := redisstore.Open(ctx, tc.client(t), redisstore.WithPrefix(redistest.Prefix(t)), redisstore.WithReplicas(1, 20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				_, err := l.Take(ctx, secret, quota.Units("units", 5))
				if !errors.Is(err, quota.ErrStoreUnavailable) || !strings.Contains(err.Error(), "0 of 1") {
					t.Fatalf("Take %d with no replica = %v; want ErrStoreUnavailable, 0 of 1 replicas", i, err)
				}
			}
			if _, err := l.Take(ctx, secret, quota.Units("units", 1)); !errors.Is(err, quota.ErrExhausted) {
				t.Fatalf("Take over the limit = %v; want a refusal: the unacknowledged decisions count", err)
			}
		})
	}
}
