package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of the test's own: three masters on loopback
// ports, no replicas, the 16384 slots split between them. It is stopped
// when the test ends.
type Cluster struct {
	Nodes []*Instance
}

// NewCluster starts a three-master Redis Cluster and waits until every node
// reports cluster_state:ok. Like Server, it fails the test if redis-server
// is not on PATH.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	const n = 3
	c := &Cluster{}
	for range n {
		c.Nodes = append(c.Nodes, Server(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"))
	}
	ctx := context.Background()
	clients := make([]*redis.Client, n)
	for i, node := range c.Nodes {
		clients[i] = node.Client(t)
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if err := clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("redistest: cluster: node %s: ADDSLOTSRANGE %d %d: %v", node.Addr(), lo, hi, err)
		}
	}
	for _, node := range c.Nodes[1:] {
		if err := clients[0].ClusterMeet(ctx, "127.0.0.1", fmt.Sprint(node.Port())).Err(); err != nil {
			t.Fatalf("redistest: cluster: MEET %s: %v", node.Addr(), err)
		}
	}
	// Gossip takes a moment: wait (bounded) for every node to agree.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < n; {
		info, err := clients[i].ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: cluster not ok after 30s: node %s: %q %v", c.Nodes[i].Addr(), info, err)
		}
		time.Sleep(20 * time.Millisecond) // waiting for gossip between processes, not moving a clock
	}
	return c
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr())
	}
	return out
}

// Client returns a cluster client of c, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Sentinel is a master and one Sentinel watching it (quorum 1), of the
// test's own. It is stopped when the test ends.
type Sentinel struct {
	Master   *Instance
	Sentinel *Instance
	Name     string // the master's name in Sentinel: "mymaster"
}

// NewSentinel starts a master and a Sentinel monitoring it. Like Server, it
// fails the test if redis-server is not on PATH.
func NewSentinel(t testing.TB) *Sentinel {
	t.Helper()
	master := Server(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("sentinel monitor mymaster 127.0.0.1 %d 1\nsentinel down-after-milliseconds mymaster 5000\n", master.Port())
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var (
		s   *Instance
		err error
	)
	for range 5 {
		port, perr := freePort()
		if perr != nil {
			t.Fatal(perr)
		}
		s = &Instance{port: port, dir: dir, conf: conf, args: []string{"--sentinel"}, ready: "+monitor master"}
		if err = s.launch(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("redistest: sentinel: %v", err)
	}
	t.Cleanup(s.stop)
	return &Sentinel{Master: master, Sentinel: s, Name: "mymaster"}
}

// Client returns a failover client that finds the master through the
// Sentinel, closed when the test ends.
func (s *Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.Name, SentinelAddrs: []string{s.Sentinel.Addr()}})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
