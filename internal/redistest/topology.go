package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/go-redis/v9"
)

// haveServer reports whether redis-server is on PATH. Without it, and with
// $QUOTA_REQUIRE_REDIS=1, it fails the test instead; what says what the
// test wanted the server for.
func haveServer(t testing.TB, what string) (bool, string) {
	t.Helper()
	_, err := exec.LookPath("redis-server")
	if err == nil {
		return true, ""
	}
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("redistest: $%s=1 but no redis-server on PATH to start %s (apt-get install redis-server): %v", EnvRequire, what, err)
	}
	return false, "no redis-server on PATH"
}

// clusterNodes is the size of the clusters NewCluster starts.
const clusterNodes = 3

// Cluster is a Redis Cluster of the test's own: three masters on loopback
// ports, no replicas, node i serving slots Range(i). It is stopped when the
// test ends.
//
// Real, it is three cluster-enabled redis-server processes. Otherwise it is
// three in-process miniredis servers behind proxies (Nodes, as Instances),
// which answer CLUSTER SLOTS, NODES, INFO and KEYSLOT for that layout; a
// miniredis does not check that a key belongs to it (no MOVED, no
// CROSSSLOT), so in that mode Client routes by slot on the client side and
// tests check where keys landed.
type Cluster struct {
	Nodes []*Instance
	// Real is true when Nodes are redis-server processes.
	Real bool
}

// Range returns the first and last slot node i serves.
func (c *Cluster) Range(i int) (lo, hi int) {
	return i * SlotCount / len(c.Nodes), (i+1)*SlotCount/len(c.Nodes) - 1
}

// NodeFor returns the node serving slot.
func (c *Cluster) NodeFor(slot int) *Instance {
	for i, n := range c.Nodes {
		if lo, hi := c.Range(i); slot >= lo && slot <= hi {
			return n
		}
	}
	panic(fmt.Sprintf("redistest: slot %d out of range", slot))
}

// NewCluster starts a three-master Redis Cluster and returns once every
// node agrees on it: redis-server processes when redis-server is on PATH,
// else (unless $QUOTA_REQUIRE_REDIS=1, a failure then) miniredis nodes. It
// logs which.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	real, why := haveServer(t, "a Redis Cluster")
	if !real {
		return fallbackCluster(t, why)
	}
	c := &Cluster{Real: true}
	ctx := context.Background()
	clients := make([]*redis.Client, clusterNodes)
	buses := make([]int, clusterNodes)
	for i := range clusterNodes {
		// The cluster bus has a port of its own; the default (port+10000)
		// may be out of range or taken, so pick a free one.
		bus, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		buses[i] = bus
		n := Server(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000", "--cluster-port", strconv.Itoa(bus))
		c.Nodes = append(c.Nodes, n)
		clients[i] = n.Client(t)
	}
	for i, cl := range clients {
		lo, hi := c.Range(i)
		if err := cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("redistest: cluster: node %s: ADDSLOTSRANGE %d %d: %v", c.Nodes[i].Addr(), lo, hi, err)
		}
		// Distinct epochs, so no collision needs resolving.
		if err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			t.Fatalf("redistest: cluster: node %s: SET-CONFIG-EPOCH: %v", c.Nodes[i].Addr(), err)
		}
	}
	for i, n := range c.Nodes[1:] {
		if err := clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", n.Port(), buses[i+1]).Err(); err != nil {
			t.Fatalf("redistest: cluster: MEET %s: %v", n.Addr(), err)
		}
	}
	// Gossip between the processes takes a moment: a bounded poll on
	// every node agreeing (state ok, all nodes known, all masters' slots).
	agreed := func() (string, bool) {
		for i, cl := range clients {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", clusterNodes)) {
				return fmt.Sprintf("node %s: %q %v", c.Nodes[i].Addr(), info, err), false
			}
			if ss, err := cl.ClusterSlots(ctx).Result(); err != nil || len(ss) != clusterNodes {
				return fmt.Sprintf("node %s: CLUSTER SLOTS %v %v", c.Nodes[i].Addr(), ss, err), false
			}
		}
		return "", true
	}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		last, ok := agreed()
		if ok {
			break
		}
		select {
		case <-deadline.C:
			t.Fatalf("redistest: cluster not agreed after 30s: %s", last)
		case <-tick.C:
		}
	}
	t.Logf("redistest: NewCluster: 3 redis-server masters at %v", c.Addrs())
	return c
}

func fallbackCluster(t testing.TB, why string) *Cluster {
	t.Helper()
	c := &Cluster{}
	for range clusterNodes {
		c.Nodes = append(c.Nodes, proxied(t, miniredis.NewMiniRedis()))
	}
	for i, n := range c.Nodes {
		n.mini.Server().SetPreHook(c.clusterHook(i))
	}
	t.Logf("redistest: NewCluster: FALLBACK 3 in-process miniredis nodes at %v, slots routed by the client (%s)", c.Addrs(), why)
	return c
}

// nodeID is node i's (made-up) cluster node ID.
func nodeID(i int) string { return fmt.Sprintf("%040x", i+1) }

// clusterHook answers the CLUSTER subcommands clients and tests use, for
// node self of the fallback cluster, the way a real node would.
func (c *Cluster) clusterHook(self int) server.Hook {
	return func(p *server.Peer, cmd string, args ...string) bool {
		if cmd != "CLUSTER" || len(args) == 0 {
			return false
		}
		switch sub := strings.ToUpper(args[0]); sub {
		case "SLOTS":
			p.WriteLen(len(c.Nodes))
			for i, n := range c.Nodes {
				lo, hi := c.Range(i)
				p.WriteLen(3)
				p.WriteInt(lo)
				p.WriteInt(hi)
				p.WriteLen(3)
				p.WriteBulk("127.0.0.1")
				p.WriteInt(n.Port())
				p.WriteBulk(nodeID(i))
			}
		case "KEYSLOT":
			if len(args) != 2 {
				p.WriteError("ERR wrong number of arguments for 'cluster|keyslot' command")
				break
			}
			p.WriteInt(Slot(args[1]))
		case "NODES":
			var b strings.Builder
			for i, n := range c.Nodes {
				flags := "master"
				if i == self {
					flags = "myself,master"
				}
				lo, hi := c.Range(i)
				fmt.Fprintf(&b, "%s %s@%d %s - 0 0 %d connected %d-%d\n", nodeID(i), n.Addr(), n.Port(), flags, i+1, lo, hi)
			}
			p.WriteBulk(b.String())
		case "INFO":
			p.WriteBulk(fmt.Sprintf("cluster_enabled:1\r\ncluster_state:ok\r\ncluster_slots_assigned:%d\r\ncluster_slots_ok:%d\r\ncluster_known_nodes:%d\r\ncluster_size:%d\r\n",
				SlotCount, SlotCount, len(c.Nodes), len(c.Nodes)))
		case "MYID":
			p.WriteBulk(nodeID(self))
		default:
			p.WriteError("ERR CLUSTER " + sub + " is not supported by redistest's miniredis cluster")
		}
		return true
	}
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr())
	}
	return out
}

// Slots returns the cluster's layout as go-redis describes it.
func (c *Cluster) Slots() []redis.ClusterSlot {
	var out []redis.ClusterSlot
	for i, n := range c.Nodes {
		lo, hi := c.Range(i)
		out = append(out, redis.ClusterSlot{Start: lo, End: hi, Nodes: []redis.ClusterNode{{ID: nodeID(i), Addr: n.Addr()}}})
	}
	return out
}

// Client returns a cluster client of c, closed when the test ends. Real,
// it learns the layout from the nodes (CLUSTER SLOTS, MOVED); in the
// fallback its ClusterSlots option gives it the layout, and it routes every
// command by the slot of its first key. (go-redis then names the nodes'
// clients ":PORT", dropping the loopback host, in Options().Addr.)
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	opts := &redis.ClusterOptions{Addrs: c.Addrs()}
	if !c.Real {
		slots := c.Slots()
		opts.ClusterSlots = func(context.Context) ([]redis.ClusterSlot, error) { return slots, nil }
	}
	cc := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Sentinel is a master and one Sentinel watching it (quorum 1), of the
// test's own. It is stopped when the test ends.
//
// Real, both are redis-server processes. Otherwise the master is a
// miniredis (as Server gives) and the Sentinel a miniredis that answers
// only what a Sentinel does for go-redis's failover client: SENTINEL
// get-master-addr-by-name, masters, sentinels, replicas (none), PING, HELLO, CLIENT
// and the pub/sub commands (for +switch-master); anything else is an
// unknown command, as on a real Sentinel.
type Sentinel struct {
	Master   *Instance
	Sentinel *Instance
	Name     string // the master's name in Sentinel: "mymaster"
	// Real is true when both are redis-server processes.
	Real bool
}

// NewSentinel starts a master and a Sentinel monitoring it: redis-server
// processes when redis-server is on PATH, else (unless
// $QUOTA_REQUIRE_REDIS=1, a failure then) miniredis servers. It logs which.
func NewSentinel(t testing.TB) *Sentinel {
	t.Helper()
	real, why := haveServer(t, "a Sentinel")
	if !real {
		return fallbackSentinel(t, why)
	}
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
	t.Logf("redistest: NewSentinel: redis-server master at %s, redis-server Sentinel at %s", master.Addr(), s.Addr())
	return &Sentinel{Master: master, Sentinel: s, Name: "mymaster", Real: true}
}

// sentinelCommands are the commands the fallback Sentinel accepts.
var sentinelCommands = map[string]bool{
	"SENTINEL": true, "PING": true, "HELLO": true, "CLIENT": true, "AUTH": true, "QUIT": true,
	"SUBSCRIBE": true, "PSUBSCRIBE": true, "UNSUBSCRIBE": true, "PUNSUBSCRIBE": true, "PUBLISH": true,
}

func fallbackSentinel(t testing.TB, why string) *Sentinel {
	t.Helper()
	master := fallbackServer(t, why, nil)
	s := &Sentinel{Master: master, Name: "mymaster"}
	m := miniredis.NewMiniRedis()
	s.Sentinel = proxied(t, m)
	srv := m.Server()
	if err := srv.Register("SENTINEL", s.sentinelCmd); err != nil {
		t.Fatalf("redistest: sentinel: %v", err)
	}
	srv.SetPreHook(func(p *server.Peer, cmd string, args ...string) bool {
		if sentinelCommands[cmd] {
			return false
		}
		p.WriteError(fmt.Sprintf("ERR unknown command '%s', with args beginning with: ", strings.ToLower(cmd)))
		return true
	})
	t.Logf("redistest: NewSentinel: FALLBACK miniredis master at %s, minimal in-process Sentinel at %s (%s)", master.Addr(), s.Sentinel.Addr(), why)
	return s
}

// sentinelCmd answers SENTINEL subcommands for the fallback Sentinel.
func (s *Sentinel) sentinelCmd(p *server.Peer, cmd string, args []string) {
	if len(args) == 0 {
		p.WriteError("ERR wrong number of arguments for 'sentinel' command")
		return
	}
	sub := strings.ToLower(args[0])
	named := func() bool {
		if len(args) != 2 {
			p.WriteError(fmt.Sprintf("ERR wrong number of arguments for 'sentinel|%s' command", sub))
			return false
		}
		if args[1] != s.Name {
			p.WriteError("ERR No such master with that name")
			return false
		}
		return true
	}
	switch sub {
	case "get-master-addr-by-name":
		if len(args) != 2 {
			p.WriteError("ERR wrong number of arguments for 'sentinel|get-master-addr-by-name' command")
			return
		}
		if args[1] != s.Name {
			p.WriteNull()
			return
		}
		p.WriteLen(2)
		p.WriteBulk("127.0.0.1")
		p.WriteBulk(strconv.Itoa(s.Master.Port()))
	case "masters":
		if len(args) != 1 {
			p.WriteError("ERR wrong number of arguments for 'sentinel|masters' command")
			return
		}
		p.WriteLen(1)
		p.WriteLen(6)
		for _, f := range []string{"name", s.Name, "ip", "127.0.0.1", "port", strconv.Itoa(s.Master.Port())} {
			p.WriteBulk(f)
		}
	case "sentinels", "replicas", "slaves":
		if named() {
			p.WriteLen(0) // no other Sentinels, no replicas
		}
	case "myid":
		p.WriteBulk(nodeID(99))
	default:
		p.WriteError("ERR SENTINEL " + strings.ToUpper(sub) + " is not supported by redistest's fallback Sentinel")
	}
}

// Client returns a failover client that finds the master through the
// Sentinel, closed when the test ends.
func (s *Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.Name, SentinelAddrs: []string{s.Sentinel.Addr()}})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
