package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// batchSize is the number of decisions of the batched case.
const batchSize = 8

// batchCase measures a batch of batchSize daily admits (batch.lua, what
// WithPipelining sends when decisions of one budget wait together), per
// decision: it has goroutines decide together until one EVALSHA carries
// batchSize decisions, then replays that call with fresh nonces.
func batchCase(ctx context.Context, addr, prefix string, measure func(string, []any, int, ...int)) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4 * batchSize})
	defer rdb.Close()
	var mu sync.Mutex
	var longest []any // the EVALSHA with the most arguments sent
	rdb.AddHook(longestHook{&mu, &longest})
	st := redisstore.New(rdb, redisstore.WithPrefix(prefix+"batch:"))
	l, err := quota.New(st, "cg", []quota.Budget{{Name: "units", Limit: 1 << 50, Window: quota.Daily(time.UTC)}})
	if err != nil {
		log.Fatal(err)
	}
	ch := quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 1}}
	cred := quota.Credential{Secret: "cg-secret"}
	for range 102 {
		if _, err := l.Take(ctx, cred, ch); err != nil {
			log.Fatal(err)
		}
	}
	// batch.lua's ARGV: 12 shared values, then 7 per decision, NONCE first
	// (redisstore's protocol.go: batchShared, batchPerCall)
	const shared, perCall = 12, 7
	for try := 0; try < 1000; try++ {
		var wg sync.WaitGroup
		for range 2 * batchSize {
			wg.Go(func() {
				if _, err := l.Take(ctx, cred, ch); err != nil {
					log.Fatal(err)
				}
			})
		}
		wg.Wait()
		mu.Lock()
		call := append([]any(nil), longest...)
		longest = nil
		mu.Unlock()
		var nkeys int
		fmt.Sscan(fmt.Sprint(call[2]), &nkeys)
		k := (len(call) - 3 - nkeys - shared) / perCall
		if k < batchSize {
			continue
		}
		// exactly batchSize decisions: the first batchSize of the call's
		call, k = call[:3+nkeys+shared+perCall*batchSize], batchSize
		var at []int
		for i := range k {
			at = append(at, 3+nkeys+shared+perCall*i)
		}
		measure(fmt.Sprintf("quota daily admit, batched by %d (per decision)", k), call, k, at...)
		return
	}
	log.Fatalf("callgrind: no batch of %d formed in 1000 tries", batchSize)
}

// floors measures what the fewest commands a log limiter could make cost
// Redis: the reference the take script's layout is weighed against (issue
// 26). Each is a script of only those commands and a minimal Lua, on two
// keys (the log, one hash of the budget's state) and three arguments.
func floors(ctx context.Context, rdb *redis.Client, prefix string, measure func(string, []any, int, ...int)) {
	for _, f := range []struct{ name, src string }{
		{"floor: a log admit (TIME, HMGET of 3 fields, ZADD, HSET of 2)", floorAdmit},
		{"floor: a log admit with an hourly breakdown (+ HINCRBY)", strings.Replace(floorAdmit, "\nreturn", "\nredis.call('HINCRBY', KEYS[3], 'videos.list', 1)\nreturn", 1)},
		{"floor: a refusal (TIME, HMGET of 3 fields)", floorRefuse},
		{"no-op with the floors' 3 keys and 3 arguments", "return 1"},
		{"13 local functions, each referencing up to 6 earlier ones (made per run)", closures(true)},
		{"13 local functions referencing none", closures(false)},
		{"layout issue 26 proposes: one hash per budget (TIME, HMGET of 7, EXISTS, ZADD, HINCRBY, HSET of 3)", floorProposed},
	} {
		sc := redis.NewScript(f.src)
		if err := sc.Load(ctx, rdb).Err(); err != nil {
			log.Fatalf("%s: %v", f.name, err)
		}
		k := prefix + "floor" + fmt.Sprint(len(f.name)) + ":"
		call := []any{"evalsha", sc.Hash(), 3, k + "log", k + "state", k + "use", "nonce", 1, int64(1) << 50}
		if f.src == floorProposed {
			// and what a decision passes besides: the seen seq and until,
			// its own last seq, the hold, the field, the window's reset
			// and id, the process's marker field
			call = append(call, 0, 0, 0, 0, "videos.list", int64(1)<<52, "d20261128", "w:0")
		}
		if f.src == floorRefuse {
			call[len(call)-1] = 0
			measure(f.name, call, 1)
			continue
		}
		measure(f.name, call, 1, 6)
	}
}

// floorDecide is what the floors' admit and refusal share: the clock, the
// state, the refusal.
const floorDecide = `local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local v = redis.call('HMGET', KEYS[2], 'seq', 's', 'x')
local s, c = (v[2] or 0) + 0, ARGV[2] + 0
if s + c > ARGV[3] + 0 then
  return {0, now, s}
end
`

const floorAdmit = floorDecide + `redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[2], 'seq', (v[1] or 0) + 1, 's', s + c)
return {1, now, s + c}`

const floorRefuse = floorDecide + `return {1, now, s + c}`

// longestHook keeps the EVALSHA with the most arguments a client sent.
type longestHook struct {
	mu   *sync.Mutex
	keep *[]any
}

func (h longestHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h longestHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(cmd)
		return next(ctx, cmd)
	}
}
func (h longestHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.note(c)
		}
		return next(ctx, cmds)
	}
}

func (h longestHook) note(cmd redis.Cmder) {
	if cmd.Name() != "evalsha" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(cmd.Args()) > len(*h.keep) {
		*h.keep = append([]any(nil), cmd.Args()...)
	}
}

// floorProposed is the lone daily admit in the layout issue 26's first
// session proposed: the marker's fields, the running sum, the kept window
// and the exhausted mark of a budget in one hash read by one HMGET, the
// log checked by EXISTS, the hour's breakdown still an HINCRBY, and the
// reply take's ten numbers; with no Lua but what those need.
const floorProposed = `local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local v = redis.call('HMGET', KEYS[2], 'seq', 'u', 'e', 's', 'k', 'x', ARGV[11])
local seq, s, c = (v[1] or 0) + 0, (v[4] or 0) + 0, ARGV[2] + 0
if seq < ARGV[4] + 0 or (v[7] or 0) + 0 < ARGV[6] + 0 or (v[6] or 0) + 0 > now then
  return {}
end
if s + c > ARGV[3] + 0 then
  return {0, now, s, ARGV[9], 0, ARGV[9], seq, v[2], 0, 0}
end
if redis.call('EXISTS', KEYS[1]) == 0 and s > 0 then
  return {}
end
redis.call('ZADD', KEYS[1], now, ARGV[1] .. ':' .. ARGV[2])
redis.call('HINCRBY', KEYS[3], ARGV[8], ARGV[2])
seq = seq + 1
redis.call('HSET', KEYS[2], 'seq', seq, ARGV[11], seq, 's', s + c)
return {1, now, s + c, ARGV[9], 0, 0, seq, v[2], 0, 0}`

// closures is a script that makes 13 local functions and returns: what
// making a script's functions costs each run (take's prefix makes 13).
// With upvalues, each references up to six of those before it.
func closures(upvalues bool) string {
	var b strings.Builder
	for i := range 13 {
		body := "return x"
		if upvalues && i > 0 {
			var refs []string
			for j := i - 1; j >= 0 && len(refs) < 6; j-- {
				refs = append(refs, fmt.Sprintf("f%d(x)", j))
			}
			body = "return " + strings.Join(refs, " + ")
		}
		fmt.Fprintf(&b, "local function f%d(x) if x then %s end return %d end\n", i, body, i)
	}
	return b.String() + "return 1"
}
