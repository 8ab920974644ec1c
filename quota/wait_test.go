package quota_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

var waitCred = quota.Credential{Secret: "AIza-wait-test", Label: "wait"}

// waitLimiter returns a limiter on a MemoryStore, on the store's clock (in
// a synctest bubble, the bubble's fake clock), with one sliding budget.
func waitLimiter(t *testing.T, limit int64, win time.Duration) *quota.Limiter {
	t.Helper()
	l, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{{Name: "units", Limit: limit, Window: quota.Sliding(win)}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// sleep moves the bubble's fake clock by d (no wall time passes).
func sleep(d time.Duration) { <-time.NewTimer(d).C }

func usedUnits(t *testing.T, l *quota.Limiter) int64 {
	t.Helper()
	us, err := l.Status(context.Background(), waitCred)
	if err != nil {
		t.Fatal(err)
	}
	return us[0].Used
}

// TestWaitOrder: waiters queued on a full budget are admitted first come,
// first served, each at the exact instant the log frees enough units for
// it, with no other wake-up in between.
func TestWaitOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := waitLimiter(t, 10, time.Minute)
		ctx := context.Background()
		t0 := time.Now()
		// Ten 1-unit entries, one a second: they leave the window at
		// t0+60s, 61s, ... 69s.
		for i := range 10 {
			if _, err := l.Take(ctx, waitCred, quota.Units("units", 1)); err != nil {
				t.Fatal(err)
			}
			if i < 9 {
				sleep(time.Second)
			}
		}
		var mu sync.Mutex
		admitted := map[string]time.Duration{}
		var order []string
		var wg sync.WaitGroup
		for _, w := range []struct {
			name string
			cost int64
		}{{"a", 3}, {"b", 2}, {"c", 5}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := l.Wait(ctx, waitCred, quota.Units("units", w.cost)); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				admitted[w.name] = time.Since(t0)
				order = append(order, w.name)
				mu.Unlock()
			}()
			synctest.Wait() // queued in this order
		}
		wg.Wait()
		// a needs the entries of 0s, 1s and 2s gone: 62s; b then those of
		// 3s and 4s: 64s; c the last five: 69s.
		want := map[string]time.Duration{"a": 62 * time.Second, "b": 64 * time.Second, "c": 69 * time.Second}
		for name, at := range want {
			if admitted[name] != at {
				t.Errorf("%s admitted at %v, want %v (all: %v)", name, admitted[name], at, admitted)
			}
		}
		if len(order) != 3 || order[0] != "a" || order[1] != "b" || order[2] != "c" {
			t.Errorf("admitted in order %v, want a b c", order)
		}
		if u := usedUnits(t, l); u != 10 {
			t.Errorf("used %d, want 10", u)
		}
	})
}

// TestWaitNotStarved: a 50-unit write waiting on a full budget is admitted
// as soon as the log frees 50 units, although a stream of 1-unit reads
// arriving after it could each have fitted sooner; they queue behind it.
func TestWaitNotStarved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := waitLimiter(t, 100, time.Minute)
		ctx := context.Background()
		t0 := time.Now()
		for i := range 100 { // one unit every 500ms: they leave at 60s, 60.5s, ... 109.5s
			if _, err := l.Take(ctx, waitCred, quota.Units("units", 1)); err != nil {
				t.Fatal(err)
			}
			if i < 99 {
				sleep(500 * time.Millisecond)
			}
		}
		var mu sync.Mutex
		var bigAt time.Duration
		var readsBefore int
		reads := 0
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.Wait(ctx, waitCred, quota.Units("units", 50)); err != nil {
				t.Error(err)
			}
			mu.Lock()
			bigAt, readsBefore = time.Since(t0), reads
			mu.Unlock()
		}()
		synctest.Wait()
		// A read every 250ms from 50s to 80s: 120 of them.
		for range 120 {
			sleep(250 * time.Millisecond)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := l.Wait(ctx, waitCred, quota.Units("units", 1)); err != nil {
					t.Error(err)
				}
				mu.Lock()
				reads++
				mu.Unlock()
			}()
		}
		wg.Wait()
		// 50 units free once the entries of 0s to 24.5s have left: 84.5s.
		if bigAt != 84500*time.Millisecond || readsBefore != 0 {
			t.Errorf("the 50-unit charge was admitted at %v after %d reads; want 84.5s, before every read", bigAt, readsBefore)
		}
		if u := usedUnits(t, l); u > 100 {
			t.Errorf("used %d of 100", u)
		}
	})
}

// TestWaitCancel: cancelling ctx returns at once with ctx's error, takes
// nothing, and hands the turn to the next waiter.
func TestWaitCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := waitLimiter(t, 5, time.Minute)
		bg := context.Background()
		t0 := time.Now()
		if _, err := l.Take(bg, waitCred, quota.Units("units", 5)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(bg)
		errc := make(chan error, 1)
		go func() { _, err := l.Wait(ctx, waitCred, quota.Units("units", 5)); errc <- err }()
		synctest.Wait()
		next := make(chan time.Duration, 1)
		go func() {
			if _, err := l.Wait(bg, waitCred, quota.Units("units", 2)); err != nil {
				t.Error(err)
			}
			next <- time.Since(t0)
		}()
		synctest.Wait()
		sleep(10 * time.Second)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Wait after cancel = %v, want context.Canceled", err)
		}
		if d := time.Since(t0); d != 10*time.Second {
			t.Errorf("Wait returned %v after the start, want at once on cancel (10s)", d)
		}
		if u := usedUnits(t, l); u != 5 {
			t.Errorf("used %d after the cancelled wait, want 5: it must take nothing", u)
		}
		if at := <-next; at != time.Minute {
			t.Errorf("the next waiter was admitted at %v, want 1m", at)
		}
		// A context already done takes nothing either.
		if _, err := l.Wait(ctx, waitCred, quota.Units("units", 1)); !errors.Is(err, context.Canceled) {
			t.Errorf("Wait with a done context = %v", err)
		}
		if u := usedUnits(t, l); u != 2 {
			t.Errorf("used %d, want 2", u)
		}
	})
}

// TestWaitErrors: errors other than exhaustion do not wait.
func TestWaitErrors(t *testing.T) {
	l := waitLimiter(t, 5, time.Minute)
	if _, err := l.Wait(context.Background(), waitCred, quota.Units("units", 6)); !errors.Is(err, quota.ErrCostExceedsLimit) {
		t.Errorf("Wait(6 of 5) = %v, want ErrCostExceedsLimit", err)
	}
	if _, err := l.Wait(context.Background(), waitCred, quota.Units("nope", 1)); !errors.Is(err, quota.ErrInvalid) {
		t.Errorf("Wait(unknown budget) = %v, want ErrInvalid", err)
	}
}

// TestTransportWithWait: over real HTTP, a Transport WithWait sends a
// request the budget cannot pay now once it can (the store records the
// two charges a full window apart), and fails at once when capacity
// returns later than maxWait.
func TestTransportWithWait(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	const win = 80 * time.Millisecond
	l := waitLimiter(t, 1, win)
	price := quota.PricerFunc(func(*http.Request) (quota.Charge, error) { return quota.Units("units", 1), nil })
	client := &http.Client{Transport: quota.NewTransport(l, price, quota.WithCredential(waitCred), quota.WithWait(time.Minute))}
	for range 2 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// The second charge waited for the first to leave the window.
	if es, err := l.Entries(context.Background(), waitCred, "units"); err != nil || len(es) != 1 {
		t.Fatalf("entries in the window: %v, %v; want the second charge only", es, err)
	}
	short := &http.Client{Transport: quota.NewTransport(l, price, quota.WithCredential(waitCred), quota.WithWait(time.Millisecond))}
	start := time.Now()
	_, err := short.Get(srv.URL)
	if !errors.Is(err, quota.ErrExhausted) || time.Since(start) > win/2 {
		t.Errorf("with a 1ms wait limit: %v after %v; want ErrExhausted at once", err, time.Since(start))
	}
}

// outageStore is a MemoryStore that cannot be reached: every call a
// charge makes (the budget definitions, the catalog, the decision) fails
// with ErrStoreUnavailable, at once (down: a Redis refusing connections),
// or, when hung, only once the caller's context ends (a server that does
// not answer), wrapping ctx.Err() as redisstore and sqlitestore do.
type outageStore struct {
	*quota.MemoryStore
	hung bool
}

func (s outageStore) fail(ctx context.Context, op string) error {
	if !s.hung {
		return fmt.Errorf("down: %s: %w: dial tcp 127.0.0.1:6379: connection refused", op, quota.ErrStoreUnavailable)
	}
	<-ctx.Done()
	return fmt.Errorf("hung: %s: %w: i/o timeout (%w)", op, quota.ErrStoreUnavailable, ctx.Err())
}

func (s outageStore) Take(ctx context.Context, _ *backend.TakeRequest) (*backend.TakeResult, error) {
	return nil, s.fail(ctx, "take")
}
func (s outageStore) UpdateCredential(ctx context.Context, _ string, _ backend.CredentialUpdate) (quota.CredentialInfo, error) {
	return quota.CredentialInfo{}, s.fail(ctx, "update credential")
}
func (s outageStore) DefineBudgets(ctx context.Context, _ string, _ []quota.Budget) error {
	return s.fail(ctx, "define budgets")
}
func (s outageStore) List(ctx context.Context) ([]quota.APIInfo, error) {
	return nil, s.fail(ctx, "list")
}

// TestWaitFailurePolicyFirstSight: with the store unreachable, Wait for a
// credential the limiter has never seen answers as Take does under each
// failure policy: refused with ErrStoreUnavailable when failing closed or
// over the FailOpen threshold, admitted unmetered (counted and logged) at
// or under it. Its own first registration of the credential failing is
// the outage, whether the store refuses at once or lets the caller's
// deadline pass (in a synctest bubble: no wall time), not an error of its
// own.
func TestWaitFailurePolicyFirstSight(t *testing.T) {
	policies := []struct {
		name      string
		opts      []quota.Option
		cost      int64
		unmetered bool
	}{
		{"fail closed", nil, 1, false},
		{"fail open at the threshold", []quota.Option{quota.FailOpen(5)}, 5, true},
		{"fail open over the threshold", []quota.Option{quota.FailOpen(5)}, 6, false},
	}
	calls := []struct {
		name string
		call func(*quota.Limiter, context.Context, quota.Credential, quota.Charge) (*quota.Reservation, error)
	}{
		{"Take", (*quota.Limiter).Take},
		{"Wait", (*quota.Limiter).Wait},
	}
	for _, hung := range []bool{false, true} {
		for _, p := range policies {
			for _, c := range calls {
				name := map[bool]string{false: "down", true: "hung"}[hung] + "/" + p.name + "/" + c.name
				t.Run(name, func(t *testing.T) {
					run := func(t *testing.T) {
						var logs bytes.Buffer
						opts := append([]quota.Option{quota.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))}, p.opts...)
						l, err := quota.New(outageStore{MemoryStore: quota.NewMemoryStore(), hung: hung}, "api",
							[]quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Minute)}}, opts...)
						if err != nil {
							t.Fatal(err)
						}
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
						defer cancel()
						cred := quota.Credential{Secret: "AIza-never-seen", Label: "first-sight"}
						r, err := c.call(l, ctx, cred, quota.Units("units", p.cost))
						if p.unmetered {
							if err != nil || r == nil || !r.Unmetered {
								t.Fatalf("%s = %+v, %v; want admitted unmetered", c.name, r, err)
							}
							if n := l.Unmetered(); n != 1 {
								t.Errorf("Unmetered() = %d, want 1", n)
							}
							if !strings.Contains(logs.String(), "admitted unmetered") {
								t.Errorf("the unmetered decision was not logged:\n%s", logs.String())
							}
						} else {
							if !errors.Is(err, quota.ErrStoreUnavailable) || r != nil {
								t.Fatalf("%s = %+v, %v; want ErrStoreUnavailable", c.name, r, err)
							}
							if hung && !errors.Is(err, context.DeadlineExceeded) {
								t.Errorf("%s = %v; want it to wrap context.DeadlineExceeded too", c.name, err)
							}
							if n := l.Unmetered(); n != 0 {
								t.Errorf("Unmetered() = %d, want 0", n)
							}
						}
						if err != nil && strings.Contains(err.Error(), cred.Secret) {
							t.Errorf("the error holds the secret: %v", err)
						}
						if strings.Contains(logs.String(), cred.Secret) {
							t.Errorf("the log holds the secret:\n%s", logs.String())
						}
					}
					if hung {
						synctest.Test(t, run)
					} else {
						run(t)
					}
				})
			}
		}
	}
}
