package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

type granted struct {
	cred    string
	at      time.Time
	nonce   string
	budgets []quota.Budget
}

// MatchesMemory drives st and quota.MemoryStore, the reference, through
// the same random sequence of 800 steps (200 with -short), seeded by seed,
// on three budgets (two sliding windows and a daily one): charges of
// one or several budgets, refunds (by reservation, and of every budget as a
// refund by ID is), exhaustion marks set and cleared, adjustments, budgets
// redefined with other windows (sliding, one longer than quota.DailyKeep
// and one longer than quota.MonthlyKeep, daily in three zones and monthly
// in two: what a daily or monthly log set aside must count after it), and
// a clock that moves forward by minutes, now and then by hours, and more
// rarely by days, across daily and monthly resets. After every step it compares the answers, and the usage and
// entries of the credential charged (of every credential every 25 steps):
// they must be identical. A clock stepping back is not in the run (after
// one, what each store had already dropped as expired depends on when it
// tidied up: ClockStepsBack covers it).
func MatchesMemory(t *testing.T, st quota.Store, seed uint64) {
	t.Helper()
	matchesMemory(t, st, seed, nil)
}

// MatchesMemoryMoving is MatchesMemory for a store with a clock of its own
// that expires keys (miniredis): move is called with the run's now at its
// start and each time it moves, to move the server's clock along (SetTime,
// and FastForward by as much), so that key lifetimes run out as they would
// in production while the requests still say when they are decided.
func MatchesMemoryMoving(t *testing.T, st quota.Store, seed uint64, move func(now time.Time)) {
	t.Helper()
	matchesMemory(t, st, seed, move)
}

func matchesMemory(t *testing.T, st quota.Store, seed uint64, move func(now time.Time)) {
	t.Helper()
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	budgets := []quota.Budget{
		{Name: "burst", Limit: 100, Window: quota.Sliding(10 * time.Minute)},
		{Name: "hourly", Limit: 300, Window: quota.Sliding(time.Hour)},
		{Name: "daily", Limit: 700, Window: quota.Daily(la)},
	}
	steps := 800
	if testing.Short() {
		steps = 200
	}
	ctx := context.Background()
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	windows := []quota.Window{
		quota.Sliding(5 * time.Minute), quota.Sliding(10 * time.Minute), quota.Sliding(time.Hour),
		quota.Sliding(3 * time.Hour), quota.Daily(la), quota.Daily(time.UTC),
		quota.Daily(tokyo), quota.Sliding(30 * time.Hour),
		quota.Monthly(la), quota.Monthly(time.UTC), quota.Sliding(35 * 24 * time.Hour),
	}
	ref := quota.NewMemoryStore()
	rng := rand.New(rand.NewPCG(seed, 99))
	creds := []string{"c0", "c1", "c2"}
	now := T0
	var grants []granted
	check := func(step int, what string, want, got any, errWant, errGot error) {
		t.Helper()
		if (errWant == nil) != (errGot == nil) {
			t.Fatalf("step %d %s: errors differ: memory %v, store %v", step, what, errWant, errGot)
		}
		if want, got := inUTC(want), inUTC(got); !reflect.DeepEqual(want, got) {
			t.Fatalf("step %d %s at %v:\nmemory: %+v\nstore:  %+v", step, what, now, want, got)
		}
	}
	if move != nil {
		move(now)
	}
	var ok, refused int
	for step := range steps {
		cred := creds[rng.IntN(len(creds))]
		switch op := rng.IntN(100); {
		case op < 55:
			var debits []backend.Debit
			for _, b := range budgets {
				if rng.IntN(2) == 0 || len(debits) == 0 && b.Name == budgets[len(budgets)-1].Name {
					debits = append(debits, backend.Debit{Budget: b, Cost: 1 + rng.Int64N(b.Limit/5)})
				}
			}
			req := &backend.TakeRequest{API: "api", Owner: cred, Nonce: fmt.Sprint("n", step), Now: now, Debits: debits}
			want, errW := ref.Take(ctx, req)
			got, errG := st.Take(ctx, req)
			check(step, "Take", want, got, errW, errG)
			if got != nil && got.OK {
				ok++
				var bs []quota.Budget
				for _, d := range debits {
					bs = append(bs, d.Budget)
				}
				grants = append(grants, granted{cred, got.At, req.Nonce, bs})
			} else {
				refused++
			}
		case op < 65 && len(grants) > 0:
			g := grants[rng.IntN(len(grants))]
			req := &backend.RefundRequest{API: "api", Owner: g.cred, At: g.at, Nonce: g.nonce, Budgets: g.budgets, Now: now}
			if rng.IntN(4) == 0 {
				req.Budgets = budgets // by ID: every budget of the API
			}
			want, errW := ref.Refund(ctx, req)
			got, errG := st.Refund(ctx, req)
			check(step, "Refund", want, got, errW, errG)
		case op < 70:
			b := budgets[rng.IntN(len(budgets))]
			until := now.Add(time.Duration(rng.IntN(40)-10) * time.Minute)
			if rng.IntN(5) == 0 {
				until = time.Time{}
			}
			req := &backend.ExhaustRequest{API: "api", Owner: cred, Budget: b, Until: until, Now: now}
			check(step, "Exhaust", nil, nil, ref.Exhaust(ctx, req), st.Exhaust(ctx, req))
		case op < 73:
			b := budgets[rng.IntN(len(budgets))]
			req := &backend.AdjustRequest{API: "api", Owner: cred, Budget: b, Used: rng.Int64N(b.Limit + 1), Nonce: fmt.Sprint("adj", step), Now: now}
			check(step, "Adjust", nil, nil, ref.Adjust(ctx, req), st.Adjust(ctx, req))
		case op < 76:
			// An operator redefines a budget with another window.
			i := rng.IntN(len(budgets))
			budgets[i].Window = windows[rng.IntN(len(windows))]
		default:
			now = now.Add(time.Duration(rng.Int64N(int64(4 * time.Minute))))
			if rng.IntN(50) == 0 {
				now = now.Add(time.Duration(rng.IntN(30)) * time.Hour)
			}
			if rng.IntN(100) == 0 {
				// days: from T0 (November 22nd), across a month's end
				now = now.Add(time.Duration(1+rng.IntN(6)) * 24 * time.Hour)
			}
			if move != nil {
				move(now)
			}
		}
		// Compare what the step may have changed, and everything now and
		// then (the clock moves expire entries of every credential).
		look := []string{cred}
		if step%25 == 0 {
			look = creds
		}
		for _, c := range look {
			ureq := &backend.UsageRequest{API: "api", Owner: c, Budgets: budgets, Now: now}
			want, errW := ref.Usage(ctx, ureq)
			got, errG := st.Usage(ctx, ureq)
			check(step, "Usage of "+c, want, got, errW, errG)
			for _, b := range budgets {
				ereq := &backend.EntriesRequest{API: "api", Owner: c, Budget: b, Now: now}
				want, errW := ref.Entries(ctx, ereq)
				got, errG := st.Entries(ctx, ereq)
				check(step, "Entries of "+c+"/"+b.Name, want, got, errW, errG)
			}
		}
	}
	if ok < steps/10 || refused < steps/20 {
		t.Fatalf("the run granted %d and refused %d charges: too few of one to mean much", ok, refused)
	}
}

// inUTC returns v with its instants in UTC (stores may answer in another
// location, Redis in the local one, for the same instants), and entries of
// one instant in nonce order.
func inUTC(v any) any {
	usages := func(us []quota.Usage) []quota.Usage {
		if us == nil {
			return nil
		}
		out := slices.Clone(us)
		for i := range out {
			u := &out[i]
			u.Reset, u.ExhaustedUntil, u.RetryAt = u.Reset.UTC(), u.ExhaustedUntil.UTC(), u.RetryAt.UTC()
		}
		return out
	}
	switch x := v.(type) {
	case *backend.TakeResult:
		if x == nil {
			return x
		}
		c := *x
		c.At, c.Usage = c.At.UTC(), usages(c.Usage)
		return &c
	case []quota.Usage:
		return usages(x)
	case []quota.Entry:
		if x == nil {
			return x
		}
		out := slices.Clone(x)
		for i := range out {
			out[i].At = out[i].At.UTC()
		}
		// entries recorded at one instant come in no set order (Redis
		// sorts them by member)
		slices.SortStableFunc(out, func(a, b quota.Entry) int {
			if c := a.At.Compare(b.At); c != 0 {
				return c
			}
			return strings.Compare(a.Nonce, b.Nonce)
		})
		return out
	}
	return v
}
