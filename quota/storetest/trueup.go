package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// The TrueUp suites (backend.TrueUpper, which every store must implement):
// a store counts what the upstream reports spent beyond its own count
// until the upstream's reset, in one entry that may be stamped before
// newer ones.

const tuOwner, tuAPI = "trueup-owner", "api"

// trueUpper returns st's TrueUpper, failing the test when it has none.
func trueUpper(t *testing.T, st quota.Store) backend.TrueUpper {
	t.Helper()
	tu, ok := st.(backend.TrueUpper)
	if !ok {
		t.Fatalf("%T does not implement backend.TrueUpper", st)
	}
	return tu
}

// trueUp runs one true-up and fails the test on an error.
func trueUp(t *testing.T, tu backend.TrueUpper, req backend.TrueUpRequest) *backend.TrueUpResult {
	t.Helper()
	if req.API == "" {
		req.API = tuAPI
	}
	if req.Owner == "" {
		req.Owner = tuOwner
	}
	res, err := tu.TrueUp(context.Background(), &req)
	if err != nil {
		t.Fatalf("TrueUp(used %d of %s, until %v, at %v): %v", req.Used, req.Budget.Name, req.Until, req.Now, err)
	}
	return res
}

// storeTake takes cost units of b at now for owner, directly on the store.
func storeTake(t *testing.T, st quota.Store, owner string, b quota.Budget, cost int64, nonce string, now time.Time, hold time.Duration) *backend.TakeResult {
	t.Helper()
	res, err := st.Take(context.Background(), &backend.TakeRequest{API: tuAPI, Owner: owner, Nonce: nonce, Now: now,
		Debits: []backend.Debit{{Budget: b, Cost: cost}}, Hold: hold})
	if err != nil {
		t.Fatalf("Take(%d of %s) at %v: %v", cost, b.Name, now, err)
	}
	return res
}

// storeUsed returns what b counts for owner at now.
func storeUsed(t *testing.T, st quota.Store, owner string, b quota.Budget, now time.Time) backend.Usage {
	t.Helper()
	us, err := st.Usage(context.Background(), &backend.UsageRequest{API: tuAPI, Owner: owner, Budgets: []quota.Budget{b}, Now: now})
	if err != nil || len(us) != 1 {
		t.Fatalf("Usage(%s) at %v = %v, %v", b.Name, now, us, err)
	}
	return us[0]
}

// checkTrueUp fails the test unless res counted and added what is wanted.
func checkTrueUp(t *testing.T, what string, res *backend.TrueUpResult, counted, added, used int64) {
	t.Helper()
	if res.Counted != counted || res.Added != added || res.Usage.Used != used {
		t.Fatalf("%s: TrueUp counted %d, added %d, used after %d; want %d, %d, %d",
			what, res.Counted, res.Added, res.Usage.Used, counted, added, used)
	}
}

// trueUpAdds: a true-up adds the difference when the upstream counts more,
// in one entry stamped so that it expires at Until; nothing when it counts
// less or the same, when the reports come out of order, or when Until is
// zero or past. An exhaustion mark stays.
func (s suite) trueUpAdds(t *testing.T) {
	st := s.store(t)
	tu := trueUpper(t, st)
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	storeTake(t, st, tuOwner, b, 10, "t1", T0, 0)
	now, until := T0.Add(time.Minute), T0.Add(30*time.Minute)
	res := trueUp(t, tu, backend.TrueUpRequest{Budget: b, Used: 30, Until: until, Nonce: "u1", Now: now})
	checkTrueUp(t, "upstream counts 30 of our 10", res, 10, 20, 30)
	if !res.At.Equal(now) || !res.Usage.Reset.Equal(until) {
		t.Fatalf("TrueUp At %v, Reset %v; want %v and %v (the true-up entry, stamped %v, expires first)", res.At, res.Usage.Reset, now, until, until.Add(-time.Hour))
	}
	es, err := st.Entries(context.Background(), &backend.EntriesRequest{API: tuAPI, Owner: tuOwner, Budget: b, Now: now})
	if err != nil || len(es) != 2 || !es[0].At.Equal(until.Add(-time.Hour)) || es[0].Cost != 20 || es[0].Nonce != "u1" {
		t.Fatalf("Entries = %+v, %v; want the true-up's 20 at %v (Until less the window) first", es, err, until.Add(-time.Hour))
	}
	for _, c := range []struct {
		what  string
		used  int64
		until time.Time
	}{
		{"the same count", 30, until},
		{"an older report counting less (out of order)", 25, until},
		{"a report of nothing", 0, until},
		{"a zero Until", 90, time.Time{}},
		{"Until now", 90, now},
		{"Until past", 90, now.Add(-time.Second)},
	} {
		res := trueUp(t, tu, backend.TrueUpRequest{Budget: b, Used: c.used, Until: c.until, Nonce: "n" + fmt.Sprint(c.used), Now: now})
		checkTrueUp(t, c.what, res, 30, 0, 30)
	}
	// exhausted: the mark stays, the units still count
	mark := now.Add(2 * time.Hour)
	if err := st.Exhaust(context.Background(), &backend.ExhaustRequest{API: tuAPI, Owner: tuOwner, Budget: b, Until: mark, Now: now}); err != nil {
		t.Fatal(err)
	}
	res = trueUp(t, tu, backend.TrueUpRequest{Budget: b, Used: 40, Until: until, Nonce: "u2", Now: now})
	checkTrueUp(t, "while exhausted", res, 30, 10, 40)
	if u := storeUsed(t, st, tuOwner, b, now); !u.ExhaustedUntil.Equal(mark) || u.Used != 40 {
		t.Fatalf("after a true-up of an exhausted budget: %+v; want used 40, exhausted until %v", u, mark)
	}
}

// trueUpExpiry: a sliding true-up entry counts until Until exactly (one µs
// before, not at), and no longer than one window from now when Until is
// further; a daily one counts until the day's reset.
func (s suite) trueUpExpiry(t *testing.T) {
	st := s.store(t)
	tu := trueUpper(t, st)
	b := quota.Budget{Name: "units", Limit: 1000, Window: quota.Sliding(time.Hour)}
	now, until := T0, T0.Add(17*time.Minute+3*time.Microsecond)
	trueUp(t, tu, backend.TrueUpRequest{Budget: b, Used: 50, Until: until, Nonce: "s1", Now: now})
	if u := storeUsed(t, st, tuOwner, b, until.Add(-time.Microsecond)); u.Used != 50 || !u.Reset.Equal(until) {
		t.Fatalf("a µs before Until: %+v; want used 50, reset at %v", u, until)
	}
	if u := storeUsed(t, st, tuOwner, b, until); u.Used != 0 {
		t.Fatalf("at Until: used %d; want 0", u.Used)
	}
	// Until past a window from now: counts one window from now
	far := quota.Budget{Name: "far", Limit: 1000, Window: quota.Sliding(time.Hour)}
	trueUp(t, tu, backend.TrueUpRequest{Budget: far, Used: 7, Until: now.Add(5 * time.Hour), Nonce: "f1", Now: now})
	if u := storeUsed(t, st, tuOwner, far, now.Add(time.Hour-time.Microsecond)); u.Used != 7 {
		t.Fatalf("far Until, a µs before now+window: used %d; want 7", u.Used)
	}
	if u := storeUsed(t, st, tuOwner, far, now.Add(time.Hour)); u.Used != 0 {
		t.Fatalf("far Until, at now+window: used %d; want 0", u.Used)
	}
	// daily: until midnight, whatever Until says
	day := quota.Budget{Name: "day", Limit: 1000, Window: quota.Daily(time.UTC)}
	midnight := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	res := trueUp(t, tu, backend.TrueUpRequest{Budget: day, Used: 60, Until: midnight, Nonce: "d1", Now: now})
	checkTrueUp(t, "daily", res, 0, 60, 60)
	if !res.Usage.Reset.Equal(midnight) {
		t.Fatalf("daily true-up: reset %v; want %v", res.Usage.Reset, midnight)
	}
	if u := storeUsed(t, st, tuOwner, day, midnight.Add(-time.Microsecond)); u.Used != 60 {
		t.Fatalf("daily, a µs before midnight: used %d; want 60", u.Used)
	}
	if u := storeUsed(t, st, tuOwner, day, midnight); u.Used != 0 {
		t.Fatalf("daily, at midnight: used %d; want 0", u.Used)
	}
	res = trueUp(t, tu, backend.TrueUpRequest{Budget: day, Used: 10, Until: now.Add(time.Hour), Nonce: "d2", Now: midnight.Add(time.Hour)})
	checkTrueUp(t, "daily, the next day", res, 0, 0, 0)
	// monthly: until the 1st's midnight, whatever Until says
	month := quota.Budget{Name: "month", Limit: 1000, Window: quota.Monthly(time.UTC)}
	first := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	res = trueUp(t, tu, backend.TrueUpRequest{Budget: month, Used: 70, Until: now.Add(time.Hour), Nonce: "m1", Now: now})
	checkTrueUp(t, "monthly", res, 0, 70, 70)
	if !res.Usage.Reset.Equal(first) {
		t.Fatalf("monthly true-up: reset %v; want %v", res.Usage.Reset, first)
	}
	if u := storeUsed(t, st, tuOwner, month, first.Add(-time.Microsecond)); u.Used != 70 {
		t.Fatalf("monthly, a µs before the 1st: used %d; want 70", u.Used)
	}
	if u := storeUsed(t, st, tuOwner, month, first); u.Used != 0 {
		t.Fatalf("monthly, at the 1st: used %d; want 0", u.Used)
	}
	// the month's entry is kept MonthlyKeep after its instant: a sliding
	// window of 30 days set in the next month counts it again
	res = trueUp(t, tu, backend.TrueUpRequest{Budget: month, Used: 5, Until: first.Add(48 * time.Hour), Nonce: "m2", Now: first.Add(time.Hour)})
	checkTrueUp(t, "monthly, the next month", res, 0, 5, 5)
	slid := quota.Budget{Name: "month", Limit: 1000, Window: quota.Sliding(30 * 24 * time.Hour)}
	if u := storeUsed(t, st, tuOwner, slid, first.Add(2*time.Hour)); u.Used != 75 {
		t.Fatalf("monthly redefined as 30 days in the next month: used %d; want 75 (the set-aside 70 and 5)", u.Used)
	}
}

// trueUpRefuses: a take the true-up makes unpayable is refused with
// RetryAt exactly when enough units free: at Until when the true-up's
// entry, stamped before the newer ones, is what refuses it; and admitted
// at Until.
func (s suite) trueUpRefuses(t *testing.T) {
	st := s.store(t)
	tu := trueUpper(t, st)
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	storeTake(t, st, tuOwner, b, 60, "t1", T0, 0)
	until := T0.Add(20 * time.Minute)
	res := trueUp(t, tu, backend.TrueUpRequest{Budget: b, Used: 100, Until: until, Nonce: "u1", Now: T0.Add(time.Minute)})
	checkTrueUp(t, "to the limit", res, 60, 40, 100)
	r := storeTake(t, st, tuOwner, b, 30, "t2", T0.Add(2*time.Minute), 0)
	if r.OK || !r.Usage[0].RetryAt.Equal(until) {
		t.Fatalf("Take of 30 after the true-up = OK %v, %+v; want refused with RetryAt %v", r.OK, r.Usage[0], until)
	}
	if r := storeTake(t, st, tuOwner, b, 41, "t3", until, 0); r.OK || !r.Usage[0].RetryAt.Equal(T0.Add(time.Hour)) {
		t.Fatalf("Take of 41 at Until = OK %v, %+v; want refused until the take of 60 expires at %v", r.OK, r.Usage[0], T0.Add(time.Hour))
	}
	if r := storeTake(t, st, tuOwner, b, 40, "t4", until, 0); !r.OK || r.Usage[0].Used != 100 {
		t.Fatalf("Take of 40 at Until = OK %v, %+v; want admitted, used 100", r.OK, r.Usage[0])
	}
	// daily: refused until midnight
	day := quota.Budget{Name: "day", Limit: 10, Window: quota.Daily(time.UTC)}
	trueUp(t, tu, backend.TrueUpRequest{Budget: day, Used: 10, Until: T0.Add(time.Hour), Nonce: "d1", Now: T0})
	midnight := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	if r := storeTake(t, st, tuOwner, day, 1, "d2", T0.Add(time.Minute), 0); r.OK || !r.Usage[0].RetryAt.Equal(midnight) {
		t.Fatalf("daily Take after a true-up to the limit = OK %v, %+v; want refused until %v", r.OK, r.Usage[0], midnight)
	}
}

// trueUpIndependent: a true-up of one budget of one owner changes no other
// budget or owner, and shows in Breakdown under UnmeteredMethod, in the
// hour of now; it moves the owner's change version when it adds, and
// only then.
func (s suite) trueUpIndependent(t *testing.T) {
	ctx := context.Background()
	st := s.store(t)
	tu := trueUpper(t, st)
	a := quota.Budget{Name: "a", Limit: 100, Window: quota.Sliding(time.Hour)}
	bb := quota.Budget{Name: "b", Limit: 100, Window: quota.Daily(time.UTC)}
	storeTake(t, st, tuOwner, a, 5, "t1", T0, 0)
	storeTake(t, st, "other-owner", a, 6, "t2", T0, 0)
	cv, _ := st.(backend.ChangeVersioner)
	version := func() int64 {
		if cv == nil {
			return 0
		}
		v, err := cv.ChangeVersion(ctx, tuAPI, tuOwner)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v0 := version()
	now := T0.Add(90 * time.Minute) // another hour than the take's
	trueUp(t, tu, backend.TrueUpRequest{Budget: a, Used: 0, Until: now.Add(time.Minute), Nonce: "same", Now: now})
	if cv != nil && version() != v0 {
		t.Fatalf("a true-up that added nothing moved the change version")
	}
	res := trueUp(t, tu, backend.TrueUpRequest{Budget: a, Used: 25, Until: now.Add(10 * time.Minute), Nonce: "u1", Now: now})
	checkTrueUp(t, "budget a", res, 0, 25, 25) // the take at T0 expired at T0+1h
	if cv != nil && version() == v0 {
		t.Fatalf("a true-up that added units left the change version at %d", v0)
	}
	if u := storeUsed(t, st, tuOwner, bb, now); u.Used != 0 {
		t.Fatalf("another budget: used %d; want 0", u.Used)
	}
	if u := storeUsed(t, st, "other-owner", a, T0.Add(time.Minute)); u.Used != 6 {
		t.Fatalf("another owner: used %d; want its own 6", u.Used)
	}
	if u := storeUsed(t, st, "other-owner", a, now); u.Used != 0 {
		t.Fatalf("another owner after the true-up: used %d; want 0", u.Used)
	}
	rows, err := st.Breakdown(ctx, &backend.BreakdownRequest{API: tuAPI, Owner: tuOwner, Since: T0, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.BreakdownRow{
		{Hour: backend.HourOf(T0), Budget: "a", Method: "", Units: 5},
		{Hour: backend.HourOf(now), Budget: "a", Method: backend.UnmeteredMethod, Units: 25},
	}
	if fmt.Sprint(normRows(rows)) != fmt.Sprint(want) {
		t.Fatalf("Breakdown = %+v; want %+v", rows, want)
	}
}

// normRows returns rows with their hours in UTC, for comparison.
func normRows(rows []backend.BreakdownRow) []backend.BreakdownRow {
	out := make([]backend.BreakdownRow, len(rows))
	for i, r := range rows {
		r.Hour = r.Hour.UTC()
		out[i] = r
	}
	return out
}

// trueUpLower: with Lower, the entries stamped before Since that are not
// held are replaced by one of Used when they hold more; held entries and
// those since Since stay. Without Lower, or when they hold no more,
// nothing changes.
func (s suite) trueUpLower(t *testing.T) {
	ctx := context.Background()
	st := s.store(t)
	tu := trueUpper(t, st)
	b := quota.Budget{Name: "units", Limit: 1000, Window: quota.Sliding(time.Hour)}
	storeTake(t, st, tuOwner, b, 10, "old", T0, 0)
	storeTake(t, st, tuOwner, b, 20, "block", T0, time.Minute) // held at T0+1m
	storeTake(t, st, tuOwner, b, 5, "new", T0.Add(10*time.Minute), 0)
	now, since, until := T0.Add(10*time.Minute+time.Second), T0.Add(5*time.Minute), T0.Add(30*time.Minute)
	req := backend.TrueUpRequest{Budget: b, Used: 3, Until: until, Nonce: "low", Now: now, Since: since}
	checkTrueUp(t, "less, without Lower", trueUp(t, tu, req), 35, 0, 35)
	req.Lower, req.Used = true, 10
	checkTrueUp(t, "Lower, as much as before Since", trueUp(t, tu, req), 35, 0, 35)
	cv, _ := st.(backend.ChangeVersioner)
	var v0 int64
	if cv != nil {
		v0, _ = cv.ChangeVersion(ctx, tuAPI, tuOwner)
	}
	req.Used = 3
	checkTrueUp(t, "Lower", trueUp(t, tu, req), 35, -7, 28)
	if cv != nil {
		if v, _ := cv.ChangeVersion(ctx, tuAPI, tuOwner); v == v0 {
			t.Fatalf("a lowering true-up left the change version at %d", v)
		}
	}
	es, err := st.Entries(ctx, &backend.EntriesRequest{API: tuAPI, Owner: tuOwner, Budget: b, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, fmt.Sprintf("%s:%d@%v", e.Nonce, e.Cost, e.At.Sub(T0)))
	}
	// the new entry of 3 is stamped at Until less the window: T0-30m
	if want := "low:3@-30m0s block:20@1m0s new:5@10m0s"; strings.Join(got, " ") != want {
		t.Fatalf("after lowering, entries %v; want %s", got, want)
	}
	rows, err := st.Breakdown(ctx, &backend.BreakdownRequest{API: tuAPI, Owner: tuOwner, Since: T0, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var unmetered int64
	for _, r := range rows {
		if r.Method == backend.UnmeteredMethod {
			unmetered += r.Units
		}
	}
	if unmetered != -7 {
		t.Fatalf("Breakdown = %+v; want the lowering's -7 under %q", rows, backend.UnmeteredMethod)
	}
	req.Used, req.Nonce = 0, "low2"
	checkTrueUp(t, "Lower to 0", trueUp(t, tu, req), 28, -3, 25)
	if u := storeUsed(t, st, tuOwner, b, now); u.Used != 25 {
		t.Fatalf("after lowering to 0: used %d; want the held 20 and the new 5", u.Used)
	}
}

// trueUpBadInput: invalid requests are errors wrapping ErrInvalid that
// name what is wrong; nothing is recorded.
func (s suite) trueUpBadInput(t *testing.T) {
	st := s.store(t)
	tu := trueUpper(t, st)
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	ok := backend.TrueUpRequest{API: tuAPI, Owner: tuOwner, Budget: b, Used: 5, Until: T0.Add(time.Minute), Nonce: "n", Now: T0}
	for _, c := range []struct {
		want string
		edit func(r *backend.TrueUpRequest)
	}{
		{"used -1", func(r *backend.TrueUpRequest) { r.Used = -1 }},
		{"nonce", func(r *backend.TrueUpRequest) { r.Nonce = "" }},
		{"limit", func(r *backend.TrueUpRequest) { r.Budget.Limit = 0 }},
		{"budget", func(r *backend.TrueUpRequest) { r.Budget.Name = "" }},
		{"window", func(r *backend.TrueUpRequest) { r.Budget.Window = quota.Window{} }},
		{"owner", func(r *backend.TrueUpRequest) { r.Owner = "" }},
		{"add and lower", func(r *backend.TrueUpRequest) { r.Add, r.Lower = true, true }},
		{"method or job", func(r *backend.TrueUpRequest) { r.Method = "m" }},
	} {
		req := ok
		c.edit(&req)
		res, err := tu.TrueUp(context.Background(), &req)
		if !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("TrueUp with bad %s = %+v, %v; want an error wrapping ErrInvalid naming %q", c.want, res, err, c.want)
		}
	}
	if _, err := tu.TrueUp(context.Background(), nil); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("TrueUp(nil) = %v; want ErrInvalid", err)
	}
	if u := storeUsed(t, st, tuOwner, b, T0); u.Used != 0 {
		t.Fatalf("after bad true-ups: used %d; want 0", u.Used)
	}
}

// trueUpConcurrent: true-ups and takes from many goroutines at one instant
// never lose a unit: the count is what the takes admitted plus what the
// true-ups added, each true-up added exactly what brought the count it
// saw to its Used, and the count is at least the largest Used.
func (s suite) trueUpConcurrent(t *testing.T) {
	TrueUpRace(t, []quota.Store{s.store(t)}, 8, 40)
}

// TrueUpRace runs workers goroutines over the stores (handles of one
// store, as processes sharing it have; used in turn), each making rounds
// of takes and true-ups of one budget at one instant, and checks that no
// unit is lost: the count is what the takes admitted plus what the
// true-ups added, and at least the largest Used a true-up reported.
func TrueUpRace(t *testing.T, stores []quota.Store, workers, rounds int) {
	for _, st := range stores {
		trueUpper(t, st)
	}
	b := quota.Budget{Name: "race", Limit: 1_000_000, Window: quota.Sliding(time.Hour)}
	now, until := T0, T0.Add(30*time.Minute)
	var mu sync.Mutex
	var admitted, added, top int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := stores[g%len(stores)]
			tu := st.(backend.TrueUpper)
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range rounds {
				nonce := fmt.Sprintf("g%d-%d", g, i)
				if g%2 == 1 {
					used := int64(rng.IntN(40 * rounds * workers))
					res, err := tu.TrueUp(context.Background(), &backend.TrueUpRequest{API: tuAPI, Owner: tuOwner, Budget: b,
						Used: used, Until: until, Nonce: nonce, Now: now})
					if err == nil && res.Added != max(0, used-res.Counted) {
						err = fmt.Errorf("true-up to %d counted %d and added %d", used, res.Counted, res.Added)
					}
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					added, top = added+res.Added, max(top, used)
					mu.Unlock()
					continue
				}
				cost := int64(1 + rng.IntN(30))
				res, err := st.Take(context.Background(), &backend.TakeRequest{API: tuAPI, Owner: tuOwner, Nonce: nonce, Now: now,
					Debits: []backend.Debit{{Budget: b, Cost: cost}}})
				if err != nil {
					errs <- err
					return
				}
				if res.OK {
					mu.Lock()
					admitted += cost
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	u := storeUsed(t, stores[0], tuOwner, b, now)
	if u.Used != admitted+added || u.Used < top {
		t.Fatalf("after the race: used %d; want admitted %d + added %d = %d, and at least the largest Used %d",
			u.Used, admitted, added, admitted+added, top)
	}
	if added == 0 || admitted == 0 {
		t.Fatalf("the race added %d and admitted %d: it tested nothing", added, admitted)
	}
}

// TrueUpShared checks a true-up through one handle of a store against
// another handle of it (what another process has, with its own client or
// connection): the other's Take is refused with RetryAt at the upstream's
// reset, its Usage counts the units, and true-ups and takes racing through
// both never lose a unit.
func TrueUpShared(t *testing.T, a, b quota.Store) {
	ta := trueUpper(t, a)
	bud := quota.Budget{Name: "shared", Limit: 100, Window: quota.Sliding(time.Hour)}
	storeTake(t, b, tuOwner, bud, 30, "b1", T0, 0)
	until := T0.Add(25 * time.Minute)
	res := trueUp(t, ta, backend.TrueUpRequest{Budget: bud, Used: 100, Until: until, Nonce: "a1", Now: T0.Add(time.Minute)})
	checkTrueUp(t, "through a", res, 30, 70, 100)
	if u := storeUsed(t, b, tuOwner, bud, T0.Add(2*time.Minute)); u.Used != 100 || !u.Reset.Equal(until) {
		t.Fatalf("b's Usage after a's true-up: %+v; want used 100, reset at %v", u, until)
	}
	if r := storeTake(t, b, tuOwner, bud, 1, "b2", T0.Add(2*time.Minute), 0); r.OK || !r.Usage[0].RetryAt.Equal(until) {
		t.Fatalf("b's Take after a's true-up = OK %v, %+v; want refused until %v", r.OK, r.Usage[0], until)
	}
	if r := storeTake(t, b, tuOwner, bud, 70, "b3", until, 0); !r.OK {
		t.Fatalf("b's Take of 70 at the reset = %+v; want admitted", r.Usage[0])
	}
	TrueUpRace(t, []quota.Store{a, b}, 6, 25)
}

// trueUpAddsExcess: an add (backend.TrueUpRequest.Add, a settled call's
// excess) records Used as it is, whatever the count and even above the
// limit (the upstream billed it), stamped at now and counted for a whole
// window from there, under the call's method and job in Breakdown; Until
// is ignored and an add of 0 records nothing. A daily add counts until the
// reset.
func (s suite) trueUpAddsExcess(t *testing.T) {
	st := s.store(t)
	tu := trueUpper(t, st)
	ctx := context.Background()
	b := quota.Budget{Name: "tokens", Limit: 100, Window: quota.Sliding(time.Hour)}
	storeTake(t, st, tuOwner, b, 60, "t1", T0, 0)
	now := T0.Add(time.Minute)
	res := trueUp(t, tu, backend.TrueUpRequest{Budget: b, Used: 70, Add: true, Method: "chat", Job: "enrich", Nonce: "x1", Now: now})
	checkTrueUp(t, "an excess of 70 over 60 counted", res, 60, 70, 130)
	res = trueUp(t, tu, backend.TrueUpRequest{Budget: b, Used: 0, Add: true, Method: "chat", Nonce: "x2", Now: now})
	checkTrueUp(t, "an excess of 0", res, 130, 0, 130)
	es, err := st.Entries(ctx, &backend.EntriesRequest{API: tuAPI, Owner: tuOwner, Budget: b, Now: now})
	if err != nil || len(es) != 2 || !es[1].At.Equal(now) || es[1].Cost != 70 || es[1].Nonce != "x1" {
		t.Fatalf("Entries = %+v, %v; want the take's 60 then the add's 70 at %v", es, err, now)
	}
	rows, err := st.Breakdown(ctx, &backend.BreakdownRequest{API: tuAPI, Owner: tuOwner, Since: T0, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var chat int64
	for _, r := range rows {
		switch {
		case r.Method == "chat" && r.Job == "enrich":
			chat += r.Units
		case r.Method == backend.UnmeteredMethod:
			t.Fatalf("Breakdown %+v: an add is its call's, not %q", rows, backend.UnmeteredMethod)
		}
	}
	if chat != 70 {
		t.Fatalf("Breakdown %+v: chat/enrich %d units; want the add's 70", rows, chat)
	}
	// the take's entry leaves at T0+1h, the add's a minute later
	if u := storeUsed(t, st, tuOwner, b, T0.Add(time.Hour)); u.Used != 70 {
		t.Fatalf("at T0+1h: used %d; want the add's 70 alone", u.Used)
	}
	if u := storeUsed(t, st, tuOwner, b, now.Add(time.Hour)); u.Used != 0 {
		t.Fatalf("a window after the add: used %d; want 0", u.Used)
	}

	d := quota.Budget{Name: "spend", Limit: 1000, Window: quota.Daily(time.UTC)}
	res = trueUp(t, tu, backend.TrueUpRequest{Budget: d, Used: 1500, Add: true, Nonce: "x3", Now: now})
	checkTrueUp(t, "a daily excess above the limit", res, 0, 1500, 1500)
	if tr, err := st.Take(ctx, &backend.TakeRequest{API: tuAPI, Owner: tuOwner, Nonce: "t2", Now: now,
		Debits: []backend.Debit{{Budget: d, Cost: 1}}}); err != nil || tr.OK {
		t.Fatalf("a take of 1 after the excess = %+v, %v; want a refusal", tr, err)
	} else if u := storeUsed(t, st, tuOwner, d, now); u.Used != 1500 {
		t.Fatalf("after a refused take: used %d; want 1500", u.Used)
	}
	reset := d.Window.NextReset(now)
	if u := storeUsed(t, st, tuOwner, d, reset.Add(-time.Microsecond)); u.Used != 1500 {
		t.Fatalf("just before the reset: used %d; want 1500", u.Used)
	}
	if u := storeUsed(t, st, tuOwner, d, reset); u.Used != 0 {
		t.Fatalf("at the reset: used %d; want 0", u.Used)
	}
}
