package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestLeaseKeys: a lease's keys live under the store's prefix (so a prefix
// sweep finds them) and expire with the lease on the server's clock; the
// fencing token outlives it, so the next grant's token is greater.
func TestLeaseKeys(t *testing.T) {
	m := redistest.Mini(t)
	st := redisstore.New(redistest.MiniClient(t, m), redisstore.WithPrefix("app:"))
	ctx := context.Background()
	l, err := st.AcquireLease(ctx, &quota.StateLeaseRequest{Key: "jobs/checkpoint/x", Holder: "h:1", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	keys := m.Keys()
	if len(keys) != 2 {
		t.Fatalf("keys %q, want the lease and its token", keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "app:") || !strings.HasSuffix(k, "{app:state:jobs/checkpoint/x}") {
			t.Errorf("key %q: want it under the prefix, tagged with the state key", k)
		}
	}
	m.FastForward(31 * time.Second) // PX on the server's clock
	if _, err := st.LoadLease(ctx, &quota.StateLeaseRequest{Key: "jobs/checkpoint/x"}); err == nil {
		t.Error("the lease outlived its PX")
	}
	next, err := st.AcquireLease(ctx, &quota.StateLeaseRequest{Key: "jobs/checkpoint/x", Holder: "h:2", TTL: 30 * time.Second})
	if err != nil || next.Token <= l.Token {
		t.Errorf("next grant %+v, %v; want a token above %d", next, err, l.Token)
	}
}
