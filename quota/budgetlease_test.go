package quota_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/storetest"
)

func storeUsed(t *testing.T, l *quota.Limiter, cred quota.Credential) int64 {
	t.Helper()
	us, err := l.Status(context.Background(), cred)
	if err != nil {
		t.Fatal(err)
	}
	return us[0].Used
}

// TestLeaseEndsOnExhaustAndAdjust: the limiter's own Exhaust and Adjust end
// its lease first, so no unit is admitted locally past the mark or outside
// the log Adjust replaced; refunds and settles of leased reservations go
// back to the lease, and Close gives the rest back.
func TestLeaseEndsOnExhaustAndAdjust(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(storetest.T0)
	l, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(clock.Now), quota.WithLeases(quota.LeaseOptions{Block: 10, MaxFraction: 0.5}))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "lease-secret"}
	r, err := l.Take(ctx, cred, quota.Units("units", 1))
	if err != nil {
		t.Fatal(err)
	}
	if r.ID() != "" {
		t.Fatalf("a leased reservation has ID %q, want none", r.ID())
	}
	if u := storeUsed(t, l, cred); u != 10 {
		t.Fatalf("after one leased take the store counts %d, want the block of 10", u)
	}
	if err := l.Exhaust(ctx, cred, "units", clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if u := storeUsed(t, l, cred); u != 1 {
		t.Fatalf("after Exhaust the store counts %d, want the 1 unit admitted (the lease settled)", u)
	}
	if _, err := l.Take(ctx, cred, quota.Units("units", 1)); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("Take past an exhaust mark = %v, want ErrExhausted (not admitted from the old lease)", err)
	}
	// the settled block of 1 is held until the lease's time has passed
	// (its entry stamped there): an Adjust before then keeps it
	clock.Add(time.Second)
	if err := l.Adjust(ctx, cred, "units", 0); err != nil {
		t.Fatal(err)
	}
	r1, err := l.Take(ctx, cred, quota.Units("units", 3))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Adjust(ctx, cred, "units", 50); err != nil {
		t.Fatal(err)
	}
	// its lease was ended by Adjust, which dropped the block although it
	// is held (the limiter's own lease: what it admitted is in the 50):
	// nothing to give back, as for a plain reservation
	if err := l.Refund(ctx, r1); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("refund of a leased reservation whose block Adjust replaced = %v, want ErrNotFound", err)
	}
	r2, err := l.Take(ctx, cred, quota.Units("units", 4))
	if err != nil {
		t.Fatal(err)
	}
	if u := storeUsed(t, l, cred); u != 60 {
		t.Fatalf("after Adjust(50) and a leased take the store counts %d, want 50 + a new block of 10", u)
	}
	if err := r2.Settle(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, r2); err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, r2); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("second refund of a leased reservation = %v, want ErrNotFound", err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if u := storeUsed(t, l, cred); u != 50 {
		t.Fatalf("after Close the store counts %d, want 50 (every leased unit given back)", u)
	}
}

// TestLeaseMultiBudget: a charge of two budgets under leases pays both or
// neither: when one budget refuses, the units the other's lease set aside
// for the charge go back to that lease.
func TestLeaseMultiBudget(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(storetest.T0)
	l, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{
		{Name: "units", Limit: 1000, Window: quota.Sliding(time.Hour)},
		{Name: "search", Limit: 5, Window: quota.Daily(time.UTC)},
	}, quota.WithClock(clock.Now), quota.WithLeases(quota.LeaseOptions{Block: 10, MaxFraction: 1}))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "lease-secret"}
	both := quota.Charge{Units: map[string]int64{"units": 3, "search": 1}}
	for i := range 5 {
		if _, err := l.Take(ctx, cred, both); err != nil {
			t.Fatalf("take %d: %v", i, err)
		}
	}
	_, err = l.Take(ctx, cred, both)
	var ee *quota.ExhaustedError
	if !errors.As(err, &ee) || ee.Budget != "search" || !ee.RetryAt.Equal(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("sixth take = %v, want search refused until midnight", err)
	}
	// The units the refused charge set aside went back to the units lease,
	// so settling it leaves exactly the 5 charges counted.
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	us, err := l.Status(ctx, cred)
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Used != 15 || us[1].Used != 5 {
		t.Fatalf("after Close: units %d search %d, want 15 and 5 (the refused charge took nothing)", us[0].Used, us[1].Used)
	}
}

// TestLeaseConcurrent: 16 goroutines charge, settle and refund through one
// leased limiter with adaptive blocks; once it is closed the store counts
// exactly the units kept, and never more than the limit were admitted.
func TestLeaseConcurrent(t *testing.T) {
	ctx := context.Background()
	const limit = 5000
	l, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{{Name: "units", Limit: limit, Window: quota.Sliding(time.Hour)}},
		quota.WithLeases(quota.LeaseOptions{MaxTime: 50 * time.Millisecond}), quota.WithLocalRefusals(0))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "lease-secret"}
	var kept atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 400 {
				r, err := l.Take(ctx, cred, quota.Units("units", 3))
				if errors.Is(err, quota.ErrExhausted) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				switch (g + i) % 5 {
				case 0:
					if err := l.Refund(ctx, r); err != nil {
						t.Error(err)
						return
					}
				case 1:
					if err := r.Settle(ctx, 1); err != nil {
						t.Error(err)
						return
					}
					kept.Add(1)
				default:
					kept.Add(3)
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if kept.Load() > limit {
		t.Fatalf("kept %d units, limit %d", kept.Load(), limit)
	}
	if u := storeUsed(t, l, cred); u != kept.Load() {
		t.Fatalf("after Close the store counts %d, the goroutines kept %d", u, kept.Load())
	}
}

// callCounter counts the Takes and Settles that reach a store.
type callCounter struct {
	quota.Store
	takes, settles atomic.Int64
}

func (c *callCounter) Take(ctx context.Context, req *backend.TakeRequest) (*backend.TakeResult, error) {
	c.takes.Add(1)
	return c.Store.Take(ctx, req)
}

func (c *callCounter) Settle(ctx context.Context, req *backend.SettleRequest) (map[string]int64, error) {
	c.settles.Add(1)
	return c.Store.Settle(ctx, req)
}

// TestLeaseBigChargePlain: a charge whose cost reaches the block size is
// one plain store decision: it neither waits on the lease nor ends it, so
// small charges keep being admitted from the lease (a YouTube job mixing
// 1-unit reads with 50-unit writes under Block: 10 made a store call and a
// settle for each write, and queued every write behind one lock). When the
// plain decision is refused, the lease's unused units go back first and
// the charge is decided again, so the units the lease set aside never
// refuse a charge that fits.
func TestLeaseBigChargePlain(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(storetest.T0)
	newLimiter := func(st quota.Store, limit int64) *quota.Limiter {
		t.Helper()
		l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: limit, Window: quota.Sliding(time.Hour)}},
			quota.WithClock(clock.Now), quota.WithLeases(quota.LeaseOptions{Block: 10, MaxFraction: 0.5}))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	cred := quota.Credential{Secret: "lease-secret"}
	st := &callCounter{Store: quota.NewMemoryStore()}
	l := newLimiter(st, 1000)
	for _, cost := range []int64{1, 50, 1, 50, 1} { // a lease of 10, then plain, lease, plain, lease
		if _, err := l.Take(ctx, cred, quota.Units("units", cost)); err != nil {
			t.Fatalf("Take(%d): %v", cost, err)
		}
	}
	if got := st.takes.Load(); got != 3 || st.settles.Load() != 0 {
		t.Fatalf("%d store takes and %d settles, want 3 takes (one block, two plain) and no settle", got, st.settles.Load())
	}
	if u := storeUsed(t, l, cred); u != 110 {
		t.Fatalf("store counts %d, want 110 (100 plain + the block of 10)", u)
	}

	l2 := newLimiter(quota.NewMemoryStore(), 100)
	if _, err := l2.Take(ctx, cred, quota.Units("units", 1)); err != nil { // a lease of 10, 1 used
		t.Fatal(err)
	}
	// 99 units fit (1 admitted), but the store counts the whole block:
	// the lease gives back its 9 and the charge is decided again
	if _, err := l2.Take(ctx, cred, quota.Units("units", 99)); err != nil {
		t.Fatalf("Take(99) with 1 unit admitted of 100: %v", err)
	}
	if u := storeUsed(t, l2, cred); u != 100 {
		t.Fatalf("store counts %d, want 100", u)
	}
	if _, err := l2.Take(ctx, cred, quota.Units("units", 1)); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("Take(1) with 100 of 100 admitted: %v, want ErrExhausted", err)
	}
}

// TestLeaseBreakdown: a lease's block is spent under method "lease", and
// settling it gives its unused units back to that row, so the breakdown
// shows what the leases admitted, with no row below zero; a plain decision
// under leases is spent, and settled, under its own method and job.
func TestLeaseBreakdown(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(storetest.T0)
	st := quota.NewMemoryStore()
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(clock.Now), quota.WithLeases(quota.LeaseOptions{Block: 10, MaxFraction: 0.5}))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "lease-secret"}
	var owner string
	for range 3 {
		r, err := l.Take(ctx, cred, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 1}})
		if err != nil {
			t.Fatal(err)
		}
		owner = r.Owner
	}
	// a charge no block could serve twice is a plain decision: spent
	// under its own method, and settled back to it
	big, err := l.Take(quota.ContextWithJob(ctx, "sync"), cred, quota.Charge{Method: "videos.update", Units: map[string]int64{"units": 50}})
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Settle(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := st.Breakdown(ctx, &backend.BreakdownRequest{API: "api", Owner: owner, Since: clock.Now().Add(-time.Hour), Now: clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s %s %s %d", r.Budget, r.Method, r.Job, r.Units))
	}
	if want := []string{"units lease  3", "units videos.update sync 20"}; !slices.Equal(got, want) {
		t.Fatalf("breakdown after 3 leased units, a plain 50 settled to 20, and Close: %q, want %q", got, want)
	}
}

// TestLeasedRefundNotFound: refunding or settling a leased reservation
// that has nothing left to give back (refunded already, or its block out
// of its window) says so with ErrNotFound, as for a plain reservation,
// and changes nothing.
func TestLeasedRefundNotFound(t *testing.T) {
	ctx := context.Background()
	for _, w := range []quota.Window{quota.Sliding(time.Hour), quota.Daily(time.UTC)} {
		t.Run(w.String(), func(t *testing.T) {
			clock := testkit.NewClock(storetest.T0)
			l, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{{Name: "units", Limit: 100, Window: w}},
				quota.WithClock(clock.Now), quota.WithLeases(quota.LeaseOptions{Block: 10, MaxFraction: 0.5}))
			if err != nil {
				t.Fatal(err)
			}
			cred := quota.Credential{Secret: "lease-secret"}
			r, err := l.Take(ctx, cred, quota.Units("units", 2))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Refund(ctx, r); err != nil {
				t.Fatal(err)
			}
			if err := r.Settle(ctx, 1); !errors.Is(err, quota.ErrNotFound) {
				t.Fatalf("settle after refund = %v, want ErrNotFound", err)
			}
			if err := l.Refund(ctx, r); !errors.Is(err, quota.ErrNotFound) {
				t.Fatalf("second refund = %v, want ErrNotFound", err)
			}
			old, err := l.Take(ctx, cred, quota.Units("units", 3))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Close(ctx); err != nil {
				t.Fatal(err)
			}
			clock.Add(25 * time.Hour) // past the window, and past midnight
			if err := l.Refund(ctx, old); !errors.Is(err, quota.ErrNotFound) {
				t.Fatalf("refund out of the window = %v, want ErrNotFound", err)
			}
			if err := old.Settle(ctx, 1); !errors.Is(err, quota.ErrNotFound) {
				t.Fatalf("settle out of the window = %v, want ErrNotFound", err)
			}
			if old.Usage[0].Cost != 3 {
				t.Fatalf("usage after failed refunds: cost %d, want 3 unchanged", old.Usage[0].Cost)
			}
			if u := storeUsed(t, l, cred); u != 0 {
				t.Fatalf("store counts %d, want 0", u)
			}
		})
	}
}

// stallStore records every Take, but answers the first fail of them with
// an error, as a Redis that stalled past the caller's deadline and then
// ran the script anyway.
type stallStore struct {
	quota.Store
	fail int
}

func (s *stallStore) Take(ctx context.Context, req *backend.TakeRequest) (*backend.TakeResult, error) {
	res, err := s.Store.Take(ctx, req)
	if err == nil && s.fail > 0 {
		s.fail--
		return nil, fmt.Errorf("%w: i/o timeout (the store went on)", quota.ErrStoreUnavailable)
	}
	return res, err
}

// TestLeaseAfterFailedTake: a block take whose outcome is unknown (the
// store timed out, and may have recorded it) is not retried as a whole
// block: until a take succeeds, the lease takes the charge alone, so a
// stall wastes one charge per failed call, not a block of up to 5% of the
// limit per worker (staged on Redis: 3,255 units admitted, 11,994
// counted, after a 2 s stall).
func TestLeaseAfterFailedTake(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(storetest.T0)
	st := &stallStore{Store: quota.NewMemoryStore(), fail: 3}
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 10000, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(clock.Now), quota.WithLeases(quota.LeaseOptions{Block: 100, MaxFraction: 0.5}))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "lease-secret"}
	for range 3 {
		if _, err := l.Take(ctx, cred, quota.Units("units", 1)); !errors.Is(err, quota.ErrStoreUnavailable) {
			t.Fatalf("Take while the store fails = %v, want ErrStoreUnavailable", err)
		}
	}
	// the first failed take was a whole block; the two after it, one unit
	if u := storeUsed(t, l, cred); u != 102 {
		t.Fatalf("after 3 failed takes the store counts %d, want 100 + 1 + 1", u)
	}
	if _, err := l.Take(ctx, cred, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	if u := storeUsed(t, l, cred); u != 103 {
		t.Fatalf("the first take after the failures counts %d, want 103 (the charge alone)", u)
	}
	if _, err := l.Take(ctx, cred, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	if u := storeUsed(t, l, cred); u != 203 {
		t.Fatalf("once a take succeeded the store counts %d, want 203 (whole blocks again)", u)
	}
}

// versionStore is a MemoryStore that counts ChangeVersion reads and fails
// them while fail is set.
type versionStore struct {
	*quota.MemoryStore
	reads atomic.Int64
	fail  atomic.Bool
}

func (s *versionStore) ChangeVersion(ctx context.Context, api, owner string) (int64, error) {
	s.reads.Add(1)
	if s.fail.Load() {
		return 0, fmt.Errorf("%w: test", quota.ErrStoreUnavailable)
	}
	return s.MemoryStore.ChangeVersion(ctx, api, owner)
}

// noVersions hides the store's ChangeVersioner: a store without one.
type noVersions struct{ quota.Store }

// TestLeaseVersionChecks: a lease reads the owner's change version once
// before its block and then at most once per CheckEvery of admissions, not
// per charge; a read that fails ends the lease (the store decides); and
// with a store that keeps no version, another limiter's Adjust reaches
// the lease only at its end (the older bound).
func TestLeaseVersionChecks(t *testing.T) {
	ctx := context.Background()
	b := []quota.Budget{{Name: "units", Limit: 1000, Window: quota.Sliding(time.Hour)}}
	cred := quota.Credential{Secret: "version-checks"}
	opts := quota.LeaseOptions{Block: 100, MaxFraction: 0.2, MaxTime: time.Second, CheckEvery: 100 * time.Millisecond}

	t.Run("reads", func(t *testing.T) {
		clock := testkit.NewClock(storetest.T0)
		st := &versionStore{MemoryStore: quota.NewMemoryStore()}
		l, err := quota.New(st, "api", b, quota.WithClock(clock.Now), quota.WithLeases(opts))
		if err != nil {
			t.Fatal(err)
		}
		for range 50 { // within CheckEvery: no read past the first
			mustTakeT(t, l, cred)
			clock.Add(time.Millisecond)
		}
		if n := st.reads.Load(); n != 1 {
			t.Fatalf("%d version reads for 50 charges within CheckEvery of one lease, want 1 (before its block)", n)
		}
		clock.Add(opts.CheckEvery)
		for range 10 {
			mustTakeT(t, l, cred)
		}
		if n := st.reads.Load(); n != 2 {
			t.Fatalf("%d version reads after CheckEvery passed, want 2: one check confirms the lease for another CheckEvery", n)
		}
		// A read that fails ends the lease: its unused units go back, and
		// the charge is decided by the store (here: a new block).
		clock.Add(opts.CheckEvery + time.Millisecond)
		st.fail.Store(true)
		mustTakeT(t, l, cred)
		if u := storeUsed(t, l, cred); u != 60+100 {
			t.Fatalf("after a failed check the store counts %d, want 160: the 60 admitted, and a new block of 100", u)
		}
	})

	t.Run("no ChangeVersioner", func(t *testing.T) {
		clock := testkit.NewClock(storetest.T0)
		st := quota.NewMemoryStore()
		l, err := quota.New(noVersions{st}, "api", b, quota.WithClock(clock.Now), quota.WithLeases(opts))
		if err != nil {
			t.Fatal(err)
		}
		op, err := quota.New(st, "api", b, quota.WithClock(clock.Now))
		if err != nil {
			t.Fatal(err)
		}
		mustTakeT(t, l, cred)
		if err := op.Adjust(ctx, cred, "units", 990); err != nil {
			t.Fatal(err)
		}
		clock.Add(opts.CheckEvery + time.Millisecond)
		for i := range 99 {
			if _, err := l.Take(ctx, cred, quota.Units("units", 1)); err != nil {
				t.Fatalf("take %d from the open lease of a store without versions: %v (it keeps the older bound, MaxTime)", i, err)
			}
		}
	})
}

func mustTakeT(t *testing.T, l *quota.Limiter, cred quota.Credential) {
	t.Helper()
	if _, err := l.Take(context.Background(), cred, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
}
