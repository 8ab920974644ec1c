package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit/overspend"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/storetest"
)

// TestCluster runs the Redis store on a 3-master Redis Cluster of the
// test's own (redistest.NewCluster): multi-budget charges are one script in
// one slot (no CROSSSLOT), the keys of different credentials spread over
// the masters, concurrent charges do not overspend, and the whole
// conformance suite passes, the catalog's keys living wherever their slots
// are.
//
// Without redis-server on PATH the cluster is three miniredis nodes and the
// client routes by slot; a miniredis does not refuse a cross-slot script,
// so CrossSlotRefused checks instead that such a script runs on one node
// only, away from where its other key's slot lives.
func TestCluster(t *testing.T) {
	cl := redistest.NewCluster(t)
	if !cl.Real {
		t.Log("FALLBACK: no redis-server on PATH: this Redis Cluster is 3 in-process miniredis nodes with client-side slot routing; CROSSSLOT is checked by where keys land instead")
	}
	cc := cl.Client(t)
	ctx := context.Background()
	if err := cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}

	// The cluster refuses a script over keys of two slots: what the
	// store's hash tags must avoid.
	t.Run("CrossSlotRefused", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		ka, kb := prefix+"{a}x", prefix+"{b}y"
		na, nb := cl.NodeFor(redistest.Slot(ka)), cl.NodeFor(redistest.Slot(kb))
		if na == nb {
			t.Fatalf("{a} and {b} are on one node (%s): pick other tags", na.Addr())
		}
		script := "redis.call('SET', KEYS[1], '1'); redis.call('SET', KEYS[2], '1'); return 1"
		err := cc.Eval(ctx, script, []string{ka, kb}).Err()
		if cl.Real {
			if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
				t.Fatalf("EVAL over {a}x and {b}y: %v; want a CROSSSLOT error (is this really a cluster?)", err)
			}
			return
		}
		// Fallback: the client sends the script to the node of its first
		// key's slot only, so the second key lands on a node that does not
		// serve its slot: the data a cross-slot script writes is lost to
		// the cluster.
		if err != nil {
			t.Fatalf("EVAL over {a}x and {b}y on the fallback: %v", err)
		}
		ca, cb := na.Client(t), nb.Client(t)
		if ca.Exists(ctx, ka, kb).Val() != 2 || cb.Exists(ctx, ka, kb).Val() != 0 {
			t.Fatalf("a cross-slot script: node of {a} holds %d of the keys, node of {b} holds %d; want 2 and 0 (routed to one node only)",
				ca.Exists(ctx, ka, kb).Val(), cb.Exists(ctx, ka, kb).Val())
		}
		if cc.Exists(ctx, kb).Val() != 0 {
			t.Fatalf("the cluster client finds %s on the node of its slot; the cross-slot write should have missed it", kb)
		}
		t.Logf("FALLBACK: a cross-slot EVAL ran on %s only; %s (slot %d) belongs to %s and is not there", na.Addr(), kb, redistest.Slot(kb), nb.Addr())
	})

	t.Run("MultiBudget", func(t *testing.T) {
		store := redisstore.New(cc, redisstore.WithPrefix(redistest.Prefix(t)))
		la, _ := time.LoadLocation("America/Los_Angeles")
		budgets := []quota.Budget{
			{Name: "units", Limit: 10000, Window: quota.Daily(la)},
			{Name: "search", Limit: 100, Window: quota.Daily(la)},
			{Name: "calls", Limit: 1000, Window: quota.Sliding(time.Hour)},
		}
		l, err := quota.New(store, "youtube", budgets, quota.WithClock(func() time.Time { return t0 }))
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
			us := overspend.Used(t, l, cred)
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
		l, err := quota.New(store, "youtube", overspend.Budgets(1000, 1000), quota.WithClock(func() time.Time { return t0 }))
		if err != nil {
			t.Fatal(err)
		}
		const creds = 48
		tags := map[string]int{} // hash tag -> credential
		for i := range creds {
			cred := quota.Credential{Secret: fmt.Sprintf("AIzaSy-cluster-spread-%d", i)}
			if _, err := l.Take(ctx, cred, overspend.Charge(7)); err != nil {
				t.Fatal(err)
			}
			tags[redisstore.CredentialTag("youtube", quota.DefaultFingerprint(cred.Secret))] = i
		}
		owner := slotOwners(t, cc)
		var mu sync.Mutex
		credMaster := map[int]map[string]bool{} // credential -> masters holding its keys
		credSlot := map[int]map[int64]bool{}
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			// A client given the layout by ClusterSlots (the fallback)
			// names loopback nodes ":PORT" (go-redis drops the host).
			addr := c.Options().Addr
			if strings.HasPrefix(addr, ":") {
				addr = "127.0.0.1" + addr
			}
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
				if int(slot) != redistest.Slot(k) {
					return fmt.Errorf("key %q: CLUSTER KEYSLOT on %s = %d, computed client-side %d", k, addr, slot, redistest.Slot(k))
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
		budgets := overspend.Budgets(3000, 1000)
		l, err := quota.New(store, "youtube", budgets, quota.WithClock(func() time.Time { return t0 }))
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
		per := make([]overspend.Spend, len(creds))
		var wg sync.WaitGroup
		for g := range 24 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(g)))
				ci := g % len(creds)
				var mine overspend.Spend
				for range 40 {
					cost := rng.Int64N(100) + 1
					_, err := l.Take(ctx, creds[ci], overspend.Charge(cost))
					mine.Record(cost, err)
				}
				mu.Lock()
				per[ci].Add(mine)
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
			for _, p := range overspend.Check(budgets, overspend.Used(t, l, creds[ci]), s) {
				t.Errorf("credential %d: %s", ci, p)
			}
		}
	})

	t.Run("CredentialsSpreadOverNodes", func(t *testing.T) {
		// Each credential's budgets stay together, and credentials spread
		// over the nodes: the log key of each is on one of them.
		st := redisstore.New(cc, redisstore.WithPrefix(redistest.Prefix(t)))
		l, err := quota.New(st, "youtube", []quota.Budget{
			{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)},
			{Name: "search", Limit: 10, Window: quota.Sliding(time.Hour)},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		nodes := map[string]bool{}
		var direct []*redis.Client
		for _, n := range cl.Nodes {
			direct = append(direct, n.Client(t))
		}
		for i := range 24 {
			cred := quota.Credential{Secret: "cluster-secret-" + string(rune('a'+i))}
			if _, err := l.Take(ctx, cred, quota.Charge{Units: map[string]int64{"units": 5, "search": 1}}); err != nil {
				t.Fatalf("credential %d: %v", i, err)
			}
			key := st.Prefix() + redisstore.CredentialTag("youtube", fingerprint(cred)) + ":log:units"
			for j, n := range direct {
				if n.Exists(ctx, key).Val() == 1 {
					nodes[cl.Nodes[j].Addr()] = true
				}
			}
		}
		if len(nodes) < 2 {
			t.Fatalf("24 credentials' logs sit on %d node(s); want them spread", len(nodes))
		}
	})

	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) quota.Store {
			return redisstore.New(cc, redisstore.WithPrefix(redistest.Prefix(t)))
		})
	})

	// The reference model's random runs (storetest.MatchesModel), each
	// run and each replay while shrinking under a prefix of its own; the
	// nodes' key lifetimes run on their own clocks (storetest.ServerClock).
	t.Run("MatchesModel", func(t *testing.T) {
		seeds, steps := storetest.ModelSeeds(t, 3, 250)
		for _, seed := range seeds {
			t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
				prefix, runs := redistest.Prefix(t), 0
				newStore := func(t *testing.T) quota.Store {
					runs++
					return redisstore.New(cc, redisstore.WithPrefix(fmt.Sprintf("%s%d:", prefix, runs)))
				}
				storetest.MatchesModel(t, newStore, seed, steps, storetest.ServerClock(10*time.Second))
			})
		}
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
