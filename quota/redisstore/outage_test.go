package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/internal/testkit/overspend"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// The phases of an outage. A call is counted in a phase when it started
// and ended in it; one that straddles a change counts in phaseChange. The
// test enters phaseHung and phaseDown after it stops or kills the server,
// and leaves them before it resumes or restarts it, so a call counted in
// one of them ran entirely while the server was stopped or dead.
const (
	phaseUp        int32 = iota // the server answers
	phaseHung                   // the server is paused (Instance.Pause): connections open, no replies
	phaseResumed                // Instance.Resume
	phaseDown                   // the server was killed
	phaseRestart                // Restart is under way: anything but a wrong error may happen
	phaseRecovered              // a Take succeeded again after Restart
	phaseChange                 // the call straddled a change of phase
	phases
)

var phaseNames = [phases]string{"up", "hung", "resumed", "down", "restarting", "recovered", "changing"}

// tally counts the outcomes of calls by limiter, phase and cost class.
type tally struct {
	mu sync.Mutex
	m  map[tallyKey]*outcomes
}

type tallyKey struct {
	limiter string // "closed" or "open"
	phase   int32
	cheap   bool
}

type outcomes struct {
	metered, unmetered, unavailable int
	other                           []string
}

func (o *outcomes) total() int { return o.metered + o.unmetered + o.unavailable + len(o.other) }

func (t *tally) record(k tallyKey, r *quota.Reservation, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.m[k]
	if o == nil {
		o = new(outcomes)
		t.m[k] = o
	}
	switch {
	case err == nil && r.Unmetered:
		o.unmetered++
	case err == nil:
		o.metered++
	case errors.Is(err, quota.ErrStoreUnavailable) && !errors.Is(err, quota.ErrExhausted):
		o.unavailable++
	default:
		o.other = append(o.other, err.Error())
	}
}

func (t *tally) get(k tallyKey) outcomes {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o := t.m[k]; o != nil {
		c := *o
		c.other = append([]string(nil), o.other...)
		return c
	}
	return outcomes{}
}

// atLeast reports whether every limiter and cost class has n calls in
// phase p; metered n metered ones.
func (t *tally) atLeast(p int32, n int) bool {
	return t.every(p, func(o outcomes) bool { return o.total() >= n })
}

func (t *tally) metered(p int32, n int) bool {
	return t.every(p, func(o outcomes) bool { return o.metered >= n })
}

func (t *tally) every(p int32, ok func(outcomes) bool) bool {
	for _, lim := range []string{"closed", "open"} {
		for _, cheap := range []bool{true, false} {
			if !ok(t.get(tallyKey{lim, p, cheap})) {
				return false
			}
		}
	}
	return true
}

// TestRedisOutage charges continuously from goroutines through two limiters
// sharing one store on a server of the test's own (redistest.Server): one fails closed
// (the default), one fails open for charges of up to 10 units. Mid-run the
// server hangs (Instance.Pause: SIGSTOP of a redis-server, or the fallback's
// proxy holding every byte), resumes, is killed, and is restarted:
//
//   - hung: every call returns, refused with ErrStoreUnavailable, by its
//     context deadline (500ms): the client's socket timeouts are 30s, so
//     nothing else could end the calls before the wait gives up (20s);
//   - killed: the fail-closed limiter refuses everything with
//     ErrStoreUnavailable; the fail-open one admits the cheap calls
//     unmetered, counts (Limiter.Unmetered) and logs each, and refuses the
//     expensive ones;
//   - restarted: the same limiters, store and client meter again, with no
//     restart of anything on the client side: every worker's calls are
//     metered again (go-redis may take a moment to let go of its last dial
//     error, so a few calls right after the restart may still be refused
//     as unavailable, never with another error);
//   - afterwards no goroutine is left behind.
//
// It runs with a plain client (the store enforces the deadline itself) and
// with a client that honours contexts (ContextTimeoutEnabled).
func TestRedisOutage(t *testing.T) {
	for _, ctxTimeout := range []bool{false, true} {
		name := "store-enforces-deadline"
		if ctxTimeout {
			name = "client-honours-context"
		}
		t.Run(name, func(t *testing.T) { redisOutage(t, ctxTimeout) })
	}
}

func redisOutage(t *testing.T, ctxTimeout bool) {
	const callTimeout = 500 * time.Millisecond
	srv := redistest.Server(t)
	before := runtime.NumGoroutine()

	client := redis.NewClient(&redis.Options{
		Addr:                  srv.Addr(),
		DialTimeout:           250 * time.Millisecond,
		ReadTimeout:           30 * time.Second, // only the context may end a call to a hung server
		WriteTimeout:          30 * time.Second,
		PoolTimeout:           time.Second,
		MaxRetries:            -1,
		DialerRetries:         1,
		ContextTimeoutEnabled: ctxTimeout,
	})
	store := redisstore.New(client, redisstore.WithPrefix(redistest.Prefix(t)))
	budgets := []quota.Budget{{Name: "units", Limit: 1 << 40, Window: quota.Sliding(24 * time.Hour)}}
	var logs testkit.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	// The restart below loses every key (no persistence): the limiters find
	// that loss (counted below) but trust the store, because this test is
	// about availability; the default reaction to a loss (budgets count as
	// spent) is tested in loss_test.go.
	closed, err := quota.New(store, "youtube", budgets, quota.WithLogger(logger), quota.WithStoreLoss(quota.TrustStore))
	if err != nil {
		t.Fatal(err)
	}
	open, err := quota.New(store, "youtube", budgets, quota.FailOpen(10), quota.WithLogger(logger), quota.WithStoreLoss(quota.TrustStore))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "AIzaSy-outage-key", Label: "outage"}

	var phase atomic.Int32
	results := &tally{m: map[tallyKey]*outcomes{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range []struct {
		name string
		l    *quota.Limiter
	}{{"closed", closed}, {"open", open}, {"closed", closed}, {"open", open}, {"closed", closed}, {"open", open}} {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				cost := int64(5) // cheap: under the fail-open threshold
				if i%2 == 1 {
					cost = 50
				}
				p := phase.Load()
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				r, err := w.l.Take(ctx, cred, quota.Units("units", cost))
				cancel()
				if phase.Load() != p {
					p = phaseChange
				}
				results.record(tallyKey{w.name, p, cost <= 10}, r, err)
			}
		})
	}
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer halt()

	within := 20 * time.Second
	waitFor(t, within, "metered calls while the server is up", func() bool { return results.metered(phaseUp, 5) })

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	phase.Store(phaseHung)
	waitFor(t, within, "calls to return while the server is hung (their context deadline must end them)",
		func() bool { return results.atLeast(phaseHung, 2) })
	phase.Store(phaseResumed)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, within, "metered calls after the server resumed", func() bool { return results.metered(phaseResumed, 5) })

	srv.Kill()
	phase.Store(phaseDown)
	waitFor(t, within, "calls while the server is down", func() bool { return results.atLeast(phaseDown, 5) })

	phase.Store(phaseRestart)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*quota.Limiter{closed, open} {
		waitFor(t, within, "a metered Take after the restart", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			r, err := l.Take(ctx, cred, quota.Units("units", 50))
			return err == nil && !r.Unmetered
		})
	}
	phase.Store(phaseRecovered)
	waitFor(t, within, "every worker's calls to be metered again after the restart", func() bool { return results.metered(phaseRecovered, 10) })
	halt()
	if n := closed.StoreLosses() + open.StoreLosses(); n == 0 {
		t.Error("the restart without persistence lost every key, and no limiter found the loss")
	}

	var unmetered int
	for p := range phases {
		for _, lim := range []string{"closed", "open"} {
			for _, cheap := range []bool{true, false} {
				o := results.get(tallyKey{lim, p, cheap})
				unmetered += o.unmetered
				what := fmt.Sprintf("%s limiter, %s calls, server %s", lim, map[bool]string{true: "cheap", false: "expensive"}[cheap], phaseNames[p])
				t.Logf("%s: %d metered, %d unmetered, %d refused as unavailable, %d other errors",
					what, o.metered, o.unmetered, o.unavailable, len(o.other))
				if len(o.other) > 0 {
					t.Errorf("%s: %d calls failed with an error that is not ErrStoreUnavailable, e.g. %s", what, len(o.other), o.other[0])
				}
				// Up, resumed and recovered: every call metered or, if
				// the machine is slow, refused as unavailable at its
				// deadline (checked above: no other error); the waits
				// above saw them metered.
				var want string
				switch {
				case p == phaseHung || p == phaseDown:
					if lim == "open" && cheap {
						if o.unmetered != o.total() {
							want = "every call admitted unmetered"
						}
					} else if o.unavailable != o.total() {
						want = "every call refused with ErrStoreUnavailable"
					}
				}
				if want != "" {
					t.Errorf("%s: want %s; got %d metered, %d unmetered, %d unavailable", what, want, o.metered, o.unmetered, o.unavailable)
				}
			}
		}
	}
	if closed.Unmetered() != 0 || open.Unmetered() != uint64(unmetered) || unmetered == 0 {
		t.Errorf("Unmetered(): fail-closed %d (want 0), fail-open %d (want %d, the unmetered reservations callers got)",
			closed.Unmetered(), open.Unmetered(), unmetered)
	}
	if n := bytes.Count(logs.Bytes(), []byte(`"level":"WARN"`)); n != unmetered {
		t.Errorf("%d unmetered decisions logged, want one per decision (%d)", n, unmetered)
	}
	if bytes.Contains(logs.Bytes(), []byte(cred.Secret)) {
		t.Errorf("the log holds the raw credential")
	}

	_ = client.Close()
	settleGoroutines(t, before)
}

// errorStat returns Redis's count of replies with the error code (INFO
// errorstats, e.g. NOSCRIPT).
func errorStat(t *testing.T, c *redis.Client, code string) int {
	t.Helper()
	info, err := c.Info(context.Background(), "errorstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "errorstat_"+code+":count="); ok {
			n, err := strconv.Atoi(strings.SplitN(v, ",", 2)[0])
			if err != nil {
				t.Fatalf("INFO errorstats: %q: %v", line, err)
			}
			return n
		}
	}
	return 0
}

// TestScriptFlushMidRun: goroutines take, refund and read usage while
// another goroutine empties Redis's script cache (SCRIPT FLUSH, SYNC and
// ASYNC) over and over. The store reloads what it loses (EVALSHA gets
// NOSCRIPT, then EVAL), so no caller sees an error other than
// ErrExhausted, and the accounting stays exact: a script that failed with
// NOSCRIPT never ran, so nothing is charged twice or lost.
//
// The client's count of NOSCRIPT replies (a go-redis hook) proves the
// flushes did land between a script's load and its next use; on a
// redis-server, Redis's own count (INFO errorstats) must match it.
func TestScriptFlushMidRun(t *testing.T) {
	srv := redistest.Server(t)
	client, admin := srv.Client(t), srv.Client(t)
	seen := new(noscriptCounter)
	client.AddHook(redistest.Hook{Process: seen.process, Pipeline: seen.pipeline})
	store := redisstore.New(client, redisstore.WithPrefix(redistest.Prefix(t)))
	budgets := overspend.Budgets(30000, 5000)
	l, err := quota.New(store, "youtube", budgets, quota.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	// take is only charged; churn is charged and refunded, so its usage
	// goes down as well as up.
	take := quota.Credential{Secret: "AIzaSy-flush-take", Label: "take"}
	churn := quota.Credential{Secret: "AIzaSy-flush-churn", Label: "churn"}

	done := make(chan struct{})
	var flushes atomic.Int64
	flusherDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				flusherDone <- nil
				return
			default:
			}
			mode := "SYNC"
			if i%2 == 1 {
				mode = "ASYNC"
			}
			if err := admin.Do(context.Background(), "SCRIPT", "FLUSH", mode).Err(); err != nil {
				flusherDone <- err
				return
			}
			flushes.Add(1)
		}
	}()

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var mu sync.Mutex
	var all overspend.Spend
	var churnUnits, churnRefunded int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			var mine overspend.Spend
			var cu, cr int64
			fail := func(op string, err error) { mine.Errors = append(mine.Errors, op+": "+err.Error()) }
			ctx := context.Background()
			for i := range 150 {
				cost := rng.Int64N(100) + 1
				_, err := l.Take(ctx, take, overspend.Charge(cost))
				var ee *quota.ExhaustedError
				switch {
				case err == nil:
					mine.Accepted = append(mine.Accepted, cost)
				case errors.As(err, &ee):
					mine.Refused = append(mine.Refused, overspend.Refusal{Cost: cost, Budget: ee.Budget})
				default:
					fail("take", err)
				}
				if i%3 != 0 {
					continue
				}
				r, err := l.Take(ctx, churn, quota.Units("units", cost))
				if err != nil {
					fail("take churn", err)
					continue
				}
				cu += cost
				if i%2 == 0 {
					if err := l.Refund(ctx, r); err != nil {
						fail("refund", err)
					} else {
						cr += cost
					}
				}
				if _, err := l.Status(ctx, churn); err != nil {
					fail("status", err)
				}
				if _, err := l.Entries(ctx, churn, "units"); err != nil {
					fail("entries", err)
				}
			}
			mu.Lock()
			all.Add(mine)
			churnUnits += cu
			churnRefunded += cr
			mu.Unlock()
		})
	}
	wg.Wait()
	close(done)
	if err := <-flusherDone; err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	for i, e := range all.Errors {
		if i == 5 {
			t.Errorf("... %d errors in all", len(all.Errors))
			break
		}
		t.Errorf("a caller saw an error while scripts were flushed: %s", e)
	}
	noscript := int(seen.n.Load())
	t.Logf("%d flushes; the client got NOSCRIPT %d times; %d charges granted, %d refused (server: %s)", flushes.Load(), noscript, len(all.Accepted), len(all.Refused), srv.Kind())
	if srv.IsReal() {
		if n := errorStat(t, admin, "NOSCRIPT"); n != noscript {
			t.Errorf("Redis counted %d NOSCRIPT replies (INFO errorstats), the client saw %d", n, noscript)
		}
	}
	if flushes.Load() == 0 || noscript == 0 {
		t.Fatalf("the flushes never made a script go missing (%d flushes, %d NOSCRIPT replies): the test proved nothing", flushes.Load(), noscript)
	}
	if len(all.Refused) == 0 {
		t.Fatalf("nothing was refused: the run never reached the limit")
	}
	for _, p := range overspend.Check(budgets, overspend.Used(t, l, take), all) {
		t.Error(p)
	}
	if got := overspend.Used(t, l, churn)["units"]; got != churnUnits-churnRefunded {
		t.Errorf("churn credential: store says %d units used; callers were granted %d and refunded %d", got, churnUnits, churnRefunded)
	}
}

// noscriptCounter is a go-redis hook that counts the NOSCRIPT replies its
// client gets.
type noscriptCounter struct{ n atomic.Int64 }

func (h *noscriptCounter) count(err error) {
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		h.n.Add(1)
	}
}

func (h *noscriptCounter) process(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
	err := next(ctx, cmd) // the reply's error; cmd.Err() may not hold it yet
	h.count(err)
	return err
}

func (h *noscriptCounter) pipeline(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
	err := next(ctx, cmds)
	for _, c := range cmds {
		h.count(c.Err())
	}
	return err
}

// waitFor polls cond until it holds or within passes, then fails the test
// naming what it waited for. It waits for processes, servers and goroutines
// to get somewhere; it never stands in for moving a clock.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(within, cond) {
		t.Fatalf("gave up after %v waiting for %s", within, what)
	}
}

// poll reports whether cond held before within passed.
func poll(within time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
	return true
}

// settleGoroutines waits until no more goroutines run than before, and
// fails with every goroutine's stack if some are left over: a leak.
func settleGoroutines(t *testing.T, before int) {
	t.Helper()
	if poll(10*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		return
	}
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	t.Fatalf("goroutine leak: %d running, %d before the test\n%s", runtime.NumGoroutine(), before, buf.String())
}
