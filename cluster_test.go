package quotactl_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/storetest"
)

// clusterSetupEnv forces how startCluster joins the nodes: "redis-cli" or
// "go" (CLUSTER ADDSLOTSRANGE and MEET through go-redis). Default: redis-cli
// when it is on PATH, else go.
const clusterSetupEnv = "QUOTACTL_TEST_CLUSTER_SETUP"

// startCluster starts a Redis Cluster of three masters (no replicas) from
// redis-server processes of the test's own, on free loopback ports, and
// returns their addresses once every node reports cluster_state:ok.
//
// Without redis-server on PATH the test fails, unless $QUOTA_REQUIRE_REDIS
// is unset: then it is skipped, loudly. This is the one Redis test that may
// skip (a cluster cannot be faked with miniredis); every other fault test
// fails instead.
func startCluster(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		msg := "the Redis Cluster tests need redis-server on PATH to start a 3-master cluster (apt-get install redis-server)"
		if os.Getenv(redistest.EnvRequire) != "" {
			t.Fatalf("%s: %v", msg, err)
		}
		t.Skipf("SKIPPED, NOT PASSED: %s, and $%s is unset", msg, redistest.EnvRequire)
	}
	ctx := context.Background()
	nodes := make([]*redistest.Instance, 3)
	clients := make([]*redis.Client, 3)
	addrs := make([]string, 3)
	for i := range nodes {
		// The cluster bus listens on a port of its own; the default
		// (port+10000) may be out of range or taken, so pick a free one.
		bus := freePort(t)
		nodes[i] = redistest.Server(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000", "--cluster-port", strconv.Itoa(bus))
		clients[i] = nodes[i].Client(t)
		addrs[i] = nodes[i].Addr()
	}
	how := os.Getenv(clusterSetupEnv)
	if how == "" {
		how = "go"
		if _, err := exec.LookPath("redis-cli"); err == nil {
			how = "redis-cli"
		}
	}
	switch how {
	case "redis-cli":
		args := append([]string{"--cluster", "create"}, addrs...)
		args = append(args, "--cluster-replicas", "0", "--cluster-yes")
		out, err := exec.Command("redis-cli", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	case "go":
		const slots = 16384
		for i, c := range clients {
			lo, hi := i*slots/3, (i+1)*slots/3-1
			if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
				t.Fatalf("CLUSTER ADDSLOTSRANGE %d %d on %s: %v", lo, hi, addrs[i], err)
			}
			// Distinct epochs, so no collision needs resolving.
			if err := c.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
				t.Fatalf("CLUSTER SET-CONFIG-EPOCH on %s: %v", addrs[i], err)
			}
		}
		for i := 1; i < len(clients); i++ {
			host, port, _ := net.SplitHostPort(addrs[i])
			bus, err := clients[i].ConfigGet(ctx, "cluster-port").Result()
			if err != nil {
				t.Fatal(err)
			}
			if err := clients[0].Do(ctx, "CLUSTER", "MEET", host, port, bus["cluster-port"]).Err(); err != nil {
				t.Fatalf("CLUSTER MEET %s: %v", addrs[i], err)
			}
		}
	default:
		t.Fatalf("$%s=%q: want redis-cli or go", clusterSetupEnv, how)
	}
	waitFor(t, 30*time.Second, "cluster_state:ok with 3 masters on every node", func() bool {
		for _, c := range clients {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
				return false
			}
			// Every node must also see all three masters' slots, or a
			// client could be sent to a node that does not know yet.
			ss, err := c.ClusterSlots(ctx).Result()
			if err != nil || len(ss) != 3 {
				return false
			}
		}
		return true
	})
	t.Logf("Redis Cluster of 3 masters at %v (joined with %s)", addrs, how)
	return addrs
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestRedisCluster runs the Redis store on a real 3-master Redis Cluster:
// multi-budget charges are one script in one slot (no CROSSSLOT), the keys
// of different credentials spread over the masters, concurrent charges do
// not overspend, and the whole conformance suite passes.
func TestRedisCluster(t *testing.T) {
	addrs := startCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = cc.Close() })
	ctx := context.Background()
	if err := cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}

	// The cluster does refuse a script over keys of two slots: what the
	// store's hash tags must avoid.
	t.Run("CrossSlotRefused", func(t *testing.T) {
		err := cc.Eval(ctx, "return 1", []string{"{a}x", "{b}y"}).Err()
		if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
			t.Fatalf("EVAL over {a}x and {b}y: %v; want a CROSSSLOT error (is this really a cluster?)", err)
		}
	})

	t.Run("MultiBudget", func(t *testing.T) {
		store := redisstore.New(cc, redisstore.WithPrefix(redistest.Prefix(t)))
		la, _ := time.LoadLocation("America/Los_Angeles")
		budgets := []quota.Budget{
			{Name: "units", Limit: 10000, Window: quota.Daily(la)},
			{Name: "search", Limit: 100, Window: quota.Daily(la)},
			{Name: "calls", Limit: 1000, Window: quota.Sliding(time.Hour)},
		}
		l, err := quota.New(store, "youtube", budgets, quota.WithClock(fixedClock))
		if err != nil {
			t.Fatal(err)
		}
		search := quota.Charge{Method: "search.list", Units: map[string]int64{"units": 100, "search": 1, "calls": 1}}
		for i := range 8 {
			cred := quota.Credential{Secret: fmt.Sprintf("AIzaSy-cluster-multi-%d", i)}
			for range 3 {
				if _, err := l.Take(ctx, cred, search); err != nil {
					t.Fatalf("credential %d: multi-budget Take on the cluster: %v", i, err)
				}
			}
			r, err := l.Take(ctx, cred, quota.Charge{Units: map[string]int64{"units": 9701, "calls": 1}})
			if !errors.Is(err, quota.ErrExhausted) {
				t.Fatalf("credential %d: a charge over what is left: %v, %v; want ErrExhausted", i, r, err)
			}
			us := usedOf(t, l, cred)
			if us["units"] != 300 || us["search"] != 3 || us["calls"] != 3 {
				t.Fatalf("credential %d: used %v after 3 searches and one refusal; want units 300, search 3, calls 3", i, us)
			}
		}
		apis, err := l.List(ctx)
		if err != nil || len(apis) != 1 || len(apis[0].Budgets) != 3 || len(apis[0].Credentials) != 8 {
			t.Fatalf("List on the cluster: %+v, %v; want youtube with 3 budgets and 8 credentials", apis, err)
		}
	})

	t.Run("KeysSpreadOverMasters", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		store := redisstore.New(cc, redisstore.WithPrefix(prefix))
		l, err := quota.New(store, "youtube", spendBudgets(1000, 1000), quota.WithClock(fixedClock))
		if err != nil {
			t.Fatal(err)
		}
		const creds = 48
		tags := map[string]int{} // hash tag -> credential
		for i := range creds {
			cred := quota.Credential{Secret: fmt.Sprintf("AIzaSy-cluster-spread-%d", i)}
			if _, err := l.Take(ctx, cred, spendCharge(7)); err != nil {
				t.Fatal(err)
			}
			tags[redisstore.CredentialTag("youtube", quota.Fingerprint([]byte(quota.DefaultFingerprintKey), cred.Secret))] = i
		}
		owner := slotOwners(t, cc)
		var mu sync.Mutex
		credMaster := map[int]map[string]bool{} // credential -> masters holding its keys
		credSlot := map[int]map[int64]bool{}
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			addr := c.Options().Addr
			keys, err := scanAll(ctx, c, prefix+"*")
			if err != nil {
				return err
			}
			for _, k := range keys {
				lb, rb := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
				if lb < 0 || rb < lb {
					continue // catalog keys: outside every credential's tag
				}
				i, ok := tags[k[lb:rb+1]]
				if !ok {
					return fmt.Errorf("key %q has a hash tag of no credential of this test", k)
				}
				slot, err := c.ClusterKeySlot(ctx, k).Result()
				if err != nil {
					return err
				}
				if owner[slot] != addr {
					return fmt.Errorf("key %q (slot %d) found on %s, but CLUSTER SLOTS gives the slot to %s", k, slot, addr, owner[slot])
				}
				mu.Lock()
				if credMaster[i] == nil {
					credMaster[i], credSlot[i] = map[string]bool{}, map[int64]bool{}
				}
				credMaster[i][addr] = true
				credSlot[i][slot] = true
				mu.Unlock()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		perMaster := map[string]int{}
		for i := range creds {
			if len(credMaster[i]) != 1 || len(credSlot[i]) != 1 {
				t.Fatalf("credential %d: keys on masters %v, in slots %v; want all in one slot of one master", i, credMaster[i], credSlot[i])
			}
			for m := range credMaster[i] {
				perMaster[m]++
			}
		}
		t.Logf("%d credentials' keys by master: %v", creds, perMaster)
		if len(perMaster) < 2 {
			t.Fatalf("every credential's keys are on one master (%v): the hash tags do not spread credentials", perMaster)
		}
	})

	t.Run("ConcurrentNoOverspend", func(t *testing.T) {
		store := redisstore.New(cc, redisstore.WithPrefix(redistest.Prefix(t)))
		budgets := spendBudgets(3000, 1000)
		l, err := quota.New(store, "youtube", budgets, quota.WithClock(fixedClock))
		if err != nil {
			t.Fatal(err)
		}
		creds := make([]quota.Credential, 6)
		for i := range creds {
			creds[i] = quota.Credential{Secret: fmt.Sprintf("AIzaSy-cluster-race-%d", i)}
		}
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		var mu sync.Mutex
		per := make([]spend, len(creds))
		var wg sync.WaitGroup
		for g := range 24 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(g)))
				ci := g % len(creds)
				var mine spend
				for range 40 {
					cost := rng.Int64N(100) + 1
					_, err := l.Take(ctx, creds[ci], spendCharge(cost))
					var ee *quota.ExhaustedError
					switch {
					case err == nil:
						mine.Accepted = append(mine.Accepted, cost)
					case errors.As(err, &ee):
						mine.Refused = append(mine.Refused, refusal{cost, ee.Budget})
					default:
						mine.Errors = append(mine.Errors, err.Error())
					}
				}
				mu.Lock()
				per[ci].add(mine)
				mu.Unlock()
			})
		}
		wg.Wait()
		for ci, s := range per {
			if len(s.Errors) > 0 {
				t.Fatalf("credential %d: %d errors, e.g. %s", ci, len(s.Errors), s.Errors[0])
			}
			if len(s.Refused) == 0 {
				t.Fatalf("credential %d: nothing refused; the run never reached the limit", ci)
			}
			for _, p := range checkSpend(budgets, usedOf(t, l, creds[ci]), s) {
				t.Errorf("credential %d: %s", ci, p)
			}
		}
	})

	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) quota.Store {
			return redisstore.New(cc, redisstore.WithPrefix(redistest.Prefix(t)))
		})
	})
}

// slotOwners maps every slot to the address of the master serving it.
func slotOwners(t *testing.T, cc *redis.ClusterClient) map[int64]string {
	t.Helper()
	ss, err := cc.ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	owner := map[int64]string{}
	for _, s := range ss {
		for slot := s.Start; slot <= s.End; slot++ {
			owner[int64(slot)] = s.Nodes[0].Addr
		}
	}
	if len(owner) != 16384 {
		t.Fatalf("CLUSTER SLOTS covers %d slots, want 16384", len(owner))
	}
	return owner
}

// scanAll returns every key of c matching pattern.
func scanAll(ctx context.Context, c *redis.Client, pattern string) ([]string, error) {
	var keys []string
	iter := c.Scan(ctx, 0, pattern, 500).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	slices.Sort(keys)
	return keys, iter.Err()
}
