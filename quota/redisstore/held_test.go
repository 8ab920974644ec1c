package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestHeldEntryKeepsKeys: a later plain take must not shorten the keys'
// lifetime below a held entry's expiry (a lease's block, Hold past now):
// the log and its sum live until the held entry leaves the window.
func TestHeldEntryKeepsKeys(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	st := redisstore.New(rdb, redisstore.WithPrefix(prefix))
	const w = 10 * time.Minute
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(w)}
	owner := fingerprint(quota.Credential{Secret: "held-keys-secret"})
	t0 := time.Now().Truncate(time.Microsecond)
	if res, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: owner, Nonce: "block", Now: t0,
		Debits: []backend.Debit{{Budget: b, Cost: 10}}, Hold: w / 10}); err != nil || !res.OK {
		t.Fatalf("held take = %+v, %v", res, err)
	}
	if res, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: owner, Nonce: "plain", Now: t0.Add(time.Second),
		Debits: []backend.Debit{{Budget: b, Cost: 1}}}); err != nil || !res.OK {
		t.Fatalf("plain take = %+v, %v", res, err)
	}
	tag := prefix + redisstore.CredentialTag("api", owner)
	// The held entry counts until t0 + w/10 + w; the plain take ran at t0+1s.
	want := w + w/10 - time.Second - 5*time.Second // slack for the test's own time
	for _, key := range []string{tag + ":log:units", tag + ":sum:units"} {
		ttl, err := rdb.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < want {
			t.Fatalf("%s lives %v more, want at least %v: the held entry would vanish before it leaves the window", key, ttl, want)
		}
	}
}
