package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

func (s suite) stateStore(t *testing.T) {
	st, ok := s.store(t).(quota.StateStore)
	if !ok {
		t.Fatal("the store does not implement quota.StateStore, where the jobs package keeps checkpoints and run history")
	}
	ctx := context.Background()
	if _, err := st.LoadState(ctx, "jobs/x/checkpoint"); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("LoadState of a missing key = %v, want ErrNotFound", err)
	}
	for _, v := range []string{`{"region":"US"}`, `{"region":"GB"}`} {
		if err := st.SaveState(ctx, "jobs/x/checkpoint", []byte(v)); err != nil {
			t.Fatal(err)
		}
		got, err := st.LoadState(ctx, "jobs/x/checkpoint")
		if err != nil || string(got) != v {
			t.Fatalf("LoadState = %q, %v; want %q", got, err, v)
		}
	}
	for i := range 7 {
		if err := st.AppendRecord(ctx, "jobs/x/runs", []byte(fmt.Sprint(i)), 5); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AppendRecord(ctx, "jobs/y/runs", []byte("y"), 5); err != nil {
		t.Fatal(err)
	}
	recs, err := st.Records(ctx, "jobs/x/runs", 0)
	var got []string
	for _, r := range recs {
		got = append(got, string(r))
	}
	if err != nil || !slices.Equal(got, []string{"6", "5", "4", "3", "2"}) {
		t.Fatalf("Records = %v, %v; want the newest 5, newest first", got, err)
	}
	if recs, _ := st.Records(ctx, "jobs/x/runs", 2); len(recs) != 2 || string(recs[0]) != "6" {
		t.Fatalf("Records(limit 2) = %q", recs)
	}
	if recs, err := st.Records(ctx, "jobs/none/runs", 0); err != nil || len(recs) != 0 {
		t.Fatalf("Records of a missing stream = %q, %v", recs, err)
	}
	names, err := st.Streams(ctx, "jobs/")
	if err != nil || !slices.Equal(names, []string{"jobs/x/runs", "jobs/y/runs"}) {
		t.Fatalf("Streams = %v, %v", names, err)
	}
}

// leases: one holder at a time, expiry on the request's clock, renewal,
// compare-and-delete release, fencing tokens that refuse a zombie's write,
// and one winner among concurrent acquirers.
func (s suite) leases(t *testing.T) {
	st := s.store(t).(quota.StateStore)
	ctx := context.Background()
	const key = "jobs/checkpoint/trending"
	at := func(d time.Duration) time.Time { return T0.Add(d) }
	req := func(holder string, token int64, now time.Duration) *backend.StateLeaseRequest {
		return &backend.StateLeaseRequest{Key: key, Holder: holder, Token: token, TTL: 30 * time.Second, Now: at(now)}
	}

	a, err := st.AcquireLease(ctx, req("host-a:1", 0, 0))
	if err != nil || a.Holder != "host-a:1" || a.Token <= 0 || !a.Expires.Equal(at(30*time.Second)) || a.Key != key {
		t.Fatalf("AcquireLease = %+v, %v; want host-a:1's, expiring at T0+30s", a, err)
	}
	_, err = st.AcquireLease(ctx, req("host-b:2", 0, 10*time.Second))
	var held *backend.StateLeaseHeldError
	if !errors.As(err, &held) || !errors.Is(err, backend.ErrLeaseHeld) || errors.Is(err, quota.ErrStoreUnavailable) ||
		held.Held.Holder != "host-a:1" || !held.Held.Expires.Equal(at(30*time.Second)) || held.Held.Token != a.Token {
		t.Fatalf("a second AcquireLease = %v (%+v); want a LeaseHeldError naming host-a:1 until T0+30s", err, held)
	}
	if l, err := st.LoadLease(ctx, req("", 0, 10*time.Second)); err != nil || l != a {
		t.Fatalf("LoadLease = %+v, %v; want %+v", l, err, a)
	}
	if _, err := st.RenewLease(ctx, req("", a.Token+1, 20*time.Second)); !errors.Is(err, backend.ErrLeaseLost) {
		t.Fatalf("RenewLease with a wrong token = %v, want ErrLeaseLost", err)
	}
	r, err := st.RenewLease(ctx, req("", a.Token, 20*time.Second))
	if err != nil || r.Token != a.Token || r.Holder != "host-a:1" || !r.Expires.Equal(at(50*time.Second)) {
		t.Fatalf("RenewLease = %+v, %v; want expiry T0+50s", r, err)
	}
	if _, err := st.AcquireLease(ctx, req("host-b:2", 0, 40*time.Second)); !errors.Is(err, backend.ErrLeaseHeld) {
		t.Fatalf("AcquireLease inside the renewed lease = %v, want ErrLeaseHeld", err)
	}
	if err := st.SaveStateFenced(ctx, key, []byte("a1"), a.Token); err != nil {
		t.Fatalf("SaveStateFenced by the holder: %v", err)
	}

	// A's lease ends at T0+50s: B takes over with a newer token, and A,
	// a zombie now, can neither renew, release nor write.
	if _, err := st.LoadLease(ctx, req("", 0, 50*time.Second)); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("LoadLease after expiry = %v, want ErrNotFound", err)
	}
	if _, err := st.RenewLease(ctx, req("", a.Token, 51*time.Second)); !errors.Is(err, backend.ErrLeaseLost) {
		t.Fatalf("RenewLease after expiry = %v, want ErrLeaseLost", err)
	}
	b, err := st.AcquireLease(ctx, req("host-b:2", 0, 51*time.Second))
	if err != nil || b.Token <= a.Token || b.Holder != "host-b:2" {
		t.Fatalf("AcquireLease after expiry = %+v, %v; want host-b:2 with a token above %d", b, err, a.Token)
	}
	if err := st.SaveStateFenced(ctx, key, []byte("b1"), b.Token); err != nil {
		t.Fatal(err)
	}
	err = st.SaveStateFenced(ctx, key, []byte("zombie"), a.Token)
	if !errors.Is(err, backend.ErrLeaseLost) || errors.Is(err, quota.ErrStoreUnavailable) {
		t.Fatalf("SaveStateFenced with the old token = %v, want ErrLeaseLost", err)
	}
	if v, err := st.LoadState(ctx, key); err != nil || string(v) != "b1" {
		t.Fatalf("state after the zombie's write = %q, %v; want b1", v, err)
	}
	if err := st.ReleaseLease(ctx, req("", a.Token, 52*time.Second)); !errors.Is(err, backend.ErrLeaseLost) {
		t.Fatalf("ReleaseLease with the old token = %v, want ErrLeaseLost", err)
	}
	if l, err := st.LoadLease(ctx, req("", 0, 52*time.Second)); err != nil || l != b {
		t.Fatalf("the zombie's release touched the new lease: %+v, %v", l, err)
	}
	if err := st.ReleaseLease(ctx, req("", b.Token, 53*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.LoadLease(ctx, req("", 0, 53*time.Second)); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("LoadLease after release = %v, want ErrNotFound", err)
	}
	c, err := st.AcquireLease(ctx, req("host-c:3", 0, 54*time.Second))
	if err != nil || c.Token <= b.Token {
		t.Fatalf("AcquireLease after release = %+v, %v; want a token above %d", c, err, b.Token)
	}
	if err := st.SaveStateFenced(ctx, key, []byte("b2"), b.Token); !errors.Is(err, backend.ErrLeaseLost) {
		t.Fatalf("SaveStateFenced by a released holder = %v, want ErrLeaseLost", err)
	}
	// Leases on other keys are apart; a key never leased takes any write.
	if _, err := st.AcquireLease(ctx, &backend.StateLeaseRequest{Key: "jobs/checkpoint/other", Holder: "x", TTL: time.Minute, Now: at(54 * time.Second)}); err != nil {
		t.Fatalf("AcquireLease of another key: %v", err)
	}
	if err := st.SaveStateFenced(ctx, "jobs/checkpoint/never", []byte("v"), 1); err != nil {
		t.Fatalf("SaveStateFenced of a key never leased: %v", err)
	}

	// The store's own clock (no Now): a minute-long lease is live.
	own := &backend.StateLeaseRequest{Key: "jobs/checkpoint/own-clock", Holder: "h", TTL: time.Minute}
	l, err := st.AcquireLease(ctx, own)
	if err != nil || time.Until(l.Expires) > time.Minute+time.Hour || time.Until(l.Expires) < -time.Hour {
		t.Fatalf("AcquireLease on the store's clock = %+v, %v", l, err)
	}
	if _, err := st.AcquireLease(ctx, own); !errors.Is(err, backend.ErrLeaseHeld) {
		t.Fatalf("second AcquireLease on the store's clock = %v, want ErrLeaseHeld", err)
	}
	if err := st.ReleaseLease(ctx, &backend.StateLeaseRequest{Key: own.Key, Token: l.Token}); err != nil {
		t.Fatalf("ReleaseLease on the store's clock: %v", err)
	}

	// Bad requests name what is wrong and change nothing.
	for _, bad := range []*backend.StateLeaseRequest{
		{Key: "", Holder: "h", TTL: time.Minute},
		{Key: "a{b}", Holder: "h", TTL: time.Minute},
		{Key: "k", Holder: "", TTL: time.Minute},
		{Key: "k", Holder: "h", TTL: 0},
	} {
		if _, err := st.AcquireLease(ctx, bad); !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("AcquireLease(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := st.RenewLease(ctx, &backend.StateLeaseRequest{Key: "k", TTL: time.Minute}); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("RenewLease with no token = %v, want ErrInvalid", err)
	}
	if err := st.SaveStateFenced(ctx, "", []byte("v"), 1); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("SaveStateFenced of an empty key = %v, want ErrInvalid", err)
	}

	// Concurrent acquirers at one instant: exactly one wins.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := st.AcquireLease(ctx, &backend.StateLeaseRequest{Key: "jobs/checkpoint/race", Holder: fmt.Sprint("p", i), TTL: time.Minute, Now: at(time.Minute)})
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, backend.ErrLeaseHeld):
				t.Errorf("AcquireLease: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Errorf("%d of 8 concurrent acquirers got the lease, want 1", n)
	}
}
