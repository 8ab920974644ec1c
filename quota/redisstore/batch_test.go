package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestBatchMatchesOneByOne drives two stores on one server through the
// same random requests: one pipelines its decisions, and the test queues
// several single-budget decisions of one owner at once so that batch.lua
// decides them together; the other decides each alone, one after another,
// in the same order. Their answers must be identical decision by
// decision, and so must every key they wrote: a batch is k decisions in a
// row, never a second semantics. Between batches, refunds, settles,
// exhausts, adjusts and charges of two budgets change the state as
// take.lua's general path leaves it, and the clock moves so that sliding
// entries expire one or several at a time, and now and then across an
// hour or a day.
func TestBatchMatchesOneByOne(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			batchVersusOneByOne(t, redistest.Client(t), seed, false)
		})
	}
	// A real Redis expires keys by its own clock while the requests carry
	// the test's: keys lost on their own (odd states, short lifetimes)
	// are staged on miniredis, whose clock stands still.
	// (seeds 17 and 18 stage a marker made afresh after a loss while a
	// budget's state stands: take.lua's unmarked check)
	for _, seed := range []uint64{0, 1, 2, 3, 4, 5, 17, 18} {
		t.Run(fmt.Sprint("miniredis-seed", seed), func(t *testing.T) {
			batchVersusOneByOne(t, redistest.MiniClient(t, redistest.Mini(t)), seed, true)
		})
	}
}

func batchVersusOneByOne(t *testing.T, c redis.UniversalClient, seed uint64, lose bool) {
	ctx := context.Background()
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	base := redistest.Prefix(t)
	piped := redisstore.New(c, redisstore.WithPrefix(base+"p:"), redisstore.WithPipelining(1))
	alone := redisstore.New(c, redisstore.WithPrefix(base+"a:"))
	redisstore.OwnBucket(piped, 0)
	redisstore.OwnBucket(alone, 0)
	budgets := randomBudgets(la)
	rng := rand.New(rand.NewPCG(seed, 11))
	now := time.Date(2026, 3, 7, 23, 50, 0, 0, la) // a DST change ahead
	var grants []grant
	both := &bothStores{t: t, x: piped, y: alone, xname: "batched", yname: "alone"}
	same := func(step int, what string, p, a any, ep, ea error) {
		t.Helper()
		both.same(step, what, now, p, a, ep, ea)
	}
	var decisions, admitted, refused, lost int
	for step := range 500 {
		owner := []string{"a", "b"}[rng.IntN(2)]
		switch op := rng.IntN(100); {
		case op < 50:
			// a batch: 2 to 12 single-budget decisions of one owner and
			// budget, queued in order, then let go as one pipeline
			b := budgets[rng.IntN(len(budgets))]
			k := 2 + rng.IntN(11)
			reqs := make([]*backend.TakeRequest, k)
			for i := range reqs {
				reqs[i] = &backend.TakeRequest{API: "yt", Owner: owner, Nonce: fmt.Sprintf("n%d-%d", step, i), Now: now,
					Method: "videos.list", Job: []string{"ingest", "backfill"}[rng.IntN(2)],
					Debits: []backend.Debit{{Budget: b, Cost: 1 + rng.Int64N(b.Limit/[]int64{6, 20, 40}[rng.IntN(3)])}}}
				if rng.IntN(6) == 0 {
					req := reqs[i]
					req.Hold = time.Duration(rng.IntN(6)) * time.Second // a lease's block
				}
			}
			got := takeQueued(t, piped, reqs)
			for i, req := range reqs {
				want, err := alone.Take(ctx, req)
				same(step, fmt.Sprintf("Take %d of %d", i, k), got[i].res, want, got[i].err, err)
				if want != nil && want.OK {
					admitted++
					grants = append(grants, grant{owner, req.Nonce, want.At.Add(req.Hold), req.Debits})
				} else if want != nil {
					refused++
				}
			}
			decisions += k
		case op < 60:
			// two budgets: take.lua's general path, alone on both
			var debits []backend.Debit
			for _, b := range budgets[:2+rng.IntN(3)] {
				debits = append(debits, backend.Debit{Budget: b, Cost: 1 + rng.Int64N(b.Limit/8)})
			}
			req := &backend.TakeRequest{API: "yt", Owner: owner, Nonce: fmt.Sprint("m", step), Now: now,
				Method: "videos.list", Job: "ingest", Debits: debits}
			p, ep := piped.Take(ctx, req)
			a, ea := alone.Take(ctx, req)
			same(step, "Take of two budgets", p, a, ep, ea)
			if a != nil && a.OK {
				grants = append(grants, grant{owner, req.Nonce, a.At, debits})
			}
		case op < 66 && len(grants) > 0:
			both.change(step, "refund", rng, now, owner, budgets, grants)
		case op < 70 && len(grants) > 0:
			both.change(step, "settle", rng, now, owner, budgets, grants)
		case op < 72:
			both.change(step, "exhaust", rng, now, owner, budgets, grants)
		case op < 74:
			both.change(step, "adjust", rng, now, owner, budgets, grants)
		case op < 76 && lose:
			// a key lost on its own (evicted, deleted by hand): both
			// stores must find it alike, batched or not
			keys, err := c.Keys(ctx, base+"a:*"+owner+"}:*").Result()
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(keys) // KEYS comes in no set order: the seed decides
			if len(keys) > 0 {
				k := keys[rng.IntN(len(keys))][len(base+"a:"):]
				if err := c.Del(ctx, base+"a:"+k, base+"p:"+k).Err(); err != nil {
					t.Fatal(err)
				}
				lost++
			}
		default:
			// mostly a few seconds, so sliding entries expire one or a
			// few at a time
			now = now.Add(time.Duration(rng.Int64N(int64(6 * time.Second))))
			if rng.IntN(20) == 0 {
				now = now.Add(time.Duration(rng.IntN(90)) * time.Minute)
			}
		}
		if step%50 == 49 {
			sameKeys(t, c, base+"p:", base+"a:")
		}
	}
	sameKeys(t, c, base+"p:", base+"a:")
	batched := redisstore.Batched(piped)
	t.Logf("%d decisions in batches: %d decided by batch.lua, %d admitted, %d refused; %d keys lost", decisions, batched, admitted, refused, lost)
	if batched < int64(decisions)/3 || admitted < 200 || refused < 200 {
		t.Fatalf("%d of %d decisions decided in batches, %d admitted, %d refused: too few to mean much", batched, decisions, admitted, refused)
	}
}

// takeResult is one decision's answer.
type takeResult struct {
	res *backend.TakeResult
	err error
}

// takeQueued makes reqs on st (WithPipelining(1)) so that they wait in its
// queue in their order, then lets them go together, and returns their
// answers.
func takeQueued(t *testing.T, st *redisstore.Store, reqs []*backend.TakeRequest) []takeResult {
	t.Helper()
	for !redisstore.PipelineIdle(st) {
		runtime.Gosched() // the last batch's sender is ending
	}
	release := redisstore.GatePipeline(st)
	out := make([]takeResult, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			out[i].res, out[i].err = st.Take(context.Background(), req)
		})
		for !redisstore.PipelineQueued(st, i+1) {
			runtime.Gosched() // waiting for a goroutine to queue, not for time to pass
		}
	}
	release()
	wg.Wait()
	return out
}

// TestBatchAfterScriptFlush: a batch that meets NOSCRIPT (the server lost
// its scripts: nothing ran) is decided one by one, each decision once, and
// the batch script is loaded for the batches that follow.
func TestBatchAfterScriptFlush(t *testing.T) {
	srv := redistest.Server(t)
	c := srv.Client(t)
	ctx := context.Background()
	st := redisstore.New(c, redisstore.WithPrefix(redistest.Prefix(t)), redisstore.WithPipelining(1))
	b := quota.Budget{Name: "units", Limit: 1000, Window: quota.Sliding(time.Hour)}
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	n := 0
	batch := func(k int) {
		t.Helper()
		reqs := make([]*backend.TakeRequest, k)
		for i := range reqs {
			n++
			reqs[i] = &backend.TakeRequest{API: "yt", Owner: "o", Nonce: fmt.Sprint("n", n), Now: t0,
				Debits: []backend.Debit{{Budget: b, Cost: 1}}}
		}
		for i, r := range takeQueued(t, st, reqs) {
			if r.err != nil || !r.res.OK {
				t.Fatalf("decision %d of %d: %+v, %v", i, k, r.res, r.err)
			}
		}
	}
	batch(1) // the first decision of a budget makes its keys (take.lua)
	batch(4) // the first batch finds batch.lua not loaded yet: one by one
	batch(4)
	before := redisstore.Batched(st)
	if before == 0 {
		t.Fatal("no decision was batched")
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	batch(5)
	if got := redisstore.Batched(st); got != before {
		t.Fatalf("batch.lua decided %d decisions after SCRIPT FLUSH, before it was loaded again", got-before)
	}
	batch(6)
	if got := redisstore.Batched(st); got != before+6 {
		t.Fatalf("batch.lua decided %d of the 6 decisions after it was loaded again", got-before)
	}
	us, err := st.Usage(ctx, &backend.UsageRequest{API: "yt", Owner: "o", Budgets: []quota.Budget{b}, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Used != 20 {
		t.Fatalf("the store counts %d units after 20 admitted decisions", us[0].Used)
	}
}

// TestBatchedStoreLoss: 32 goroutines spend a daily budget through a
// pipelining store (most decisions in batches), then the server loses
// state, and they go on: every decision after the loss must find it,
// batched or not, so that units spent before it are not admitted again,
// and in all no more than the limit is. Two losses: everything (FLUSHDB),
// and the last writes only (the keys put back as they were earlier, as a
// failover to a replica that had not received them leaves them), where
// the marker is there and only its sequence tells.
func TestBatchedStoreLoss(t *testing.T) {
	for _, tc := range []string{"flush", "rollback"} {
		t.Run(tc, func(t *testing.T) { batchedStoreLoss(t, tc == "rollback") })
	}
}

func batchedStoreLoss(t *testing.T, rollback bool) {
	const limit, g = 1000, 32
	srv := redistest.Server(t)
	c := srv.Client(t)
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	st := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithPipelining(1))
	redisstore.ForcePipeline(st) // every decision queues: batches form however the scheduler runs them
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: limit, Window: quota.Daily(time.UTC)}},
		quota.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		admitted int
	)
	run := func(until int, each int) (n int) {
		var wg sync.WaitGroup
		for range g {
			wg.Go(func() {
				for range each {
					mu.Lock()
					stop := admitted >= until
					mu.Unlock()
					if stop {
						return
					}
					_, err := l.Take(ctx, secret, quota.Units("units", 1))
					if errors.Is(err, quota.ErrExhausted) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					admitted++
					n++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return n
	}
	before := run(limit*3/10, limit)
	type saved struct {
		data string
		ttl  time.Duration
	}
	snap := map[string]saved{}
	if rollback {
		keys, err := c.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			d, err := c.Dump(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			snap[k] = saved{d, max(0, c.PTTL(ctx, k).Val())}
		}
		before += run(limit/2, limit) // the writes the loss takes back
	}
	if redisstore.Batched(st) == 0 {
		t.Fatal("no decision was batched before the loss")
	}
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for k, v := range snap {
		if err := c.Restore(ctx, k, v.ttl, v.data).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// the first decisions after the loss wait together, so that a batch,
	// not a decision alone, meets it first
	for !redisstore.PipelineIdle(st) {
		runtime.Gosched()
	}
	release := redisstore.GatePipeline(st)
	first := make(chan bool, g)
	for range g {
		go func() {
			_, err := l.Take(ctx, secret, quota.Units("units", 1))
			if err != nil && !errors.Is(err, quota.ErrExhausted) {
				t.Error(err)
			}
			first <- err == nil
		}()
	}
	for !redisstore.PipelineQueued(st, g) {
		runtime.Gosched() // waiting for the goroutines to queue, not for time to pass
	}
	release()
	after := 0
	for range g {
		if <-first {
			after++
		}
	}
	after += run(limit, 60)
	t.Logf("%d admitted before the loss, %d after; %d decided in batches", before, after, redisstore.Batched(st))
	if before+after > limit {
		t.Fatalf("%d admitted before the loss and %d after: %d of a limit of %d", before, after, before+after, limit)
	}
}
