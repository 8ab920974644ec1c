package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/storetest"
)

// TestCluster runs the conformance suite on a three-master Redis Cluster:
// every multi-budget charge is one script in one slot (no CROSSSLOT), and
// the catalog's keys live wherever their slots are.
func TestCluster(t *testing.T) {
	cl := redistest.NewCluster(t)
	c := cl.Client(t)
	storetest.Run(t, func(t *testing.T) quota.Store {
		return redisstore.New(c, redisstore.WithPrefix(redistest.Prefix(t)))
	})

	// Credentials spread over the nodes; each one's budgets stay together.
	st := redisstore.New(c, redisstore.WithPrefix(redistest.Prefix(t)))
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
}

// TestSentinel runs the conformance suite through a failover client that
// finds the master via Sentinel.
func TestSentinel(t *testing.T) {
	s := redistest.NewSentinel(t)
	c := s.Client(t)
	storetest.Run(t, func(t *testing.T) quota.Store {
		return redisstore.New(c, redisstore.WithPrefix(redistest.Prefix(t)))
	})
}
