package quotactl_test

// An upstream account that other clients also spend. For each
// upstream with a simulator (GitHub, IETF RateLimit, OpenAI, Anthropic,
// Shopify), a job metered by quotactl shares the account with a client
// that is not metered, and the tests check that the meter, learning from
// the upstream's reports alone, never lets the job draw a refusal it could
// have foreseen, never lets the job spend beyond the upstream's limit,
// lets the job spend again at the upstream's reset, and never records
// less than the job itself spent. Time is a testkit.Clock shared by the
// simulator and the limiter: nothing sleeps.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/anthropicsim"
	"github.com/quotactl/quotactl/internal/openaisim"
	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/rlsim"
	"github.com/quotactl/quotactl/internal/shopifysim"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storeurl"
)

// sharedStoreNames are the stores each scenario runs on.
var sharedStoreNames = []string{"memory", "sqlite", "redis"}

// sharedStoreURL returns a fresh store of kind name for t: memory, an SQLite
// file of t's own, or Redis under a prefix of t's own.
func sharedStoreURL(t *testing.T, name string) string {
	switch name {
	case "sqlite":
		return storeurl.SQLiteURL(filepath.Join(t.TempDir(), "quota.db"))
	case "redis":
		_, addr := redistest.Shared(t)
		return "redis://" + addr + "/0?prefix=" + url.QueryEscape(redistest.Prefix(t))
	}
	return "memory:"
}

func sharedStore(t *testing.T, name string) quota.Store { return openStore(t, sharedStoreURL(t, name)) }

func openStore(t *testing.T, u string) quota.Store {
	t.Helper()
	st, err := storeurl.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// refusalCounter is the wire under a metered client: it counts the
// answers the upstream refused for a rate limit (403, 429), and those of
// them the previous answer had foreseen (foresaw, given its headers: the
// meter could have known the call would be refused). A refusal the
// previous answer did not foresee is the one case no client-side meter can
// prevent: another client spent the last units between the two.
type refusalCounter struct {
	base     http.RoundTripper
	foresaw  func(prev http.Header) bool
	refused  atomic.Int64
	foreseen atomic.Int64
	sent     atomic.Int64
	mu       sync.Mutex
	prev     http.Header
}

func (c *refusalCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.sent.Add(1)
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests {
		c.refused.Add(1)
		if c.prev != nil && c.foresaw != nil && c.foresaw(c.prev) {
			c.foreseen.Add(1)
		}
	}
	c.prev = resp.Header.Clone()
	return resp, err
}

// sharedJob is a job metered with a built-in table against a simulator.
type sharedJob struct {
	client *http.Client
	lim    *quota.Limiter
	wire   *refusalCounter
	cred   quota.Credential

	mu      sync.Mutex
	ignored []string // the errors of EventReportIgnored, as observers see them
}

// newSharedJob meters the built-in table api at host, on st, with clock.
func newSharedJob(t *testing.T, st quota.Store, api, host string, cred quota.Credential, clock *testkit.Clock, foresaw func(http.Header) bool, topts ...quota.TransportOption) *sharedJob {
	t.Helper()
	return newSharedJobWith(t, st, api, host, cred, clock, foresaw, nil, topts...)
}

// newSharedJobWith is newSharedJob with limiter options lopts.
func newSharedJobWith(t *testing.T, st quota.Store, api, host string, cred quota.Credential, clock *testkit.Clock, foresaw func(http.Header) bool, lopts []quota.Option, topts ...quota.TransportOption) *sharedJob {
	t.Helper()
	table, err := costs.Builtin(api)
	if err != nil {
		t.Fatal(err)
	}
	if table, err = table.WithHosts(host); err != nil {
		t.Fatal(err)
	}
	j := &sharedJob{cred: cred, wire: &refusalCounter{base: http.DefaultTransport, foresaw: foresaw}}
	obs := quota.ObserverFunc(func(e quota.Event) {
		if e.Kind == quota.EventReportIgnored {
			j.mu.Lock()
			j.ignored = append(j.ignored, e.Err.Error())
			j.mu.Unlock()
		}
	})
	j.lim, err = quota.New(st, table.API, table.Budgets, append([]quota.Option{quota.WithClock(clock.Now), quota.WithObserver(obs)}, lopts...)...)
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]quota.TransportOption{quota.WithCredential(cred), quota.WithBase(j.wire),
		quota.WithRetryClock(clock, clock.NewTimer)}, topts...)
	j.client = &http.Client{Transport: quota.NewTransport(j.lim, table, opts...)}
	return j
}

func (j *sharedJob) used(t *testing.T, budget string) int64 {
	t.Helper()
	return usedOf(t, j.lim, j.cred)[budget]
}

// do sends req through the job's client; it returns the status, or the
// local refusal.
func (j *sharedJob) do(t *testing.T, req *http.Request) (int, *quota.ExhaustedError) {
	t.Helper()
	resp, err := j.client.Do(req)
	var ex *quota.ExhaustedError
	if errors.As(err, &ex) {
		return 0, ex
	}
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// --- GitHub ---

// ietfForesaw: the previous answer's RateLimit field said a policy had
// r=0 left for t > 0 seconds.
func ietfForesaw(h http.Header) bool {
	for _, item := range strings.Split(h.Get("RateLimit"), ",") {
		if strings.Contains(item, ";r=0;") && !strings.Contains(item, ";t=0;") {
			return true
		}
	}
	return false
}

// TestSharedIETFKey: a job metered with the built-in
// ratelimit-headers table shares its API key with an unmetered client, on
// an upstream with a per-minute and a daily policy; the job never draws a
// 429 its last answer foresaw, and spends again once the minute resets.
func TestSharedIETFKey(t *testing.T) {
	for _, sc := range []struct {
		name          string
		before, other int64 // the other client's spend before the job, and after each job call
	}{
		{"concurrent", 0, 1},
		{"before", 8, 0},
		{"before-and-during", 5, 1},
	} {
		for _, name := range sharedStoreNames {
			t.Run(sc.name+"/"+name, func(t *testing.T) {
				clock := testkit.NewClock(t0)
				sim, err := rlsim.New([]rlsim.Policy{{Name: "burst", Quota: 10, Window: time.Minute}, {Name: "daily", Quota: 1000, Window: 24 * time.Hour}},
					rlsim.WithClock(clock.Now))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(sim.Close)
				host := strings.TrimPrefix(sim.URL(), "http://")
				j := newSharedJob(t, sharedStore(t, name), "ratelimit-headers", host, quota.Credential{Secret: "key-1"}, clock, ietfForesaw)
				get := func() (int, *quota.ExhaustedError) {
					req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, sim.URL()+"/items", nil)
					req.Header.Set("Authorization", "Bearer key-1")
					return j.do(t, req)
				}
				if sc.before > 0 && !sim.Spend("key-1", sc.before) {
					t.Fatal("the other client could not spend")
				}
				for minute := range 5 {
					calls := 0
					for ; calls < 20; calls++ {
						code, ex := get()
						if ex != nil {
							break
						}
						if code != http.StatusOK {
							t.Fatalf("minute %d, call %d: %d", minute, calls, code)
						}
						if sc.other > 0 {
							sim.Spend("key-1", sc.other)
						}
						clock.Add(time.Second)
					}
					if calls == 0 && minute > 0 {
						t.Fatalf("minute %d: no call at all (store %d, upstream %d)", minute, j.used(t, "requests"), sim.Used("key-1", "burst"))
					}
					if calls == 20 {
						t.Fatalf("minute %d: never stopped", minute)
					}
					clock.Add(time.Minute) // past the burst policy's reset
				}
				if j.wire.foreseen.Load() != 0 || j.wire.refused.Load() > 5 {
					t.Fatalf("%d 429s, %d foreseen", j.wire.refused.Load(), j.wire.foreseen.Load())
				}
				t.Logf("429s not foreseen: %d; daily used %d", j.wire.refused.Load(), sim.Used("key-1", "daily"))
			})
		}
	}
}

// TestSharedIETFTightestPolicyLimit: an upstream with a per-minute policy
// of 10 and a daily one of 1,000, both reported on the built-in table's
// one budget; the limit the meter learns is the minute's, whichever
// policy the response lists last, so concurrent calls past the minute's
// 10 are refused locally, not by the upstream.
func TestSharedIETFTightestPolicyLimit(t *testing.T) {
	for _, order := range [][]rlsim.Policy{
		{{Name: "burst", Quota: 10, Window: time.Minute}, {Name: "daily", Quota: 1000, Window: 24 * time.Hour}},
		{{Name: "daily", Quota: 1000, Window: 24 * time.Hour}, {Name: "burst", Quota: 10, Window: time.Minute}},
	} {
		t.Run(order[0].Name+"-first", func(t *testing.T) {
			clock := testkit.NewClock(t0)
			sim, err := rlsim.New(order, rlsim.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sim.Close)
			j := newSharedJob(t, quota.NewMemoryStore(), "ratelimit-headers", strings.TrimPrefix(sim.URL(), "http://"), quota.Credential{Secret: "key-1"}, clock, ietfForesaw)
			get := func() (int, *quota.ExhaustedError) {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, sim.URL()+"/items", nil)
				req.Header.Set("Authorization", "Bearer key-1")
				return j.do(t, req)
			}
			if code, ex := get(); code != http.StatusOK || ex != nil {
				t.Fatalf("first call: %d %v", code, ex)
			}
			st, err := j.lim.Status(t.Context(), j.cred)
			if err != nil {
				t.Fatal(err)
			}
			if st[0].Limit != 10 {
				t.Fatalf("limit in force %d; want the minute policy's 10", st[0].Limit)
			}
			// nine calls at once: the minute has nine left, the meter
			// admits no more
			var wg sync.WaitGroup
			for range 12 {
				wg.Go(func() { get() })
			}
			wg.Wait()
			if n := j.wire.refused.Load(); n != 0 {
				t.Fatalf("the upstream refused %d calls", n)
			}
			if used := sim.Used("key-1", "burst"); used != 10 {
				t.Fatalf("the minute's policy counts %d; want 10", used)
			}
		})
	}
}

// --- OpenAI and Anthropic ---

// llmCall sends one chat (OpenAI) or messages (Anthropic) call with key
// through client (the job's metered one, or an unmetered one).
func llmCall(t *testing.T, client *http.Client, anthropic bool, base, key string, maxTokens int) (*http.Response, error) {
	t.Helper()
	resp, err := client.Do(llmRequest(t, anthropic, base, key, maxTokens))
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// llmRequest is the call llmCall sends.
func llmRequest(t *testing.T, anthropic bool, base, key string, maxTokens int) *http.Request {
	t.Helper()
	msgs := []map[string]string{{"role": "user", "content": "Summarize order 1042 in one line, with its items and their prices."}}
	path := "/v1/chat/completions"
	body := map[string]any{"model": "gpt-4.1-mini", "max_tokens": maxTokens, "messages": msgs}
	if anthropic {
		path = "/v1/messages"
		body["model"] = "claude-sonnet-4-5"
	}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path, bytes.NewReader(b))
	if anthropic {
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req
}

// llmForesaw: the previous answer (OpenAI's or Anthropic's) left fewer requests than one or
// fewer tokens than the job's output ceiling alone (maxTokens), with a
// reset still ahead (the clock does not move between the job's calls).
func llmForesaw(prefix string, names [2]string, maxTokens int64) func(http.Header) bool {
	return func(h http.Header) bool {
		if h.Get(prefix+names[0]) == "0" {
			return true
		}
		n, err := strconv.ParseInt(h.Get(prefix+names[1]), 10, 64)
		return err == nil && n < maxTokens
	}
}

// TestSharedLLMAccount: a job metered with the built-in openai or
// anthropic table shares the project (organization) with another key's
// client, unmetered, that spends concurrently or before the job starts;
// the job is never refused by a 429 its previous answer foresaw, and when
// the other client stops, the job spends again once the minute refills.
func TestSharedLLMAccount(t *testing.T) {
	const maxTokens = 200
	for _, up := range []string{"openai", "anthropic"} {
		for _, sc := range []struct {
			name          string
			before, other int // the other client's calls before the job, and after each job call
		}{
			{"concurrent", 0, 1},
			{"before", 12, 0},
			{"before-and-during", 8, 1},
		} {
			for _, name := range sharedStoreNames {
				t.Run(up+"/"+sc.name+"/"+name, func(t *testing.T) {
					clock := testkit.NewClock(t0)
					var base, host string
					var foresaw func(http.Header) bool
					var served func() int64
					if up == "openai" {
						sim := openaisim.New(openaisim.WithProject("proj", "sk-job", "sk-other"), openaisim.WithLimits(30, 4000), openaisim.WithClock(clock.Now))
						t.Cleanup(sim.Close)
						base, host, served = sim.URL(), sim.Host(), sim.RateLimited
						foresaw = llmForesaw("X-Ratelimit-Remaining-", [2]string{"Requests", "Tokens"}, maxTokens)
					} else {
						sim := anthropicsim.New(anthropicsim.WithOrganization("org", "sk-job", "sk-other"), anthropicsim.WithLimits(30, 4000, 2000), anthropicsim.WithClock(clock.Now))
						t.Cleanup(sim.Close)
						base, host, served = sim.URL(), sim.Host(), sim.RateLimited
						foresaw = llmForesaw("Anthropic-Ratelimit-", [2]string{"Requests-Remaining", "Output-Tokens-Remaining"}, maxTokens)
					}
					owner := map[string]string{"openai": "proj", "anthropic": "org"}[up]
					j := newSharedJob(t, sharedStore(t, name), up, host, quota.Credential{Secret: "sk-job", Owner: owner}, clock, foresaw)
					other := func() {
						resp, err := llmCall(t, http.DefaultClient, up == "anthropic", base, "sk-other", maxTokens)
						if err != nil {
							t.Fatal(err)
						}
						_ = resp
					}
					for range sc.before {
						other()
					}
					for round := range 4 {
						calls := 0
						for ; calls < 40; calls++ {
							_, err := llmCall(t, j.client, up == "anthropic", base, "sk-job", maxTokens)
							var ex *quota.ExhaustedError
							if errors.As(err, &ex) {
								clock.Add(ex.RetryAfter)
								break
							}
							if err != nil {
								t.Fatal(err)
							}
							if round == 0 {
								for range sc.other {
									other()
								}
							}
						}
						if calls == 40 {
							t.Fatalf("round %d: never stopped", round)
						}
						if calls == 0 && round > 0 {
							t.Fatalf("round %d: nothing sent after the wait", round)
						}
					}
					if j.wire.foreseen.Load() != 0 {
						t.Fatalf("%d 429s, %d foreseen (the simulator sent %d)", j.wire.refused.Load(), j.wire.foreseen.Load(), served())
					}
					t.Logf("429s to the job not foreseen: %d", j.wire.refused.Load())
				})
			}
		}
	}
}

// TestSharedLLMAccountWithLeases: as TestSharedLLMAccount, with the job's
// limiter taking units in leases (WithLeases): a report trues the store up
// while the job holds a lease whose block the store counts whole, although
// the upstream has not seen its unspent units. The job must still never
// send a call its previous answer said could not fit (before the fix the
// true-up took those units for units the upstream counted, and the job
// spent them into a 429).
func TestSharedLLMAccountWithLeases(t *testing.T) {
	const maxTokens = 200
	for _, up := range []string{"openai", "anthropic"} {
		for _, sc := range []struct {
			name          string
			before, other int // the other client's calls before the job, and after each job call
		}{
			{"before", 60, 0},
			{"before-and-during", 40, 1},
		} {
			for _, name := range sharedStoreNames {
				t.Run(up+"/"+sc.name+"/"+name, func(t *testing.T) {
					clock := testkit.NewClock(t0)
					anthropic := up == "anthropic"
					var base, host, owner string
					var remaining [][2]string // header, budget: what the upstream says is left
					if anthropic {
						sim := anthropicsim.New(anthropicsim.WithOrganization("org", "sk-job", "sk-other"), anthropicsim.WithLimits(1000, 60000, 12000), anthropicsim.WithClock(clock.Now))
						t.Cleanup(sim.Close)
						base, host, owner = sim.URL(), sim.Host(), "org"
						remaining = [][2]string{{"Anthropic-Ratelimit-Requests-Remaining", "requests"},
							{"Anthropic-Ratelimit-Input-Tokens-Remaining", "input_tokens"}, {"Anthropic-Ratelimit-Output-Tokens-Remaining", "output_tokens"}}
					} else {
						sim := openaisim.New(openaisim.WithProject("proj", "sk-job", "sk-other"), openaisim.WithLimits(1000, 30000), openaisim.WithClock(clock.Now))
						t.Cleanup(sim.Close)
						base, host, owner = sim.URL(), sim.Host(), "proj"
						remaining = [][2]string{{"X-Ratelimit-Remaining-Requests", "requests"}, {"X-Ratelimit-Remaining-Tokens", "tokens"}}
					}
					table, err := costs.Builtin(up)
					if err == nil {
						table, err = table.WithHosts(host)
					}
					if err != nil {
						t.Fatal(err)
					}
					est, err := table.EstimateCall(llmRequest(t, anthropic, base, "sk-job", maxTokens))
					if err != nil {
						t.Fatal(err)
					}
					// foreseen: the previous answer left less than the job's call
					// charges in some budget (the meter's estimate is the
					// upstream's count: prompt and output ceiling)
					foresaw := func(h http.Header) bool {
						for _, r := range remaining {
							n, err := strconv.ParseInt(h.Get(r[0]), 10, 64)
							if err == nil && n < est.Charge.Units[r[1]] {
								return true
							}
						}
						return false
					}
					j := newSharedJobWith(t, sharedStore(t, name), up, host, quota.Credential{Secret: "sk-job", Owner: owner}, clock, foresaw,
						[]quota.Option{quota.WithLeases(quota.LeaseOptions{MaxTime: 5 * time.Second})})
					other := func() {
						if _, err := llmCall(t, http.DefaultClient, anthropic, base, "sk-other", maxTokens); err != nil {
							t.Fatal(err)
						}
					}
					for range sc.before {
						other()
					}
					calls := 0
					for ; calls < 200; calls++ {
						_, err := llmCall(t, j.client, anthropic, base, "sk-job", maxTokens)
						var ex *quota.ExhaustedError
						if errors.As(err, &ex) {
							break
						}
						if err != nil {
							t.Fatal(err)
						}
						for range sc.other {
							other()
						}
					}
					if calls == 0 || calls == 200 {
						t.Fatalf("%d job calls before a refusal", calls)
					}
					if j.wire.foreseen.Load() != 0 {
						t.Fatalf("%d 429s to the job, %d foreseen", j.wire.refused.Load(), j.wire.foreseen.Load())
					}
				})
			}
		}
	}
}

// --- Shopify ---

// TestSharedShopifyShop: another app spends the shop's bucket while
// the job queries (concurrently), or drains most of it before; the job
// learns it from throttleStatus, stops on a local refusal rather than a
// THROTTLED its last answer foresaw, and queries again once the bucket has
// restored.
func TestSharedShopifyShop(t *testing.T) {
	for _, sc := range []struct {
		name          string
		before, other int64 // the other app's points before the job, and after each job query
	}{
		{"concurrent", 0, 150},
		{"before", 1900, 0},
		{"before-and-during", 1200, 100},
	} {
		for _, name := range sharedStoreNames {
			t.Run(sc.name+"/"+name, func(t *testing.T) {
				clock := testkit.NewClock(t0)
				sim := shopifysim.New(shopifysim.WithShop("shop", "shpat", "other"), shopifysim.WithClock(clock.Now), shopifysim.WithItems(250))
				t.Cleanup(sim.Close)
				spendOther(t, sim, sc.before)
				j := newSharedJob(t, sharedStore(t, name), "shopify-admin", sim.Host(), quota.Credential{Secret: "shpat"}, clock, nil)
				for round := range 3 {
					calls := 0
					for ; calls < 400; calls++ {
						throttled := sim.Throttled()
						avail := sim.Available("shop")
						_, err := graphql(t, j.client, sim.URL(), "shpat", 12)
						var ex *quota.ExhaustedError
						if errors.As(err, &ex) {
							if sim.Throttled() != throttled && avail >= 12 {
								t.Logf("round %d: THROTTLED with %d available before the query", round, avail)
							}
							if sim.Throttled() != throttled && avail < 12 {
								t.Errorf("round %d, query %d: THROTTLED; the bucket held %d before it", round, calls, avail)
							}
							clock.Add(ex.RetryAfter)
							break
						}
						if err != nil {
							t.Fatal(err)
						}
						if round == 0 && sc.other > 0 && sim.Available("shop") > sc.other+50 {
							spendOther(t, sim, sc.other)
						}
					}
					if calls == 400 {
						t.Fatalf("round %d: never stopped", round)
					}
					if calls == 0 && round > 0 {
						t.Fatalf("round %d: nothing sent after the wait", round)
					}
				}
				t.Logf("THROTTLED: %d", sim.Throttled())
			})
		}
	}
}

// --- two processes ---

// TestSharedLLMRefundKeepsTrueUp: another key of the project (organization)
// spent before the job; each job call's response reports the upstream's
// count, which includes the other client's spend and the call at what it
// really cost, and the store is trued up to it. The call then settles,
// giving back its estimate's unspent rest: the store must still count at
// least what the upstream reported (before the fix, it counted that rest
// less, so the meter admitted a call the last report said could not fit).
// The clock stands still: neither side's window moves.
func TestSharedLLMRefundKeepsTrueUp(t *testing.T) {
	const maxTokens = 200
	for _, up := range []string{"openai", "anthropic"} {
		for _, name := range sharedStoreNames {
			t.Run(up+"/"+name, func(t *testing.T) {
				clock := testkit.NewClock(t0)
				var base, host, owner, budget, prefix string
				if up == "openai" {
					sim := openaisim.New(openaisim.WithProject("proj", "sk-job", "sk-other"), openaisim.WithLimits(100, 6000), openaisim.WithClock(clock.Now))
					t.Cleanup(sim.Close)
					base, host, owner, budget, prefix = sim.URL(), sim.Host(), "proj", "tokens", "X-Ratelimit-%s-Tokens"
				} else {
					sim := anthropicsim.New(anthropicsim.WithOrganization("org", "sk-job", "sk-other"), anthropicsim.WithLimits(100, 30000, 3000), anthropicsim.WithClock(clock.Now))
					t.Cleanup(sim.Close)
					base, host, owner, budget, prefix = sim.URL(), sim.Host(), "org", "output_tokens", "Anthropic-Ratelimit-Output-Tokens-%s"
				}
				j := newSharedJob(t, sharedStore(t, name), up, host, quota.Credential{Secret: "sk-job", Owner: owner}, clock, nil)
				for range 4 {
					if _, err := llmCall(t, http.DefaultClient, up == "anthropic", base, "sk-other", maxTokens); err != nil {
						t.Fatal(err)
					}
				}
				upstreamUsed := func() int64 {
					j.wire.mu.Lock()
					defer j.wire.mu.Unlock()
					limit, err1 := strconv.ParseInt(j.wire.prev.Get(fmt.Sprintf(prefix, "Limit")), 10, 64)
					rem, err2 := strconv.ParseInt(j.wire.prev.Get(fmt.Sprintf(prefix, "Remaining")), 10, 64)
					if err1 != nil || err2 != nil {
						t.Fatalf("the last answer's %s headers: %v, %v", budget, err1, err2)
					}
					return limit - rem
				}
				calls := 0
				for ; calls < 40; calls++ {
					resp, err := llmCall(t, j.client, up == "anthropic", base, "sk-job", maxTokens)
					var ex *quota.ExhaustedError
					if errors.As(err, &ex) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("call %d: %d from the upstream", calls, resp.StatusCode)
					}
					if got, want := j.used(t, budget), upstreamUsed(); got < want {
						t.Fatalf("call %d: the store counts %d %s, the upstream's report %d", calls, got, budget, want)
					}
				}
				if calls < 3 || calls == 40 {
					t.Fatalf("%d calls before a local refusal", calls)
				}
				if n := j.wire.refused.Load(); n != 0 {
					t.Fatalf("%d refusals from the upstream", n)
				}
			})
		}
	}
}

// TestSharedShopifyRefundKeepsTrueUp: as TestSharedLLMRefundKeepsTrueUp,
// for Shopify: a query's requested cost is charged, its throttleStatus
// (after the actual cost, another app's spend included) trues the store
// up, and the refund of the requested cost's unspent rest must not take
// the store below what the bucket had spent.
func TestSharedShopifyRefundKeepsTrueUp(t *testing.T) {
	for _, name := range sharedStoreNames {
		t.Run(name, func(t *testing.T) {
			clock := testkit.NewClock(t0)
			sim := shopifysim.New(shopifysim.WithShop("shop", "shpat", "other"), shopifysim.WithClock(clock.Now), shopifysim.WithItems(250))
			t.Cleanup(sim.Close)
			spendOther(t, sim, 1200)
			j := newSharedJob(t, sharedStore(t, name), "shopify-admin", sim.Host(), quota.Credential{Secret: "shpat"}, clock, nil)
			for call := range 5 {
				resp, err := graphql(t, j.client, sim.URL(), "shpat", 60)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if got, want := j.used(t, "points"), 2000-sim.Available("shop"); got < want {
					t.Fatalf("query %d: the store counts %d points, the bucket has spent %d", call, got, want)
				}
			}
		})
	}
}
