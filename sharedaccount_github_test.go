package quotactl_test

// GitHub's account shared with other clients (see sharedaccount_test.go).

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/ghsim"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
)

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
func ghRun(t *testing.T, j *sharedJob, sim *ghsim.Server, clock *testkit.Clock, ciEach, ciMax int64, step time.Duration) (calls int64, ci int64, ex *quota.ExhaustedError) {
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

// TestSharedGitHubToken: CI spends the user's core quota while the
// job runs (concurrently), or mostly before it starts; the job never draws
// a 403, the user never spends past the limit, and the store counts at
// least the job's calls and at least what GitHub counts.
func TestSharedGitHubToken(t *testing.T) {
	for _, name := range sharedStoreNames {
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
				j := newSharedJob(t, sharedStore(t, name), "github", sim.Host(), quota.Credential{Secret: "ghp_job", Owner: "octocat"}, clock, ghForesaw(clock))
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

// TestSharedGitHubOldCallsLeaveBeforeGitHubResets: the job's own calls of
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
func TestSharedGitHubOldCallsLeaveBeforeGitHubResets(t *testing.T) {
	for _, sc := range []struct {
		name           string
		old, ci, fresh int64 // the job's calls in window 1; CI's, then the job's, in window 2
		trueDown       bool
	}{
		{"trued-up", 50, ghLimit - 1, 1, false},
		{"reservation-covers", 150, 150, 50, false},
		{"reservation-covers-truedown", 150, 150, 50, true},
	} {
		for _, name := range sharedStoreNames {
			t.Run(sc.name+"/"+name, func(t *testing.T) {
				clock := testkit.NewClock(t0)
				sim := ghShared(t, clock)
				var topts []quota.TransportOption
				if sc.trueDown {
					topts = append(topts, quota.WithTrueDown(time.Second))
				}
				j := newSharedJob(t, sharedStore(t, name), "github", sim.Host(), quota.Credential{Secret: "ghp_job", Owner: "octocat"}, clock, ghForesaw(clock), topts...)
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

// TestSharedGitHubTwoProcessesTrueUp: two limiters (as two processes) share
// one SQLite file or one Redis, each metering a job on a token of the same
// user while CI spends it too; both true up from their own responses. No
// 403 is foreseen, GitHub never counts past its limit, and the store counts
// at least both jobs' calls.
func TestSharedGitHubTwoProcessesTrueUp(t *testing.T) {
	for _, name := range []string{"sqlite", "redis"} {
		t.Run(name, func(t *testing.T) {
			clock := testkit.NewClock(t0)
			sim := ghsim.New(ghsim.WithUser("octocat", 583231, "ghp_a", "ghp_b", "ghp_ci"), ghsim.WithLimit(ghsim.Core, ghLimit),
				ghsim.WithClock(clock.Now))
			t.Cleanup(sim.Close)
			u := sharedStoreURL(t, name)
			jobs := []*sharedJob{
				newSharedJob(t, openStore(t, u), "github", sim.Host(), quota.Credential{Secret: "ghp_a", Owner: "octocat"}, clock, ghForesaw(clock)),
				newSharedJob(t, openStore(t, u), "github", sim.Host(), quota.Credential{Secret: "ghp_b", Owner: "octocat"}, clock, ghForesaw(clock)),
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

// TestSharedGitHubAbsurdReports: a proxy in front of GitHub rewrites its
// x-ratelimit-* fields; none of them panics, fails a call, or drives the
// store's count past what GitHub's limit can mean: a used of 2^53-1 counts
// as the limit (not 2^53-1 in the store and its drift metrics until the
// reset), and a remaining over the limit is ignored (EventReportIgnored).
func TestSharedGitHubAbsurdReports(t *testing.T) {
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
			j := newSharedJob(t, quota.NewMemoryStore(), "github", strings.TrimPrefix(front.URL, "http://"), quota.Credential{Secret: "ghp_job", Owner: "octocat"}, clock, nil)
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

// TestSharedGitHubFarResetMarksAWindowAtMost: a report of nothing remaining
// marks the budget spent until the upstream's reset, but a reset put months
// ahead (a fault, or a proxy's lie) marks it no longer than the budget's own
// window: the job spends again an hour later, when GitHub takes its calls.
func TestSharedGitHubFarResetMarksAWindowAtMost(t *testing.T) {
	clock := testkit.NewClock(t0)
	sim := ghShared(t, clock)
	target, _ := url.Parse(sim.URL())
	var lie atomic.Bool
	lie.Store(true)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(r *http.Response) error {
		if lie.Load() {
			r.Header.Set("X-Ratelimit-Remaining", "0")
			r.Header.Set("X-Ratelimit-Reset", strconv.FormatInt(clock.Now().Add(200*24*time.Hour).Unix(), 10))
		}
		return nil
	}
	front := httptest.NewServer(rp)
	t.Cleanup(front.Close)
	j := newSharedJob(t, quota.NewMemoryStore(), "github", strings.TrimPrefix(front.URL, "http://"), quota.Credential{Secret: "ghp_job", Owner: "octocat"}, clock, nil)
	if status, ex := j.do(t, ghGet(t, front.URL, "/repos/o/r/issues", "ghp_job")); ex != nil || status != http.StatusOK {
		t.Fatalf("first call: status %d, refusal %v", status, ex)
	}
	lie.Store(false)
	_, ex := j.do(t, ghGet(t, front.URL, "/repos/o/r/issues", "ghp_job"))
	if ex == nil {
		t.Fatal("the call after a report of nothing remaining was sent")
	}
	if limit := clock.Now().Add(time.Hour); ex.RetryAfter <= 0 || clock.Now().Add(ex.RetryAfter).After(limit) {
		t.Fatalf("marked spent for %v: past the budget's hour", ex.RetryAfter)
	}
	clock.Add(time.Hour + time.Second)
	if status, ex := j.do(t, ghGet(t, front.URL, "/repos/o/r/issues", "ghp_job")); ex != nil || status != http.StatusOK {
		t.Fatalf("an hour later: status %d, refusal %v", status, ex)
	}
}

// TestSharedGitHubIgnoredReportHidesSecret: a report the Transport cannot
// read is told to observers with what was wrong, quoting the header's
// value; an upstream (or a proxy) that echoes the token there must not put
// the credential's secret in the event.
func TestSharedGitHubIgnoredReportHidesSecret(t *testing.T) {
	clock := testkit.NewClock(t0)
	sim := ghShared(t, clock)
	target, _ := url.Parse(sim.URL())
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(r *http.Response) error {
		r.Header.Set("X-Ratelimit-Reset", "ghp_job")
		r.Header.Set("X-Ratelimit-Used", "ghp_job")
		return nil
	}
	front := httptest.NewServer(rp)
	t.Cleanup(front.Close)
	j := newSharedJob(t, quota.NewMemoryStore(), "github", strings.TrimPrefix(front.URL, "http://"), quota.Credential{Secret: "ghp_job", Owner: "octocat"}, clock, nil)
	if status, ex := j.do(t, ghGet(t, front.URL, "/repos/o/r/issues", "ghp_job")); ex != nil || status != http.StatusOK {
		t.Fatalf("status %d, refusal %v", status, ex)
	}
	if err := j.lim.Flush(t.Context()); err != nil { // events are delivered off the call's path
		t.Fatal(err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.ignored) == 0 {
		t.Fatal("no EventReportIgnored for a reset and a used that are not numbers")
	}
	for _, why := range j.ignored {
		if strings.Contains(why, "ghp_job") {
			t.Errorf("EventReportIgnored carries the secret: %q", why)
		}
	}
}

// TestSharedGitHubRefusalNamesLearnedLimit: the user's limit is GitHub
// Actions' 1,000, not the table's 5,000; CI spent it all before the job's
// first call. GitHub's 403 says so (x-ratelimit-limit: 1000), and the
// error the job gets names the limit the meter learned from it, not the
// table's; the refused call's refund leaves the store at GitHub's count.
func TestSharedGitHubRefusalNamesLearnedLimit(t *testing.T) {
	clock := testkit.NewClock(t0)
	sim := ghsim.New(ghsim.WithUser("octocat", 583231, "ghp_job", "ghp_ci"), ghsim.WithOwnerLimit("octocat", ghsim.Core, ghsim.ActionsTokenCore),
		ghsim.WithClock(clock.Now))
	t.Cleanup(sim.Close)
	if !sim.Spend("ghp_ci", ghsim.Core, ghsim.ActionsTokenCore) {
		t.Fatal("CI could not spend")
	}
	j := newSharedJob(t, quota.NewMemoryStore(), "github", sim.Host(), quota.Credential{Secret: "ghp_job", Owner: "octocat"}, clock, nil)
	_, ex := j.do(t, ghGet(t, sim.URL(), "/repos/o/r/issues", "ghp_job"))
	if ex == nil || ex.Budget != "core" {
		t.Fatalf("GitHub's 403: refusal %v, want core spent", ex)
	}
	if ex.Limit != ghsim.ActionsTokenCore {
		t.Fatalf("the refusal names limit %d, want the user's %d: %v", ex.Limit, ghsim.ActionsTokenCore, ex)
	}
	if j.wire.refused.Load() != 1 {
		t.Fatalf("%d refusals from GitHub, want 1", j.wire.refused.Load())
	}
	// The refused call is given back (GitHub did not count it), and the
	// store still counts what GitHub reported.
	if got := j.used(t, "core"); got < ghsim.ActionsTokenCore {
		t.Fatalf("the store counts %d, GitHub %d", got, ghsim.ActionsTokenCore)
	}
}
