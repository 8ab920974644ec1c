package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// ownerLimits: two owners of one budget with limits of their own (a
// program's, WithOwnerLimits) and a third with the budget's limit are
// decided by the same store, each up to its own limit; each refusal, each
// reservation and Status report that owner's limit, and a cost over the
// budget's limit that the owner's limit covers is admitted.
func (s suite) ownerLimits(t *testing.T) {
	ctx := context.Background()
	st := s.store(t)
	clock := NewClock(T0)
	units := quota.Budget{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}
	l, err := quota.New(st, "api", []quota.Budget{units}, quota.WithClock(clock.Now),
		quota.WithOwnerLimits(map[string]map[string]int64{"audited": {"units": 1000}, "token": {"units": 10}}))
	if err != nil {
		t.Fatal(err)
	}
	audited := quota.Credential{Secret: "AIzaSy-audited-0123456789", Label: "audited-key", Owner: "audited"}
	token := quota.Credential{Secret: "ghs-token-0123456789", Label: "token-key", Owner: "token"}
	plain := quota.Credential{Secret: "AIzaSy-plain-0123456789", Label: "plain-key", Owner: "plain"}
	for _, c := range []struct {
		cred  quota.Credential
		limit int64
		cost  int64 // taken, each refused once more
	}{{audited, 1000, 400}, {token, 10, 5}, {plain, 100, 50}} {
		used := int64(0)
		for range 2 {
			r := mustTake(t, l, c.cred, quota.Units("units", c.cost))
			used += c.cost
			if u := r.Usage[0]; u.Limit != c.limit || u.Used != used || u.Remaining != c.limit-used {
				t.Fatalf("%s: reservation usage %+v; want limit %d, used %d", c.cred.Owner, u, c.limit, used)
			}
		}
		// what is left plus one cannot be paid
		e := mustRefuse(t, l, c.cred, quota.Units("units", c.limit-used+1))
		if e.Limit != c.limit || e.Used != used {
			t.Fatalf("%s: refusal %+v; want limit %d, used %d", c.cred.Owner, e, c.limit, used)
		}
		us, err := l.Status(ctx, c.cred)
		if err != nil {
			t.Fatal(err)
		}
		if us[0].Limit != c.limit || us[0].Used != used {
			t.Fatalf("%s: status %+v; want limit %d, used %d", c.cred.Owner, us[0], c.limit, used)
		}
	}
	if _, err := l.Take(ctx, token, quota.Units("units", 11)); !errors.Is(err, quota.ErrCostExceedsLimit) {
		t.Fatalf("a cost over the token's limit (10): %v; want ErrCostExceedsLimit", err)
	}
	if _, err := l.Take(ctx, plain, quota.Units("units", 101)); !errors.Is(err, quota.ErrCostExceedsLimit) {
		t.Fatalf("a cost over the budget's limit (100) of an owner without one: %v; want ErrCostExceedsLimit", err)
	}
	// The next day each owner has its whole limit again.
	clock.Set(T0.Add(24 * time.Hour))
	mustTake(t, l, audited, quota.Units("units", 1000))
	mustTake(t, l, token, quota.Units("units", 10))
}

// SharedOwnerLimits checks that limits per owner recorded in the store (an
// operator's, SetOwnerLimit, and one learned from the upstream,
// LearnLimit) reach two limiters on stores a and b (handles on one shared
// store: other connections or clients, as other processes would hold):
// each decides with them after a reload, and refusals report them. The
// limiters reload on every call (WithOverrideRefresh(0)); the reload's
// schedule is the quota package's own test.
func SharedOwnerLimits(t *testing.T, a, b quota.Store) {
	t.Helper()
	ctx := context.Background()
	clock := NewClock(T0)
	units := quota.Budget{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}
	newLimiter := func(st quota.Store, opts ...quota.Option) *quota.Limiter {
		t.Helper()
		l, err := quota.New(st, "api", []quota.Budget{units}, append([]quota.Option{quota.WithClock(clock.Now), quota.WithOverrideRefresh(0)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	la, lb := newLimiter(a), newLimiter(b, quota.WithLearnedRaises())
	audited := quota.Credential{Secret: "AIzaSy-audited-0123456789", Owner: "audited"}
	token := quota.Credential{Secret: "ghs-token-0123456789", Owner: "token"}
	mustTake(t, la, audited, quota.Units("units", 1)) // records the budget in the catalog
	if err := quota.SetOwnerLimit(ctx, a, "api", "audited", "units", 1000, T0); err != nil {
		t.Fatal(err)
	}
	// the operator's limit, set through a, decides through b
	mustTake(t, lb, audited, quota.Units("units", 999))
	if e := mustRefuse(t, la, audited, quota.Units("units", 1)); e.Limit != 1000 || e.Used != 1000 {
		t.Fatalf("refusal past the operator's limit: %+v; want limit 1000, used 1000", e)
	}
	// learned through a (smaller: applied at once), applied through b
	if applied, err := la.LearnLimit(ctx, "token", "units", 7); err != nil || !applied {
		t.Fatalf("LearnLimit(7) = %v, %v; want applied", applied, err)
	}
	mustTake(t, lb, token, quota.Units("units", 7))
	if e := mustRefuse(t, la, token, quota.Units("units", 1)); e.Limit != 7 {
		t.Fatalf("refusal past the learned limit: %+v; want limit 7", e)
	}
	// a larger one learned through b: applied where the limiter opts in (b)
	// and only recorded where it does not (a)
	if applied, err := lb.LearnLimit(ctx, "token", "units", 500); err != nil || !applied {
		t.Fatalf("LearnLimit(500) with WithLearnedRaises = %v, %v; want applied", applied, err)
	}
	mustTake(t, lb, token, quota.Units("units", 93))
	if e := mustRefuse(t, la, token, quota.Units("units", 1)); e.Limit != 100 || e.Used != 100 {
		t.Fatalf("refusal where raises are not applied: %+v; want the budget's limit 100, used 100", e)
	}
	lf, err := la.LimitOf(ctx, "token", "units")
	if err != nil || lf.Limit != 100 || lf.Source != quota.SourceProgram || lf.Learned != 500 {
		t.Fatalf("LimitOf without raises = %+v, %v; want 100 from the program, 500 learned", lf, err)
	}
	// the operator removes the owners' limits through b: both go back to
	// the budget's limit
	for _, owner := range []string{"audited", "token"} {
		if removed, err := quota.RemoveOwnerLimit(ctx, b, "api", owner, "units"); err != nil || !removed {
			t.Fatalf("RemoveOwnerLimit(%s) = %v, %v", owner, removed, err)
		}
	}
	if e := mustRefuse(t, la, audited, quota.Units("units", 1)); e.Limit != 100 {
		t.Fatalf("after removal: %+v; want the budget's limit 100", e)
	}
	if lf, err := lb.LimitOf(ctx, "token", "units"); err != nil || lf.PerOwner || lf.Limit != 100 {
		t.Fatalf("LimitOf after removal = %+v, %v; want the budget's 100", lf, err)
	}
}
