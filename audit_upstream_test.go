package quotactl_test

// Audit: an upstream account that other clients also spend. For each
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
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
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
	"github.com/quotactl/quotactl/internal/ghsim"
	"github.com/quotactl/quotactl/internal/openaisim"
	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/rlsim"
	"github.com/quotactl/quotactl/internal/shopifysim"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storeurl"
)

// auditStoreNames are the stores each scenario runs on.
var auditStoreNames = []string{"memory", "sqlite", "redis"}

// auditStoreURL returns a fresh store of kind name for t: memory, an SQLite
// file of t's own, or Redis under a prefix of t's own.
func auditStoreURL(t *testing.T, name string) string {
	switch name {
	case "sqlite":
		return storeurl.SQLiteURL(filepath.Join(t.TempDir(), "quota.db"))
	case "redis":
		_, addr := redistest.Shared(t)
		return "redis://" + addr + "/0?prefix=" + url.QueryEscape(redistest.Prefix(t))
	}
	return "memory:"
}

func auditStore(t *testing.T, name string) quota.Store { return openStore(t, auditStoreURL(t, name)) }

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

// auditJob is a job metered with a built-in table against a simulator.
type auditJob struct {
	client *http.Client
	lim    *quota.Limiter
	wire   *refusalCounter
	cred   quota.Credential
	trued  atomic.Int64 // units the meter learned from reports
}

// newAuditJob meters the built-in table api at host, on st, with clock.
func newAuditJob(t *testing.T, st quota.Store, api, host string, cred quota.Credential, clock *testkit.Clock, foresaw func(http.Header) bool, topts ...quota.TransportOption) *auditJob {
	t.Helper()
	table, err := costs.Builtin(api)
	if err != nil {
		t.Fatal(err)
	}
	if table, err = table.WithHosts(host); err != nil {
		t.Fatal(err)
	}
	j := &auditJob{cred: cred, wire: &refusalCounter{base: http.DefaultTransport, foresaw: foresaw}}
	obs := quota.ObserverFunc(func(e quota.Event) {
		if e.Kind == quota.EventTrueUp {
			j.trued.Add(e.Units)
		}
	})
	j.lim, err = quota.New(st, table.API, table.Budgets, quota.WithClock(clock.Now), quota.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]quota.TransportOption{quota.WithCredential(cred), quota.WithBase(j.wire),
		quota.WithRetryClock(clock, clock.NewTimer)}, topts...)
	j.client = &http.Client{Transport: quota.NewTransport(j.lim, table, opts...)}
	return j
}

func (j *auditJob) used(t *testing.T, budget string) int64 {
	t.Helper()
	return usedOf(t, j.lim, j.cred)[budget]
}

// do sends req through the job's client; it returns the status, or the
// local refusal.
func (j *auditJob) do(t *testing.T, req *http.Request) (int, *quota.ExhaustedError) {
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

const ghLimit = 200

func ghGet(t *testing.T, base, path, token string) *http.Request {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}

// ghShared starts a GitHub whose user octocat has ghLimit core requests an
// hour, spent by the job's token and by an unmetered CI token.
func ghShared(t *testing.T, clock *testkit.Clock) *ghsim.Server {
	sim := ghsim.New(ghsim.WithUser("octocat", 583231, "ghp_job", "ghp_ci"), ghsim.WithLimit(ghsim.Core, ghLimit),
		ghsim.WithClock(clock.Now))
	t.Cleanup(sim.Close)
	return sim
}

// ghForesaw: GitHub's previous answer said the job's next call (1 unit)
// would be refused: remaining 0 before the reset.
func ghForesaw(clock *testkit.Clock) func(http.Header) bool {
	return func(h http.Header) bool {
		reset, _ := strconv.ParseInt(h.Get("X-Ratelimit-Reset"), 10, 64)
		return h.Get("X-Ratelimit-Remaining") == "0" && clock.Now().Before(time.Unix(reset, 0))
	}
}

// ghRun runs the job until it is refused (locally or upstream), with CI
// spending ciEach units after every job call while it has spent less than
// ciMax; the clock moves step per call. It returns the job's served calls.
func ghRun(t *testing.T, j *auditJob, sim *ghsim.Server, clock *testkit.Clock, ciEach, ciMax int64, step time.Duration) (calls int64, ci int64, ex *quota.ExhaustedError) {
	for i := 0; i < 10*ghLimit; i++ {
		code, e := j.do(t, ghGet(t, sim.URL(), "/repos/o/r/issues", "ghp_job"))
		if e != nil {
			return calls, ci, e
		}
		if code == http.StatusOK {
			calls++
		}
		if code != http.StatusOK {
			t.Fatalf("job call %d: %d", i, code)
		}
		if ci < ciMax && sim.Spend("ghp_ci", ghsim.Core, min(ciEach, ciMax-ci)) {
			ci += min(ciEach, ciMax-ci)
		}
		clock.Add(step)
	}
	t.Fatal("the job was never stopped")
	return
}

// TestAuditGitHubSharedToken: CI spends the user's core quota while the
// job runs (concurrently), or mostly before it starts; the job never draws
// a 403, the user never spends past the limit, and the store counts at
// least the job's calls and at least what GitHub counts.
func TestAuditGitHubSharedToken(t *testing.T) {
	for _, name := range auditStoreNames {
		for _, sc := range []struct {
			name          string
			before        int64 // CI's spend before the job starts
			ciEach, ciMax int64
		}{
			{"concurrent", 0, 1, 80},
			{"concurrent-bursts", 0, 7, 150},
			{"before", 150, 0, 0},
			{"before-and-during", 120, 3, 60},
			{"all-before", ghLimit - 1, 0, 0},
		} {
			t.Run(name+"/"+sc.name, func(t *testing.T) {
				clock := testkit.NewClock(t0)
				sim := ghShared(t, clock)
				if sc.before > 0 && !sim.Spend("ghp_ci", ghsim.Core, sc.before) {
					t.Fatal("CI could not spend")
				}
				j := newAuditJob(t, auditStore(t, name), "github", sim.Host(), quota.Credential{Secret: "ghp_job", Owner: "octocat"}, clock, ghForesaw(clock))
				calls, ci, ex := ghRun(t, j, sim, clock, sc.ciEach, sc.ciMax, time.Second)
				if j.wire.foreseen.Load() != 0 || j.wire.refused.Load() > 1 {
					t.Errorf("the job drew %d refusals from GitHub, %d foreseen", j.wire.refused.Load(), j.wire.foreseen.Load())
				}
				if got := sim.Used("ghp_job", ghsim.Core); got > ghLimit {
					t.Errorf("GitHub counts %d used of %d", got, ghLimit)
				}
				if ex.Budget != "core" {
					t.Errorf("stopped on %q", ex.Budget)
				}
				counted := j.used(t, "core")
				if counted < calls || counted < sim.Used("ghp_job", ghsim.Core)-j.wire.refused.Load() {
					t.Errorf("store counts %d; the job made %d calls and GitHub counts %d", counted, calls, sim.Used("ghp_job", ghsim.Core))
				}
				if sim.Used("ghp_job", ghsim.Core) != ghLimit {
					t.Logf("GitHub counts %d of %d at the stop (job %d, CI %d+%d)", sim.Used("ghp_job", ghsim.Core), ghLimit, calls, sc.before, ci)
				}
				// At GitHub's reset, the job may spend again.
				clock.Set(sim.Reset("ghp_job", ghsim.Core))
				if code, ex := j.do(t, ghGet(t, sim.URL(), "/repos/o/r/issues", "ghp_job")); ex != nil || code != http.StatusOK {
					t.Errorf("at GitHub's reset: %d %v; the store counts %d", code, ex, j.used(t, "core"))
				}
			})
		}
	}
}

// TestAuditGitHubOldCallsLeaveBeforeGitHubResets: the job's own calls of
// the previous GitHub window still count in the store's sliding hour when
// CI spends GitHub's new window. GitHub's last report says remaining 0
// until its reset; when the job's old calls leave the store's hour (before
// that reset), the meter must still refuse the job locally, not send a
// call GitHub refuses (a report with nothing remaining marks the budget
// spent until GitHub's reset: Report.Spent). In "trued-up" the report
// trued the store up by what CI spent less the old calls; in
// "reservation-covers" the store counted as much as GitHub at every
// response (the old calls made up for CI's), so no response looked behind
// and nothing was trued up; with WithTrueDown the old calls are replaced
// by GitHub's count.
func TestAuditGitHubOldCallsLeaveBeforeGitHubResets(t *testing.T) {
	for _, sc := range []struct {
		name           string
		old, ci, fresh int64 // the job's calls in window 1; CI's, then the job's, in window 2
		trueDown       bool
	}{
		{"trued-up", 50, ghLimit - 1, 1, false},
		{"reservation-covers", 150, 150, 50, false},
		{"reservation-covers-truedown", 150, 150, 50, true},
	} {
		for _, name := range auditStoreNames {
			t.Run(sc.name+"/"+name, func(t *testing.T) {
				clock := testkit.NewClock(t0)
				sim := ghShared(t, clock)
				var topts []quota.TransportOption
				if sc.trueDown {
					topts = append(topts, quota.WithTrueDown(time.Second))
				}
				j := newAuditJob(t, auditStore(t, name), "github", sim.Host(), quota.Credential{Secret: "ghp_job", Owner: "octocat"}, clock, ghForesaw(clock), topts...)
				// GitHub's first window opens at t0 (CI's one call); the
				// job calls near its end.
				sim.Spend("ghp_ci", ghsim.Core, 1)
				clock.Add(59 * time.Minute)
				call := func(what string) {
					t.Helper()
					if code, ex := j.do(t, ghGet(t, sim.URL(), "/repos/o/r/issues", "ghp_job")); ex != nil || code != http.StatusOK {
						t.Fatalf("%s: %d %v", what, code, ex)
					}
				}
				for range sc.old {
					call("window 1")
				}
				// A new window: CI spends, then the job spends the rest.
				clock.Set(sim.Reset("ghp_job", ghsim.Core).Add(time.Second))
				if !sim.Spend("ghp_ci", ghsim.Core, sc.ci) {
					t.Fatal("CI could not spend")
				}
				for i := range sc.fresh {
					// (with WithTrueDown, the call a report answers is
					// counted whole beside it: the job stops one short)
					if i > 0 && (!sc.trueDown || int64(i) == sc.fresh-1) {
						// the old calls still count: the job may stop early
						if _, ex := j.do(t, ghGet(t, sim.URL(), "/repos/o/r/issues", "ghp_job")); ex != nil {
							break
						}
						continue
					}
					call("window 2")
				}
				if used := sim.Used("ghp_job", ghsim.Core); used > ghLimit || used < ghLimit-1 || !sc.trueDown && used != ghLimit {
					t.Fatalf("GitHub counts %d", used)
				}
				reset := sim.Reset("ghp_job", ghsim.Core)
				// Until GitHub's reset, every call is refused locally.
				for clock.Now().Before(reset) {
					full := sim.Used("ghp_job", ghsim.Core) == ghLimit
					sent := j.wire.sent.Load()
					code, ex := j.do(t, ghGet(t, sim.URL(), "/repos/o/r/issues", "ghp_job"))
					if full && (ex == nil || j.wire.sent.Load() != sent) {
						t.Fatalf("at t0+%v, %v before GitHub's reset (the last report said remaining 0): sent (%d, %v)",
							clock.Now().Sub(t0), reset.Sub(clock.Now()), code, ex)
					}
					clock.Add(time.Minute)
				}
				clock.Set(reset)
				call("at GitHub's reset")
				if n := j.wire.refused.Load(); n != 0 {
					t.Fatalf("the job drew %d refusals from GitHub", n)
				}
			})
		}
	}
}

// --- IETF RateLimit ---

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

// TestAuditIETFSharedKey: a job metered with the built-in
// ratelimit-headers table shares its API key with an unmetered client, on
// an upstream with a per-minute and a daily policy; the job never draws a
// 429 its last answer foresaw, and spends again once the minute resets.
func TestAuditIETFSharedKey(t *testing.T) {
	for _, sc := range []struct {
		name          string
		before, other int64 // the other client's spend before the job, and after each job call
	}{
		{"concurrent", 0, 1},
		{"before", 8, 0},
		{"before-and-during", 5, 1},
	} {
		for _, name := range auditStoreNames {
			t.Run(sc.name+"/"+name, func(t *testing.T) {
				clock := testkit.NewClock(t0)
				sim, err := rlsim.New([]rlsim.Policy{{Name: "burst", Quota: 10, Window: time.Minute}, {Name: "daily", Quota: 1000, Window: 24 * time.Hour}},
					rlsim.WithClock(clock.Now))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(sim.Close)
				host := strings.TrimPrefix(sim.URL(), "http://")
				j := newAuditJob(t, auditStore(t, name), "ratelimit-headers", host, quota.Credential{Secret: "key-1"}, clock, ietfForesaw)
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

// TestAuditIETFTightestPolicyLimit: an upstream with a per-minute policy
// of 10 and a daily one of 1,000, both reported on the built-in table's
// one budget; the limit the meter learns is the minute's, whichever
// policy the response lists last, so concurrent calls past the minute's
// 10 are refused locally, not by the upstream.
func TestAuditIETFTightestPolicyLimit(t *testing.T) {
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
			j := newAuditJob(t, quota.NewMemoryStore(), "ratelimit-headers", strings.TrimPrefix(sim.URL(), "http://"), quota.Credential{Secret: "key-1"}, clock, ietfForesaw)
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
	resp, err := client.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
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

// TestAuditLLMSharedAccount: a job metered with the built-in openai or
// anthropic table shares the project (organization) with another key's
// client, unmetered, that spends concurrently or before the job starts;
// the job is never refused by a 429 its previous answer foresaw, and when
// the other client stops, the job spends again once the minute refills.
func TestAuditLLMSharedAccount(t *testing.T) {
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
			for _, name := range auditStoreNames {
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
					j := newAuditJob(t, auditStore(t, name), up, host, quota.Credential{Secret: "sk-job", Owner: owner}, clock, foresaw)
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

// --- Shopify ---

// TestAuditShopifySharedShop: another app spends the shop's bucket while
// the job queries (concurrently), or drains most of it before; the job
// learns it from throttleStatus, stops on a local refusal rather than a
// THROTTLED its last answer foresaw, and queries again once the bucket has
// restored.
func TestAuditShopifySharedShop(t *testing.T) {
	for _, sc := range []struct {
		name          string
		before, other int64 // the other app's points before the job, and after each job query
	}{
		{"concurrent", 0, 150},
		{"before", 1900, 0},
		{"before-and-during", 1200, 100},
	} {
		for _, name := range auditStoreNames {
			t.Run(sc.name+"/"+name, func(t *testing.T) {
				clock := testkit.NewClock(t0)
				sim := shopifysim.New(shopifysim.WithShop("shop", "shpat", "other"), shopifysim.WithClock(clock.Now), shopifysim.WithItems(250))
				t.Cleanup(sim.Close)
				spendOther(t, sim, sc.before)
				j := newAuditJob(t, auditStore(t, name), "shopify-admin", sim.Host(), quota.Credential{Secret: "shpat"}, clock, nil)
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

// TestAuditGitHubTwoProcessesTrueUp: two limiters (as two processes) share
// one SQLite file or one Redis, each metering a job on a token of the same
// user while CI spends it too; both true up from their own responses. No
// 403 is foreseen, GitHub never counts past its limit, and the store counts
// at least both jobs' calls.
func TestAuditGitHubTwoProcessesTrueUp(t *testing.T) {
	for _, name := range []string{"sqlite", "redis"} {
		t.Run(name, func(t *testing.T) {
			clock := testkit.NewClock(t0)
			sim := ghsim.New(ghsim.WithUser("octocat", 583231, "ghp_a", "ghp_b", "ghp_ci"), ghsim.WithLimit(ghsim.Core, ghLimit),
				ghsim.WithClock(clock.Now))
			t.Cleanup(sim.Close)
			u := auditStoreURL(t, name)
			jobs := []*auditJob{
				newAuditJob(t, openStore(t, u), "github", sim.Host(), quota.Credential{Secret: "ghp_a", Owner: "octocat"}, clock, ghForesaw(clock)),
				newAuditJob(t, openStore(t, u), "github", sim.Host(), quota.Credential{Secret: "ghp_b", Owner: "octocat"}, clock, ghForesaw(clock)),
			}
			tokens := []string{"ghp_a", "ghp_b"}
			sim.Spend("ghp_ci", ghsim.Core, 40)
			var calls [2]int64
			stopped := [2]bool{}
			for i := 0; i < 4*ghLimit && !(stopped[0] && stopped[1]); i++ {
				k := i % 2
				if stopped[k] {
					continue
				}
				code, ex := jobs[k].do(t, ghGet(t, sim.URL(), "/repos/o/r/issues", tokens[k]))
				switch {
				case ex != nil:
					stopped[k] = true
				case code == http.StatusOK:
					calls[k]++
				default:
					t.Fatalf("job %d: %d", k, code)
				}
				if i%3 == 0 {
					sim.Spend("ghp_ci", ghsim.Core, 1)
				}
				clock.Add(time.Second)
			}
			for k, j := range jobs {
				if j.wire.foreseen.Load() != 0 || j.wire.refused.Load() > 1 {
					t.Errorf("job %d drew %d 403s, %d foreseen", k, j.wire.refused.Load(), j.wire.foreseen.Load())
				}
			}
			if got := sim.Used("ghp_a", ghsim.Core); got > ghLimit {
				t.Fatalf("GitHub counts %d of %d", got, ghLimit)
			}
			if counted := jobs[0].used(t, "core"); counted < calls[0]+calls[1] {
				t.Fatalf("the store counts %d; the jobs made %d and %d calls", counted, calls[0], calls[1])
			}
		})
	}
}

// --- reports that cannot be believed ---

// TestAuditGitHubAbsurdReports: a proxy in front of GitHub rewrites its
// x-ratelimit-* fields; none of them panics, fails a call, or drives the
// store's count past what GitHub's limit can mean: a used of 2^53-1 counts
// as the limit (not 2^53-1 in the store and its drift metrics until the
// reset), and a remaining over the limit is ignored (EventReportIgnored).
func TestAuditGitHubAbsurdReports(t *testing.T) {
	for name, mangle := range map[string]func(h http.Header, n int){
		"used-2^53":       func(h http.Header, n int) { h.Set("X-Ratelimit-Used", "9007199254740991") },
		"used-past-int64": func(h http.Header, n int) { h.Set("X-Ratelimit-Used", "99999999999999999999") },
		"remaining>limit": func(h http.Header, n int) { h.Set("X-Ratelimit-Remaining", "99999") },
		"reset-in-past":   func(h http.Header, n int) { h.Set("X-Ratelimit-Reset", "1000") },
		"garbage":         func(h http.Header, n int) { h.Set("X-Ratelimit-Used", "abc"); h.Set("X-Ratelimit-Reset", "-5") },
		"missing-on-odd": func(h http.Header, n int) {
			if n%2 == 1 {
				for k := range h {
					if strings.HasPrefix(k, "X-Ratelimit") {
						h.Del(k)
					}
				}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			clock := testkit.NewClock(t0)
			sim := ghShared(t, clock)
			target, _ := url.Parse(sim.URL())
			var n int
			var mu sync.Mutex
			rp := httputil.NewSingleHostReverseProxy(target)
			rp.ModifyResponse = func(r *http.Response) error {
				mu.Lock()
				defer mu.Unlock()
				n++
				mangle(r.Header, n)
				return nil
			}
			front := httptest.NewServer(rp)
			t.Cleanup(front.Close)
			j := newAuditJob(t, quota.NewMemoryStore(), "github", strings.TrimPrefix(front.URL, "http://"), quota.Credential{Secret: "ghp_job", Owner: "octocat"}, clock, nil)
			sim.Spend("ghp_ci", ghsim.Core, 100)
			for range ghLimit {
				resp, err := j.client.Do(ghGet(t, front.URL, "/repos/o/r/issues", "ghp_job"))
				if errors.Is(err, quota.ErrExhausted) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				clock.Add(time.Second)
			}
			if got := j.used(t, "core"); got > ghLimit {
				t.Fatalf("the store counts %d of core; GitHub's limit is %d", got, ghLimit)
			}
			if got := sim.Used("ghp_job", ghsim.Core); got > ghLimit {
				t.Fatalf("GitHub counts %d", got)
			}
		})
	}
}
