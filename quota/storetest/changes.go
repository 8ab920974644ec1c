package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// changeVersion: a store's ChangeVersion (quota.ChangeVersioner) changes on
// every Adjust and Exhaust (a clear included) of any budget of the owner,
// and on nothing else: not on Take, Refund or Settle, nor on another
// owner's or another API's changes. While an entry of the owner is held (an
// open lease's block), no version comes back. A store without it is
// skipped: leases then keep the older bound (MaxTime).
func (s suite) changeVersion(t *testing.T) {
	ctx := context.Background()
	st := s.store(t)
	cv, ok := st.(backend.ChangeVersioner)
	if !ok {
		t.Skip("the store does not implement quota.ChangeVersioner")
	}
	units := quota.Budget{Name: "units", Limit: 1000, Window: quota.Sliding(time.Hour)}
	day := quota.Budget{Name: "day", Limit: 1000, Window: quota.Daily(time.UTC)}
	owner := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), "version-owner")
	other := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), "version-other")
	version := func(api, owner string) int64 {
		t.Helper()
		v, err := cv.ChangeVersion(ctx, api, owner)
		if err != nil {
			t.Fatalf("ChangeVersion(%s, %s): %v", api, owner, err)
		}
		return v
	}
	now := T0
	seen := map[int64]string{}
	cur := version("api", owner)
	seen[cur] = "at the start"
	// changed checks that the owner's version changed, to a value it never
	// had, and that the other owner's and the other API's did not.
	otherV, otherAPI := version("api", other), version("other-api", owner)
	changed := func(what string) {
		t.Helper()
		v := version("api", owner)
		if v == cur {
			t.Fatalf("%s: ChangeVersion stayed %d, want it changed", what, v)
		}
		if was, ok := seen[v]; ok {
			t.Fatalf("%s: ChangeVersion back to %d, which it was %s", what, v, was)
		}
		seen[v], cur = what, v
		if v := version("api", other); v != otherV {
			t.Fatalf("%s: another owner's ChangeVersion went from %d to %d", what, otherV, v)
		}
		if v := version("other-api", owner); v != otherAPI {
			t.Fatalf("%s: the owner's ChangeVersion in another API went from %d to %d", what, otherAPI, v)
		}
	}
	same := func(what string) {
		t.Helper()
		if v := version("api", owner); v != cur {
			t.Fatalf("%s: ChangeVersion went from %d to %d, want it unchanged", what, cur, v)
		}
	}
	// An open lease's block, held for the whole test.
	res, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: owner, Nonce: "block", Now: now,
		Debits: []backend.Debit{{Budget: units, Cost: 100}}, Hold: time.Minute})
	if err != nil || !res.OK {
		t.Fatalf("held Take = %+v, %v", res, err)
	}
	same("a held take")
	plain, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: owner, Nonce: "plain", Now: now,
		Debits: []backend.Debit{{Budget: units, Cost: 10}, {Budget: day, Cost: 10}}})
	if err != nil || !plain.OK {
		t.Fatalf("plain Take = %+v, %v", plain, err)
	}
	same("a plain take")
	if _, err := st.Settle(ctx, &backend.SettleRequest{API: "api", Owner: owner, At: plain.At, Nonce: "plain",
		Debits: []backend.Debit{{Budget: units, Cost: 5}}, Now: now}); err != nil {
		t.Fatal(err)
	}
	same("a settle")
	if _, err := st.Refund(ctx, &backend.RefundRequest{API: "api", Owner: owner, At: plain.At, Nonce: "plain",
		Budgets: []quota.Budget{units, day}, Now: now}); err != nil {
		t.Fatal(err)
	}
	same("a refund")
	if _, err := st.Usage(ctx, &backend.UsageRequest{API: "api", Owner: owner, Budgets: []quota.Budget{units, day}, Now: now}); err != nil {
		t.Fatal(err)
	}
	same("a usage read")

	now = now.Add(time.Second)
	if err := st.Adjust(ctx, &backend.AdjustRequest{API: "api", Owner: owner, Budget: units, Used: 900, Nonce: "adj1", Now: now}); err != nil {
		t.Fatal(err)
	}
	changed("an adjust")
	if err := st.Exhaust(ctx, &backend.ExhaustRequest{API: "api", Owner: owner, Budget: day, Until: now.Add(time.Hour), Now: now}); err != nil {
		t.Fatal(err)
	}
	changed("an exhaust of another budget")
	if err := st.Exhaust(ctx, &backend.ExhaustRequest{API: "api", Owner: owner, Budget: day, Now: now}); err != nil {
		t.Fatal(err)
	}
	changed("an exhaust clear")
	if err := st.Adjust(ctx, &backend.AdjustRequest{API: "api", Owner: owner, Budget: day, Used: 0, Nonce: "adj2", Now: now}); err != nil {
		t.Fatal(err)
	}
	changed("an adjust to 0 of a budget with nothing held")
	if err := st.Adjust(ctx, &backend.AdjustRequest{API: "api", Owner: owner, Budget: units, Used: 0, Nonce: "adj3", Now: now}); err != nil {
		t.Fatal(err)
	}
	changed("a reset")
	// The held block is still there, counted.
	us, err := st.Usage(ctx, &backend.UsageRequest{API: "api", Owner: owner, Budgets: []quota.Budget{units}, Now: now})
	if err != nil || us[0].Used != 100 {
		t.Fatalf("after the adjusts: Usage = %+v, %v; want the held block of 100", us, err)
	}
	// Through a limiter, whose Adjust and Exhaust reach the store's.
	clock := NewClock(now)
	l, err := quota.New(st, "api", []quota.Budget{units, day}, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "version-secret", Owner: "version-project"}
	before := version("api", "version-project")
	mustTake(t, l, cred, quota.Units("units", 1))
	if v := version("api", "version-project"); v != before {
		t.Fatalf("a limiter's take changed the owner's version from %d to %d", before, v)
	}
	if err := l.Adjust(ctx, cred, "units", 50); err != nil {
		t.Fatal(err)
	}
	v1 := version("api", "version-project")
	if v1 == before {
		t.Fatalf("Limiter.Adjust left the owner's version at %d", v1)
	}
	if err := l.Exhaust(ctx, cred, "day", clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if v := version("api", "version-project"); v == v1 || v == before {
		t.Fatalf("Limiter.Exhaust: the owner's version %d, after %d and %d", v, before, v1)
	}
}

// LeasesSeeChanges: limiter A holds an open lease (WithLeases) with unused
// units of its block on store a; limiter B, on store b (another handle on
// the same store: what another process has), adjusts the budget to leave
// 10 units, or exhausts it. Once A's clock has passed the lease's
// CheckEvery (and well within its MaxTime), A admits at most what the
// change left: its lease ends on the change, gives its unused units back,
// and the store decides. a and b may be the same store (the memory store).
// Nothing sleeps: both limiters run on one fake clock.
func LeasesSeeChanges(t *testing.T, a, b quota.Store) {
	ctx := context.Background()
	clock := NewClock(T0)
	budget := quota.Budget{Name: "units", Limit: 1000, Window: quota.Sliding(time.Hour)}
	opts := quota.LeaseOptions{Block: 100, MaxFraction: 0.2, MaxTime: time.Second, CheckEvery: 100 * time.Millisecond}
	la, err := quota.New(a, "api", []quota.Budget{budget}, quota.WithClock(clock.Now), quota.WithLeases(opts))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := quota.New(b, "api", []quota.Budget{budget}, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "leases-see-changes", Owner: "project"}
	spend := func() (n int64) {
		t.Helper()
		for range 200 {
			_, err := la.Take(ctx, cred, quota.Units("units", 1))
			if errors.Is(err, quota.ErrExhausted) {
				return n
			}
			if err != nil {
				t.Fatalf("A's take: %v", err)
			}
			n++
		}
		return n
	}

	// Adjust: the upstream counts 990 used, 10 left.
	mustTake(t, la, cred, quota.Units("units", 1)) // a block of 100, 99 unused
	clock.Add(10 * time.Millisecond)
	if err := lb.Adjust(ctx, cred, "units", 990); err != nil {
		t.Fatalf("B's Adjust: %v", err)
	}
	clock.Add(opts.CheckEvery + time.Millisecond) // past CheckEvery, within MaxTime
	got := spend()
	t.Logf("after another process adjusted to leave 10 units, A admitted %d more", got)
	if got > 10 {
		t.Fatalf("after another process's Adjust left 10 units, the open lease admitted %d more: %d over what the upstream allows", got, got-10)
	}
	if got < 9 {
		t.Fatalf("after the Adjust left 10 units (1 of them admitted from the lease before it, counted twice), A admitted %d, want 9", got)
	}
	if u := used(t, lb, cred, "units"); u > budget.Limit {
		t.Fatalf("the store counts %d units, over the limit %d", u, budget.Limit)
	}

	// Exhaust: the upstream says the budget is spent.
	clock.Add(2 * time.Second)
	if err := lb.Adjust(ctx, cred, "units", 0); err != nil {
		t.Fatal(err)
	}
	mustTake(t, la, cred, quota.Units("units", 1)) // a new block, 99 unused
	clock.Add(10 * time.Millisecond)
	if err := lb.Exhaust(ctx, cred, "units", clock.Now().Add(time.Hour)); err != nil {
		t.Fatalf("B's Exhaust: %v", err)
	}
	// Within CheckEvery the lease may still admit (the documented bound)...
	clock.Add(opts.CheckEvery / 2)
	mustTake(t, la, cred, quota.Units("units", 1))
	// ...and not once it has passed.
	clock.Add(opts.CheckEvery)
	if got := spend(); got != 0 {
		t.Fatalf("after another process's Exhaust, the open lease admitted %d more, want 0", got)
	}
	if err := la.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
