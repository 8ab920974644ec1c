package quota_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
	"github.com/quotactl/quotactl/quota/storetest"
)

var ownerUnits = quota.Budget{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}

func ownerCred(owner string) quota.Credential {
	return quota.Credential{Secret: "secret-of-" + owner, Owner: owner}
}

func wantLimit(t *testing.T, l *quota.Limiter, owner string, limit int64, src quota.Source) quota.LimitInForce {
	t.Helper()
	lf, err := l.LimitOf(context.Background(), owner, "units")
	if err != nil {
		t.Fatal(err)
	}
	if lf.Limit != limit || lf.Source != src {
		t.Fatalf("LimitOf(%s) = %+v; want %d from %s", owner, lf, limit, src)
	}
	return lf
}

// TestOwnerLimitPrecedence: operator > learned (smaller, or larger with
// opt-in) > program per owner > the budget's limit, each step shown by
// LimitOf and obeyed by Take.
func TestOwnerLimitPrecedence(t *testing.T) {
	ctx := context.Background()
	st := quota.NewMemoryStore()
	clock := storetest.NewClock(storetest.T0)
	l, err := quota.New(st, "api", []quota.Budget{ownerUnits}, quota.WithClock(clock.Now), quota.WithOverrideRefresh(0),
		quota.WithOwnerLimits(map[string]map[string]int64{"big": {"units": 1000}}))
	if err != nil {
		t.Fatal(err)
	}
	big := ownerCred("big")
	wantLimit(t, l, "plain", 100, quota.SourceProgram)
	if lf := wantLimit(t, l, "big", 1000, quota.SourceProgram); !lf.PerOwner {
		t.Fatalf("program's owner limit not marked per owner: %+v", lf)
	}
	if _, err := l.Take(ctx, big, quota.Units("units", 500)); err != nil {
		t.Fatalf("500 of the owner's 1000 (over the budget's 100): %v", err)
	}
	// learned smaller: applies at once
	if applied, err := l.LearnLimit(ctx, "big", "units", 800); err != nil || !applied {
		t.Fatalf("LearnLimit(800) = %v, %v", applied, err)
	}
	wantLimit(t, l, "big", 800, quota.SourceUpstream)
	_, err = l.Take(ctx, big, quota.Units("units", 301))
	var ee *quota.ExhaustedError
	if !errors.As(err, &ee) || ee.Limit != 800 || ee.Used != 500 {
		t.Fatalf("301 more: %v; want refused at the learned 800", err)
	}
	// learned larger, no opt-in: recorded and shown, not applied
	if applied, err := l.LearnLimit(ctx, "big", "units", 2000); err != nil || applied {
		t.Fatalf("LearnLimit(2000) = %v, %v; want recorded, not applied", applied, err)
	}
	if lf := wantLimit(t, l, "big", 1000, quota.SourceProgram); lf.Learned != 2000 || lf.LearnedAt.IsZero() {
		t.Fatalf("the larger learned limit is not shown: %+v", lf)
	}
	// the operator's limit beats everything, lower or higher
	for _, n := range []int64{600, 5000} {
		if err := quota.SetOwnerLimit(ctx, st, "api", "big", "units", n, storetest.T0); err != nil {
			t.Fatal(err)
		}
		wantLimit(t, l, "big", n, quota.SourceOperator)
		us, err := l.Status(ctx, big)
		if err != nil || us[0].Limit != n {
			t.Fatalf("Status under the operator's %d: %+v, %v", n, us, err)
		}
	}
	if applied, err := l.LearnLimit(ctx, "big", "units", 10); err != nil || applied {
		t.Fatalf("LearnLimit(10) under an operator's limit = %v, %v; want not applied", applied, err)
	}
	wantLimit(t, l, "big", 5000, quota.SourceOperator)
	recs, err := quota.OwnerLimits(ctx, st, "api")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0].Source != quota.SourceOperator || recs[1].Source != quota.SourceUpstream || recs[1].Limit != 10 || recs[2].Source != quota.SourceProgram {
		t.Fatalf("OwnerLimits = %+v; want operator 5000, upstream 10, program 1000", recs)
	}
	// removing them all: the limiter's own program limit again
	if removed, err := quota.RemoveOwnerLimit(ctx, st, "api", "big", "units"); err != nil || !removed {
		t.Fatalf("RemoveOwnerLimit = %v, %v", removed, err)
	}
	wantLimit(t, l, "big", 1000, quota.SourceProgram)
	if removed, err := quota.RemoveOwnerLimit(ctx, st, "api", "big", "units"); err != nil || removed {
		t.Fatalf("RemoveOwnerLimit again = %v, %v; want nothing removed", removed, err)
	}
	// an operator's override of the budget is the base an owner without a
	// limit of its own has, and what a learned limit compares to
	if err := quota.SetOverride(ctx, st, "api", quota.Budget{Name: "units", Limit: 50, Window: quota.Daily(time.UTC)}, storetest.T0); err != nil {
		t.Fatal(err)
	}
	wantLimit(t, l, "plain", 50, quota.SourceOperator)
	if applied, err := l.LearnLimit(ctx, "plain", "units", 70); err != nil || applied {
		t.Fatalf("LearnLimit(70) over the override's 50 = %v, %v; want not applied", applied, err)
	}
	if applied, err := l.LearnLimit(ctx, "plain", "units", 40); err != nil || !applied {
		t.Fatalf("LearnLimit(40) under the override's 50 = %v, %v; want applied", applied, err)
	}
	wantLimit(t, l, "plain", 40, quota.SourceUpstream)
}

// TestLearnedLimitAppliesAtOnce: a smaller limit learned by a limiter that
// reloads hourly applies to its very next decision (no reload), and
// learning the same limit again writes nothing to the store.
func TestLearnedLimitAppliesAtOnce(t *testing.T) {
	ctx := context.Background()
	st := &countingState{MemoryStore: quota.NewMemoryStore()}
	l, err := quota.New(st, "api", []quota.Budget{ownerUnits}, quota.WithOverrideRefresh(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cred := ownerCred("proj")
	if _, err := l.Take(ctx, cred, quota.Units("units", 9)); err != nil {
		t.Fatal(err)
	}
	if applied, err := l.LearnLimit(ctx, "proj", "units", 10); err != nil || !applied {
		t.Fatalf("LearnLimit = %v, %v", applied, err)
	}
	if _, err := l.Take(ctx, cred, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	_, err = l.Take(ctx, cred, quota.Units("units", 1))
	var ee *quota.ExhaustedError
	if !errors.As(err, &ee) || ee.Limit != 10 {
		t.Fatalf("11th unit: %v; want refused at the learned limit 10", err)
	}
	writes := st.saves()
	for range 5 {
		if applied, err := l.LearnLimit(ctx, "proj", "units", 10); err != nil || !applied {
			t.Fatalf("LearnLimit again = %v, %v", applied, err)
		}
	}
	if got := st.saves(); got != writes {
		t.Fatalf("learning the recorded limit again wrote %d times", got-writes)
	}
}

// countingState counts the state writes of a memory store.
type countingState struct {
	*quota.MemoryStore
	mu sync.Mutex
	n  int
}

func (c *countingState) SaveStateFenced(ctx context.Context, key string, value []byte, token int64) error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.MemoryStore.SaveStateFenced(ctx, key, value, token)
}

func (c *countingState) saves() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestOwnerLimitsReachOtherProcessWithinRefresh: two limiters on two
// stores on one SQLite file (two processes), each reloading every
// DefaultOverrideRefresh. An operator's limit set through a third handle,
// and a smaller limit the first limiter learns, decide in the second
// within a second, and not before it reloads; a larger learned one applies
// only in the limiter that opts in.
func TestOwnerLimitsReachOtherProcessWithinRefresh(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quota.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		open := func() *sqlitestore.Store {
			st, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		sa, sb, sop := open(), open(), open()
		defer func() { _, _, _ = sa.Close(), sb.Close(), sop.Close() }()
		la, err := quota.New(sa, "api", []quota.Budget{ownerUnits})
		if err != nil {
			t.Fatal(err)
		}
		lb, err := quota.New(sb, "api", []quota.Budget{ownerUnits}, quota.WithLearnedRaises())
		if err != nil {
			t.Fatal(err)
		}
		audited, token := ownerCred("audited"), ownerCred("token")
		for _, l := range []*quota.Limiter{la, lb} {
			if _, err := l.Take(ctx, token, quota.Units("units", 1)); err != nil {
				t.Fatal(err) // loads the limits, records the budget
			}
		}
		if err := quota.SetOwnerLimit(ctx, sop, "api", "audited", "units", 1000, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := lb.Take(ctx, audited, quota.Units("units", 500)); !errors.Is(err, quota.ErrCostExceedsLimit) {
			t.Fatalf("before b reloads: %v; want the budget's limit (ErrCostExceedsLimit)", err)
		}
		if applied, err := la.LearnLimit(ctx, "token", "units", 3); err != nil || !applied {
			t.Fatalf("LearnLimit(3) = %v, %v", applied, err)
		}
		<-time.After(quota.DefaultOverrideRefresh) // synctest: the bubble's clock moves, no real wait
		if _, err := lb.Take(ctx, audited, quota.Units("units", 500)); err != nil {
			t.Fatalf("after a refresh, the operator's 1000: %v", err)
		}
		n := 0
		for range 5 {
			if _, err := lb.Take(ctx, token, quota.Units("units", 1)); err == nil {
				n++
			}
		}
		if n != 1 { // 2 taken before (one by each), learned limit 3
			t.Fatalf("b admitted %d more of token's units; want 1 under the learned 3", n)
		}
		// larger: b opts in, a does not
		if applied, err := lb.LearnLimit(ctx, "token", "units", 400); err != nil || !applied {
			t.Fatalf("LearnLimit(400) on b = %v, %v", applied, err)
		}
		<-time.After(quota.DefaultOverrideRefresh)
		wantLimit(t, la, "token", 100, quota.SourceProgram)
		wantLimit(t, lb, "token", 400, quota.SourceUpstream)
		if _, err := la.Take(ctx, token, quota.Units("units", 200)); !errors.Is(err, quota.ErrCostExceedsLimit) {
			t.Fatalf("a, no raises: %v; want ErrCostExceedsLimit under 100", err)
		}
		if _, err := lb.Take(ctx, token, quota.Units("units", 200)); err != nil {
			t.Fatalf("b, raises: %v", err)
		}
	})
}

// TestOwnerLimitsWithLeases: a budget lease is bounded by the owner's
// limit: an owner with a larger limit spends past the budget's through
// leases, one with a smaller one stops at its own.
func TestOwnerLimitsWithLeases(t *testing.T) {
	ctx := context.Background()
	st := quota.NewMemoryStore()
	clock := storetest.NewClock(storetest.T0)
	l, err := quota.New(st, "api", []quota.Budget{ownerUnits}, quota.WithClock(clock.Now),
		quota.WithLeases(quota.LeaseOptions{MaxTime: time.Second}),
		quota.WithOwnerLimits(map[string]map[string]int64{"big": {"units": 1000}, "small": {"units": 20}}))
	if err != nil {
		t.Fatal(err)
	}
	count := func(cred quota.Credential) (int64, *quota.ExhaustedError) {
		var n int64
		for range 2000 {
			_, err := l.Take(ctx, cred, quota.Units("units", 1))
			var ee *quota.ExhaustedError
			if errors.As(err, &ee) {
				return n, ee
			}
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n, nil
	}
	for _, c := range []struct {
		owner string
		limit int64
	}{{"big", 1000}, {"small", 20}, {"plain", 100}} {
		n, ee := count(ownerCred(c.owner))
		if n != c.limit || ee == nil || ee.Limit != c.limit {
			t.Fatalf("%s: admitted %d through leases, refusal %+v; want %d", c.owner, n, ee, c.limit)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestOwnerLimitThresholdsAndAdjust: threshold crossings are of the
// owner's limit, Adjust accepts usage up to it, and Refund's event names
// it.
func TestOwnerLimitThresholdsAndAdjust(t *testing.T) {
	ctx := context.Background()
	st := quota.NewMemoryStore()
	clock := storetest.NewClock(storetest.T0)
	var mu sync.Mutex
	var events []quota.Event
	obs := quota.ObserverFunc(func(e quota.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	})
	l, err := quota.New(st, "api", []quota.Budget{ownerUnits}, quota.WithClock(clock.Now), quota.WithObserver(obs), quota.WithThresholds(50),
		quota.WithOwnerLimits(map[string]map[string]int64{"big": {"units": 1000}}))
	if err != nil {
		t.Fatal(err)
	}
	big := ownerCred("big")
	r, err := l.Take(ctx, big, quota.Units("units", 400))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Kind == quota.EventThreshold {
			t.Fatalf("400 of the owner's 1000 crossed a threshold: %+v", e)
		}
	}
	if _, err := l.Take(ctx, big, quota.Units("units", 100)); err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var crossed, refunded bool
	for _, e := range events {
		switch e.Kind {
		case quota.EventThreshold:
			crossed = e.Percent == 50 && e.Usage[0].Limit == 1000
		case quota.EventRefund:
			refunded = e.Usage[0].Limit == 1000
		case quota.EventDecision:
			if e.Usage[0].Limit != 1000 {
				t.Fatalf("decision event with limit %d; want the owner's 1000", e.Usage[0].Limit)
			}
		}
	}
	if !crossed || !refunded {
		t.Fatalf("events %+v; want a 50%% crossing and a refund of the owner's 1000", events)
	}
	if err := l.Adjust(ctx, big, "units", 900); err != nil {
		t.Fatalf("Adjust to 900 under the owner's 1000: %v", err)
	}
	if err := l.Adjust(ctx, big, "units", 1001); !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), "1000") {
		t.Fatalf("Adjust past the owner's limit: %v; want ErrInvalid naming 1000", err)
	}
}

// TestOwnerLimitBadInput: bad limits, owners and budgets are clear errors.
func TestOwnerLimitBadInput(t *testing.T) {
	ctx := context.Background()
	st := quota.NewMemoryStore()
	newWith := func(m map[string]map[string]int64) error {
		_, err := quota.New(st, "api", []quota.Budget{ownerUnits}, quota.WithOwnerLimits(m))
		return err
	}
	for _, c := range []struct {
		m    map[string]map[string]int64
		want string
	}{
		{map[string]map[string]int64{"p": {"units": -1}}, "limit -1"},
		{map[string]map[string]int64{"p": {"units": 0}}, "limit 0"},
		{map[string]map[string]int64{"p": {"units": quota.MaxLimit + 1}}, "must be between 1 and"},
		{map[string]map[string]int64{"p": {"nope": 5}}, `unknown budget "nope"`},
		{map[string]map[string]int64{"bad owner": {"units": 5}}, "owner name"},
	} {
		err := newWith(c.m)
		if !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WithOwnerLimits(%v): %v; want ErrInvalid mentioning %q", c.m, err, c.want)
		}
	}
	l, err := quota.New(st, "api", []quota.Budget{ownerUnits})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx, ownerCred("p"), quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		owner, budget string
		limit         int64
		want          string
	}{
		{"p", "units", -5, "limit -5"},
		{"p", "units", quota.MaxLimit + 1, "must be between 1 and"},
		{"p", "nope", 5, `unknown budget "nope"`},
		{"", "units", 5, "empty owner name"},
	} {
		if _, err := l.LearnLimit(ctx, c.owner, c.budget, c.limit); !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LearnLimit(%q, %q, %d): %v; want ErrInvalid mentioning %q", c.owner, c.budget, c.limit, err, c.want)
		}
		if c.budget == "nope" {
			continue
		}
		if err := quota.SetOwnerLimit(ctx, st, "api", c.owner, c.budget, c.limit, storetest.T0); !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SetOwnerLimit(%q, %q, %d): %v; want ErrInvalid mentioning %q", c.owner, c.budget, c.limit, err, c.want)
		}
	}
	if err := quota.SetOwnerLimit(ctx, st, "api", "p", "nope", 5, storetest.T0); !errors.Is(err, quota.ErrNotFound) || !strings.Contains(err.Error(), "api/nope") {
		t.Errorf("SetOwnerLimit of an unknown budget: %v; want ErrNotFound naming api/nope", err)
	}
	if _, err := l.LimitOf(ctx, "p", "nope"); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("LimitOf an unknown budget: %v", err)
	}
}

// TestProgramOwnerLimitsRecorded: a program's limits per owner are
// recorded in the store on first use, and a limiter made from the store's
// definitions alone (as quotactl's) applies and names them.
func TestProgramOwnerLimitsRecorded(t *testing.T) {
	ctx := context.Background()
	st := quota.NewMemoryStore()
	l, err := quota.New(st, "api", []quota.Budget{ownerUnits}, quota.WithOwnerLimits(map[string]map[string]int64{"big": {"units": 1000}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx, ownerCred("big"), quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	recs, err := quota.OwnerLimits(ctx, st, "api")
	if err != nil || len(recs) != 1 || recs[0] != (quota.OwnerLimit{Owner: "big", Budget: "units", Limit: 1000, Source: quota.SourceProgram, At: recs[0].At}) {
		t.Fatalf("OwnerLimits = %+v, %v", recs, err)
	}
	cli, err := quota.Load(ctx, st, "api")
	if err != nil {
		t.Fatal(err)
	}
	us, err := cli.StatusOf(ctx, "big")
	if err != nil || us[0].Limit != 1000 || us[0].Used != 1 {
		t.Fatalf("StatusOf from the store's definitions: %+v, %v; want limit 1000", us, err)
	}
	wantLimit(t, cli, "big", 1000, quota.SourceProgram)
}

// FuzzOwnerLimitsState: whatever the store holds under an API's owner
// limits (a value another version wrote, or damaged), reading it never
// panics: OwnerLimits returns valid records or an error naming ErrInvalid,
// and a limiter decides with the valid ones or the budget's limit.
func FuzzOwnerLimitsState(f *testing.F) {
	f.Add([]byte(`{"operator":{"p":{"units":{"limit":5,"at":"2026-11-22T10:00:00Z"}}}}`))
	f.Add([]byte(`{"upstream":{"p":{"units":{"limit":-1}}}}`))
	f.Add([]byte(`{"program":{"bad owner":{"units":{"limit":5}}}}`))
	f.Add([]byte(`{"operator":{"p":{"nope":{"limit":9007199254740993}}}}`))
	f.Add([]byte(`{"operator":null,"upstream":{"p":null}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		st := quota.NewMemoryStore()
		if err := st.SaveState(ctx, "quota/owner-limits/api", data); err != nil {
			t.Fatal(err)
		}
		recs, err := quota.OwnerLimits(ctx, st, "api")
		if err != nil && !errors.Is(err, quota.ErrInvalid) {
			t.Fatalf("OwnerLimits: %v; want nil or ErrInvalid", err)
		}
		for _, r := range recs {
			if r.Limit <= 0 || r.Limit > quota.MaxLimit || r.Owner == "" || r.Budget == "" {
				t.Fatalf("invalid record read: %+v", r)
			}
		}
		l, err := quota.New(st, "api", []quota.Budget{ownerUnits}, quota.WithOverrideRefresh(0), quota.WithFingerprintKey([]byte("fuzz")))
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Take(ctx, ownerCred("p"), quota.Units("units", 1))
		if err != nil && !errors.Is(err, quota.ErrCostExceedsLimit) {
			t.Fatalf("Take: %v", err)
		}
		if err == nil && res.Usage[0].Limit <= 0 {
			t.Fatalf("limit %d in force", res.Usage[0].Limit)
		}
	})
}
