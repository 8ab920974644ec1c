package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replicated is a master with one replica, and a Sentinel watching them
// (quorum 1), all redis-server processes of the test's own, stopped when
// the test ends. Failover has the Sentinel promote the replica.
type Replicated struct {
	Master, Replica, Sentinel *Instance
	Name                      string // the master's name in Sentinel: "mymaster"
}

// NewReplicated starts a master, a replica of it and a Sentinel, and
// returns once the replica is in sync and the Sentinel knows it. It needs
// redis-server on PATH: check HaveServer first (there is no in-process
// fallback: miniredis does not replicate).
func NewReplicated(t testing.TB) *Replicated {
	t.Helper()
	if ok, why := haveServer(t, "a master with a replica"); !ok {
		t.Fatalf("redistest: NewReplicated: %s; check HaveServer first", why)
	}
	r := &Replicated{Name: "mymaster"}
	r.Master = Server(t)
	r.Replica = Server(t, "--replicaof", "127.0.0.1", strconv.Itoa(r.Master.Port()))
	ctx := context.Background()
	rc := r.Replica.Client(t)
	poll(t, "the replica to sync", func() (string, bool) {
		info, err := rc.Info(ctx, "replication").Result()
		return info, err == nil && strings.Contains(info, "master_link_status:up")
	})

	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 2000\nsentinel failover-timeout %s 10000\n",
		r.Name, r.Master.Port(), r.Name, r.Name)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	for range 5 {
		port, perr := freePort()
		if perr != nil {
			t.Fatal(perr)
		}
		r.Sentinel = &Instance{port: port, dir: dir, conf: conf, args: []string{"--sentinel"}, ready: "+monitor master"}
		if err = r.Sentinel.launch(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("redistest: sentinel: %v", err)
	}
	t.Cleanup(r.Sentinel.stop)
	sc := r.Sentinel.Client(t)
	poll(t, "the Sentinel to know the replica", func() (string, bool) {
		reps, err := sc.Do(ctx, "SENTINEL", "REPLICAS", r.Name).Slice()
		return fmt.Sprint(reps, err), err == nil && len(reps) == 1
	})
	t.Logf("redistest: NewReplicated: master %s, replica %s, Sentinel %s", r.Master.Addr(), r.Replica.Addr(), r.Sentinel.Addr())
	return r
}

// Client returns a failover client that finds the master through the
// Sentinel, closed when the test ends.
func (r *Replicated) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: r.Name, SentinelAddrs: []string{r.Sentinel.Addr()}})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Failover sends SENTINEL FAILOVER and returns once the Sentinel names the
// replica as the master. The old master then becomes the new one's replica
// (Sentinel reconfigures it).
func (r *Replicated) Failover(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	sc := r.Sentinel.Client(t)
	poll(t, "SENTINEL FAILOVER to be accepted", func() (string, bool) {
		err := sc.Do(ctx, "SENTINEL", "FAILOVER", r.Name).Err()
		return fmt.Sprint(err), err == nil
	})
	want := strconv.Itoa(r.Replica.Port())
	poll(t, "the Sentinel to promote the replica", func() (string, bool) {
		addr, err := sc.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", r.Name).StringSlice()
		return fmt.Sprint(addr, err), err == nil && len(addr) == 2 && addr[1] == want
	})
}

// poll calls f every 10ms until it reports done, for at most 30s (waiting
// for servers, never to move time).
func poll(t testing.TB, what string, f func() (string, bool)) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		last, ok := f()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("redistest: gave up after 30s waiting for %s: %s", what, last)
		case <-tick.C:
		}
	}
}
