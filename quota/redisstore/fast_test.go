package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestFastMatchesGeneral drives three stores on one server through the
// same random requests: one runs take scripts as shipped (their prefix,
// lone.lua, has decide decide the common cases), one with decide skipped,
// so take.lua's general path decides everything, and one that runs
// batch.lua's decide for that one decision first and counts what it
// decided (ProbeDecide). Their answers must be identical at every step, and
// so must every key they wrote (values, members, scores and whether they
// expire): decide is a shortcut of take.lua, never a second semantics; and
// it must have decided most single-budget decisions, admissions and
// refusals of both kinds of window, not left them to take.lua. Most
// charges name one budget, the case decide takes; the clock moves in steps
// that expire sliding entries one at a time, and now and then across an
// hour or a day; leases hold sliding entries ahead.
func TestFastMatchesGeneral(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			fastVersusGeneral(t, redistest.Client(t), seed)
		})
		t.Run(fmt.Sprint("miniredis-seed", seed), func(t *testing.T) {
			fastVersusGeneral(t, redistest.MiniClient(t, redistest.Mini(t)), seed)
		})
	}
}

// onBoth runs f as subtests on the shared Redis ("redis") and on an
// in-process miniredis ("miniredis").
func onBoth(t *testing.T, f func(t *testing.T, c redis.UniversalClient)) {
	t.Run("redis", func(t *testing.T) { f(t, redistest.Client(t)) })
	t.Run("miniredis", func(t *testing.T) { f(t, redistest.MiniClient(t, redistest.Mini(t))) })
}

func fastVersusGeneral(t *testing.T, c redis.UniversalClient, seed uint64) {
	ctx := context.Background()
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	base := redistest.Prefix(t)
	fast := redisstore.New(c, redisstore.WithPrefix(base+"f:"))
	general := redisstore.New(c, redisstore.WithPrefix(base+"g:"))
	probed := redisstore.New(c, redisstore.WithPrefix(base+"d:"))
	redisstore.GeneralOnly(general)
	decided := redisstore.ProbeDecide(probed)
	// the same field for each store's own admissions, as they write the same
	redisstore.OwnBucket(fast, 0)
	redisstore.OwnBucket(general, 0)
	redisstore.OwnBucket(probed, 0)
	budgets := randomBudgets(la)
	rng := rand.New(rand.NewPCG(seed, 7))
	now := time.Date(2026, 3, 7, 23, 50, 0, 0, la) // a DST change ahead
	var grants []grant
	both := &bothStores{t: t, x: fast, y: general, xname: "fast", yname: "general", also: []*redisstore.Store{probed}}
	// what decide decided of the single-budget takes, by window kind and answer
	var single, byDecide [2][2]int
	same := func(step int, what string, f, g any, ef, eg error) {
		t.Helper()
		both.same(step, what, now, f, g, ef, eg)
	}
	var fastOK, refused int
	for step := range 1500 {
		owner := []string{"a", "b"}[rng.IntN(2)]
		switch op := rng.IntN(100); {
		case op < 60:
			var debits []backend.Debit
			if rng.IntN(5) > 0 {
				b := budgets[rng.IntN(len(budgets))]
				debits = []backend.Debit{{Budget: b, Cost: 1 + rng.Int64N(b.Limit/8)}}
			} else {
				for _, b := range budgets[:2+rng.IntN(3)] {
					debits = append(debits, backend.Debit{Budget: b, Cost: 1 + rng.Int64N(b.Limit/8)})
				}
			}
			req := &backend.TakeRequest{API: "yt", Owner: owner, Nonce: fmt.Sprint("n", step), Now: now,
				Method: "videos.list", Job: "ingest", Debits: debits}
			if rng.IntN(6) == 0 {
				req.Hold = time.Duration(rng.IntN(6)) * time.Second // a lease's block: at most a tenth of a minute
			}
			f, ef := fast.Take(ctx, req)
			g, eg := general.Take(ctx, req)
			same(step, "Take", f, g, ef, eg)
			before := decided()
			p, ep := probed.Take(ctx, req)
			same(step, "Take (decide first)", f, p, ef, ep)
			if len(debits) == 1 && p != nil {
				kind, ok := 0, 0
				if debits[0].Window.IsDaily() {
					kind = 1
				}
				if p.OK {
					ok = 1
				}
				single[kind][ok]++
				if decided() > before {
					byDecide[kind][ok]++
				}
			}
			if f != nil && f.OK {
				if len(debits) == 1 {
					fastOK++
				}
				grants = append(grants, grant{owner, req.Nonce, f.At.Add(req.Hold), debits})
			} else if f != nil {
				refused++
			}
		case op < 68 && len(grants) > 0:
			both.change(step, "refund", rng, now, owner, budgets, grants)
		case op < 74 && len(grants) > 0:
			both.change(step, "settle", rng, now, owner, budgets, grants)
		case op < 77:
			both.change(step, "exhaust", rng, now, owner, budgets, grants)
		case op < 79:
			both.change(step, "adjust", rng, now, owner, budgets, grants)
		default:
			// mostly a few seconds, so sliding entries expire one by one
			now = now.Add(time.Duration(rng.Int64N(int64(4 * time.Second))))
			if rng.IntN(20) == 0 {
				now = now.Add(time.Duration(rng.IntN(90)) * time.Minute)
			}
		}
		if step%100 == 99 {
			sameKeys(t, c, base+"f:", base+"g:")
			sameKeys(t, c, base+"f:", base+"d:")
			for _, o := range []string{"a", "b"} {
				ureq := &backend.UsageRequest{API: "yt", Owner: o, Budgets: budgets, Now: now}
				f, ef := fast.Usage(ctx, ureq)
				g, eg := general.Usage(ctx, ureq)
				same(step, "Usage", f, g, ef, eg)
				p, ep := probed.Usage(ctx, ureq)
				same(step, "Usage", f, p, ef, ep)
			}
		}
	}
	sameKeys(t, c, base+"f:", base+"g:")
	sameKeys(t, c, base+"f:", base+"d:")
	if fastOK < 200 || refused < 100 {
		t.Fatalf("%d single-budget admissions and %d refusals: too few to mean much", fastOK, refused)
	}
	// single-budget decisions decide took, of those made, by window kind
	// (sliding, daily) and answer (refused, admitted)
	t.Logf("decided by decide, of single-budget takes: sliding refused %d/%d admitted %d/%d, daily refused %d/%d admitted %d/%d",
		byDecide[0][0], single[0][0], byDecide[0][1], single[0][1], byDecide[1][0], single[1][0], byDecide[1][1], single[1][1])
	// Most admissions and daily refusals; of sliding refusals, those
	// whose deficit the two oldest entries cover (here costs go up to an
	// eighth of the limit, so many need a deeper walk: take.lua's) and no
	// exhausted mark holds.
	for kind := range 2 {
		for ok := range 2 {
			least := single[kind][ok] / 2
			if kind == 0 && ok == 0 {
				least = 5
			}
			if byDecide[kind][ok] < max(least, 5) {
				t.Errorf("window kind %d answer %d: decide decided %d of %d single-budget takes, want %d or more",
					kind, ok, byDecide[kind][ok], single[kind][ok], max(least, 5))
			}
		}
	}
}

// randomBudgets are the budgets the random drivers charge: two daily (one
// in la, across its DST change), two sliding and a monthly one.
func randomBudgets(la *time.Location) []quota.Budget {
	return []quota.Budget{
		{Name: "units", Limit: 400, Window: quota.Daily(la)},
		{Name: "month", Limit: 3000, Window: quota.Monthly(la)},
		{Name: "search", Limit: 60, Window: quota.Daily(time.UTC)},
		{Name: "minute", Limit: 50, Window: quota.Sliding(time.Minute)},
		{Name: "tenmin", Limit: 200, Window: quota.Sliding(10 * time.Minute)},
	}
}

// grant is a charge a random driver's stores admitted, to refund or settle.
type grant struct {
	owner, nonce string
	at           time.Time
	debits       []backend.Debit
}

// bothStores are two stores a random driver sends the same requests to,
// named xname and yname in its messages.
type bothStores struct {
	t            *testing.T
	x, y         *redisstore.Store
	xname, yname string
	also         []*redisstore.Store // more stores, each to answer as x
}

// same requires the answers of the two stores to one request to be
// identical.
func (b *bothStores) same(step int, what string, now time.Time, x, y any, ex, ey error) {
	b.t.Helper()
	if (ex == nil) != (ey == nil) || ex != nil && ex.Error() != ey.Error() {
		b.t.Fatalf("step %d %s: errors differ: %s %v, %s %v", step, what, b.xname, ex, b.yname, ey)
	}
	if !reflect.DeepEqual(x, y) {
		b.t.Fatalf("step %d %s at %v:\n%s: %+v\n%s: %+v", step, what, now, b.xname, x, b.yname, y)
	}
}

// change makes the same random request of kind on both stores and
// requires the same answers: "refund" or "settle" (to a random cost) of
// one of grants, "exhaust" or "adjust" of one of budgets of owner.
func (b *bothStores) change(step int, kind string, rng *rand.Rand, now time.Time, owner string, budgets []quota.Budget, grants []grant) {
	b.t.Helper()
	ctx := context.Background()
	switch kind {
	case "refund":
		gr := grants[rng.IntN(len(grants))]
		var bs []quota.Budget
		for _, d := range gr.debits {
			bs = append(bs, d.Budget)
		}
		req := &backend.RefundRequest{API: "yt", Owner: gr.owner, At: gr.at, Nonce: gr.nonce, Budgets: bs, Now: now}
		x, ex := b.x.Refund(ctx, req)
		y, ey := b.y.Refund(ctx, req)
		b.same(step, "Refund", now, x, y, ex, ey)
		for _, z := range b.also {
			y, ey := z.Refund(ctx, req)
			b.same(step, "Refund", now, x, y, ex, ey)
		}
	case "settle":
		gr := grants[rng.IntN(len(grants))]
		debits := slices.Clone(gr.debits)
		for i := range debits {
			debits[i].Cost = rng.Int64N(debits[i].Cost + 1)
		}
		req := &backend.SettleRequest{API: "yt", Owner: gr.owner, At: gr.at, Nonce: gr.nonce,
			Method: "videos.list", Job: "ingest", Debits: debits, Now: now}
		x, ex := b.x.Settle(ctx, req)
		y, ey := b.y.Settle(ctx, req)
		b.same(step, "Settle", now, x, y, ex, ey)
		for _, z := range b.also {
			y, ey := z.Settle(ctx, req)
			b.same(step, "Settle", now, x, y, ex, ey)
		}
	case "exhaust":
		bd := budgets[rng.IntN(len(budgets))]
		req := &backend.ExhaustRequest{API: "yt", Owner: owner, Budget: bd, Until: now.Add(time.Duration(rng.IntN(20)-5) * time.Minute), Now: now}
		ex := b.x.Exhaust(ctx, req)
		b.same(step, "Exhaust", now, nil, nil, ex, b.y.Exhaust(ctx, req))
		for _, z := range b.also {
			b.same(step, "Exhaust", now, nil, nil, ex, z.Exhaust(ctx, req))
		}
	case "adjust":
		bd := budgets[rng.IntN(len(budgets))]
		req := &backend.AdjustRequest{API: "yt", Owner: owner, Budget: bd, Used: rng.Int64N(bd.Limit + 1), Nonce: fmt.Sprint("adj", step), Now: now}
		ex := b.x.Adjust(ctx, req)
		b.same(step, "Adjust", now, nil, nil, ex, b.y.Adjust(ctx, req))
		for _, z := range b.also {
			b.same(step, "Adjust", now, nil, nil, ex, z.Adjust(ctx, req))
		}
	default:
		b.t.Fatalf("unknown change %q", kind)
	}
}

// sameKeys requires the keys under prefixes a and b to be the same, key by
// key: type, contents and whether the key expires.
func sameKeys(t *testing.T, c redis.UniversalClient, a, b string) {
	t.Helper()
	ka, kb := dumpKeys(t, c, a), dumpKeys(t, c, b)
	if len(ka) == 0 {
		t.Fatal("no keys written")
	}
	if !reflect.DeepEqual(ka, kb) {
		for k, v := range ka {
			if w, ok := kb[k]; !ok || !reflect.DeepEqual(v, w) {
				t.Errorf("key %s: fast %v, general %v", k, v, w)
			}
		}
		for k, w := range kb {
			if _, ok := ka[k]; !ok {
				t.Errorf("key %s: fast none, general %v", k, w)
			}
		}
		t.FailNow()
	}
}

// dumpKeys returns every key under prefix (named without it) with its type,
// its contents and whether it has a TTL.
func dumpKeys(t *testing.T, c redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		typ := c.Type(ctx, k).Val()
		var v any
		switch typ {
		case "string":
			v = c.Get(ctx, k).Val()
		case "hash":
			v = c.HGetAll(ctx, k).Val()
		case "zset":
			v = c.ZRangeWithScores(ctx, k, 0, -1).Val()
		default:
			v = "?"
		}
		ttl := c.PTTL(ctx, k).Val()
		out[strings.TrimPrefix(k, prefix)] = fmt.Sprintf("%s %v expires=%v", typ, v, ttl > 0)
	}
	return out
}

// TestFastSlidingRefusal: the sliding refusals decide decides alone,
// when the log's oldest entry has just expired and the next covers the
// deficit, and when the two oldest counted entries do; and one it leaves
// to take.lua, three entries deep. Each against the general path and the
// memory store.
func TestFastSlidingRefusal(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		base := redistest.Prefix(t)
		fast := redisstore.New(c, redisstore.WithPrefix(base+"f:"))
		general := redisstore.New(c, redisstore.WithPrefix(base+"g:"))
		redisstore.GeneralOnly(general)
		redisstore.OwnBucket(fast, 0)
		redisstore.OwnBucket(general, 0)
		ref := quota.NewMemoryStore()
		b := quota.Budget{Name: "minute", Limit: 10, Window: quota.Sliding(time.Minute)}
		t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		step := 0
		take := func(at time.Duration, cost int64) *backend.TakeResult {
			t.Helper()
			step++
			req := &backend.TakeRequest{API: "yt", Owner: "o", Nonce: fmt.Sprint("n", step), Now: t0.Add(at),
				Debits: []backend.Debit{{Budget: b, Cost: cost}}}
			want, errW := ref.Take(ctx, req)
			f, errF := fast.Take(ctx, req)
			g, errG := general.Take(ctx, req)
			if errW != nil || errF != nil || errG != nil {
				t.Fatal(errW, errF, errG)
			}
			if !reflect.DeepEqual(utcResult(want), utcResult(f)) || !reflect.DeepEqual(f, g) {
				t.Fatalf("take %d at +%v:\nmemory:  %+v\nfast:    %+v\ngeneral: %+v", step, at, want, f, g)
			}
			return f
		}
		for i := range 5 { // 2 units at +0s .. +4s: the budget is full
			if !take(time.Duration(i)*time.Second, 2).OK {
				t.Fatal("refused under the limit")
			}
		}
		for _, c := range []struct {
			at    time.Duration
			cost  int64
			retry time.Duration // after t0
		}{
			{30 * time.Second, 1, time.Minute},                                 // the oldest covers it
			{30 * time.Second, 4, time.Minute + time.Second},                   // the two oldest do
			{30 * time.Second, 5, time.Minute + 2*time.Second},                 // three deep: take.lua walks
			{time.Minute + 500*time.Millisecond, 3, time.Minute + time.Second}, // the oldest expired, the next covers it
			{time.Minute + 500*time.Millisecond, 5, time.Minute + 2*time.Second},
		} {
			res := take(c.at, c.cost)
			if res.OK || !res.Usage[0].RetryAt.Equal(t0.Add(c.retry)) {
				t.Fatalf("cost %d at +%v: %+v, want a refusal until +%v", c.cost, c.at, res.Usage[0], c.retry)
			}
		}
		sameKeys(t, c, base+"f:", base+"g:")
	})
}
