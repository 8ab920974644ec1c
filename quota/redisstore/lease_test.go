package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestLeaseKeys: a lease's keys live under the store's prefix (so a prefix
// sweep finds them) and expire with the lease on the server's clock; the
// fencing token outlives it, so the next grant's token is greater.
func TestLeaseKeys(t *testing.T) {
	m := redistest.Mini(t)
	st := redisstore.New(redistest.MiniClient(t, m), redisstore.WithPrefix("app:"))
	ctx := context.Background()
	l, err := st.AcquireLease(ctx, &backend.StateLeaseRequest{Key: "jobs/checkpoint/x", Holder: "h:1", TTL: 30 * time.Second})
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
	if _, err := st.LoadLease(ctx, &backend.StateLeaseRequest{Key: "jobs/checkpoint/x"}); err == nil {
		t.Error("the lease outlived its PX")
	}
	next, err := st.AcquireLease(ctx, &backend.StateLeaseRequest{Key: "jobs/checkpoint/x", Holder: "h:2", TTL: 30 * time.Second})
	if err != nil || next.Token <= l.Token {
		t.Errorf("next grant %+v, %v; want a token above %d", next, err, l.Token)
	}
}

// TestLeaseTokensOutliveDataLoss: a Redis that loses its data (a restart
// without persistence, a FLUSHALL, a failover to a replica that missed the
// writes) loses the token counter with the lease. The next grant's token
// must still be greater than every earlier one, or the holder of an earlier
// lease (paused while Redis restarted) writes over the new holder's
// checkpoint: its fenced writes are refused once a newer lease is granted.
func TestLeaseTokensOutliveDataLoss(t *testing.T) {
	m := redistest.Mini(t)
	st := redisstore.New(redistest.MiniClient(t, m), redisstore.WithPrefix("app:"))
	ctx := context.Background()
	const key = "jobs/checkpoint/x"
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	req := func(holder string, token int64, at time.Duration) *backend.StateLeaseRequest {
		return &backend.StateLeaseRequest{Key: key, Holder: holder, Token: token, TTL: 30 * time.Second, Now: t0.Add(at)}
	}
	first, err := st.AcquireLease(ctx, req("h:1", 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ReleaseLease(ctx, req("", first.Token, time.Second)); err != nil {
		t.Fatal(err)
	}
	stale, err := st.AcquireLease(ctx, req("h:2", 0, 2*time.Second)) // then paused
	if err != nil {
		t.Fatal(err)
	}
	m.FlushAll() // Redis restarts without persistence
	fresh, err := st.AcquireLease(ctx, req("h:3", 0, 40*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Token <= stale.Token {
		t.Errorf("after the data loss the new lease has token %d, not above the paused holder's %d", fresh.Token, stale.Token)
	}
	if err := st.SaveStateFenced(ctx, key, []byte("fresh"), fresh.Token); err != nil {
		t.Fatalf("SaveStateFenced by the new holder: %v", err)
	}
	if err := st.SaveStateFenced(ctx, key, []byte("stale"), stale.Token); !errors.Is(err, backend.ErrLeaseLost) {
		t.Errorf("SaveStateFenced by the paused holder after the data loss = %v, want ErrLeaseLost", err)
	}
	if got, err := st.LoadState(ctx, key); err != nil || string(got) != "fresh" {
		t.Errorf("state = %q, %v; want the new holder's", got, err)
	}
}
