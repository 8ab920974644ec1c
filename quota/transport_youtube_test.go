package quota_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/internal/ytsim"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// status returns the meter's usage of budget for a credential.
func trStatus(t *testing.T, lim *quota.Limiter, c quota.Credential, budget string) quota.Usage {
	t.Helper()
	us, err := lim.Status(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if u.Budget == budget {
			return u
		}
	}
	t.Fatalf("no budget %q", budget)
	return quota.Usage{}
}

// A per-minute 429 on search.list (Google's shape: the limit is per
// minute) is a throttle: retried with backoff, the bucket left open, both
// attempts billed on both sides.
func TestTransportPerMinute429Retries(t *testing.T) {
	e := newTrEnv(t, nil)
	ctx := context.Background()
	e.srv.Inject(ytsim.Fault{Status: 429, Path: "/youtube/v3/search"})
	resp, _, err := e.do(ctx, "GET", e.url("/youtube/v3/search", "q", "x"), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("search.list after a per-minute 429: %v", err)
	}
	if len(e.waits()) != 1 {
		t.Fatalf("waits = %v, want one retry", e.waits())
	}
	u := trStatus(t, e.lim, quota.Credential{Secret: trKey, Owner: trOwner}, "search")
	if !u.ExhaustedUntil.IsZero() || u.Used != 2 {
		t.Fatalf("search = %+v, want open with 2 used (both attempts billed)", u)
	}
	if _, _, err := e.do(ctx, "GET", e.url("/youtube/v3/search", "q", "y"), nil); err != nil {
		t.Fatalf("next search: %v", err)
	}
	e.agree()
}

// A daily 429 (the ErrorInfo names a per-day limit) spends the bucket until
// midnight Pacific: the next search is not sent, in this process or
// another; the shared pool is untouched.
func TestTransportDaily429Exhausts(t *testing.T) {
	e := newTrEnv(t, nil)
	ctx := context.Background()
	e.srv.Inject(ytsim.Fault{Status: 429, Path: "/youtube/v3/search", Daily: true})
	_, _, err := e.do(ctx, "GET", e.url("/youtube/v3/search", "q", "x"), nil)
	var ex *quota.ExhaustedError
	if !errors.As(err, &ex) || ex.Budget != "search" {
		t.Fatalf("err = %v, want search exhausted", err)
	}
	la, _ := time.LoadLocation("America/Los_Angeles")
	if midnight := time.Date(2026, 3, 11, 0, 0, 0, 0, la); !ex.ExhaustedUntil.Equal(midnight) {
		t.Fatalf("exhausted until %v, want %v", ex.ExhaustedUntil, midnight)
	}
	if len(e.waits()) != 0 {
		t.Fatalf("waits = %v: a daily 429 is not retried", e.waits())
	}
	other := quota.NewTransport(e.newLimiter(), e.table, quota.WithTransportLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	req, _ := http.NewRequest("GET", e.url("/youtube/v3/search", "q", "y"), nil)
	if _, err := other.RoundTrip(req); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("other process: err = %v, want ErrExhausted", err)
	}
	if got := e.srv.Received(trKey, "search"); got != 1 {
		t.Fatalf("upstream received %d searches, want 1", got)
	}
	if resp, _, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("videos.list: %v", err)
	}
	e.agree() // the refused search was refunded: the upstream did not bill it
}

// 403 dailyLimitExceeded, like quotaExceeded, spends the method's budgets
// until the reset.
func TestTransport403DailyLimitExceeded(t *testing.T) {
	e := newTrEnv(t, nil)
	ctx := context.Background()
	e.srv.Inject(ytsim.Fault{Status: 403, Reason: "dailyLimitExceeded"})
	_, _, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil)
	var ex *quota.ExhaustedError
	if !errors.As(err, &ex) || ex.Budget != "units" || ex.RetryAfter != 14*time.Hour {
		t.Fatalf("err = %v, want units exhausted for 14h", err)
	}
	if _, _, err := e.do(ctx, "GET", e.url("/youtube/v3/channels", "id", "c"), nil); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("err = %v, want ErrExhausted until the reset", err)
	}
	e.clk.Add(14 * time.Hour)
	if resp, _, err := e.do(ctx, "GET", e.url("/youtube/v3/channels", "id", "c"), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the reset: %v", err)
	}
}

// countingStore counts the reads a Transport makes besides its takes.
type countingStore struct {
	quota.Store
	usage atomic.Int64
}

func (s *countingStore) Usage(ctx context.Context, req *backend.UsageRequest) ([]quota.Usage, error) {
	s.usage.Add(1)
	return s.Store.Usage(ctx, req)
}

// 400 uploadLimitExceeded stops uploads for that channel (credential) for
// 24 hours, in every process sharing the store, without touching the
// project's budgets; other channels of the project still upload, and
// requests that are not uploads cost no extra store round trip.
func TestTransportUploadLimitHoldsTheChannel(t *testing.T) {
	la, _ := time.LoadLocation("America/Los_Angeles")
	clk := testkit.NewClock(time.Date(2026, 3, 10, 10, 0, 0, 0, la))
	srv := ytsim.New(ytsim.WithClock(clk.Now), ytsim.WithUploadCap(1), ytsim.WithProject("proj", "chan-a", "chan-b"))
	t.Cleanup(srv.Close)
	table := newTrEnv(t, nil).table
	store := &countingStore{Store: quota.NewMemoryStore()}
	var logs testkit.Buffer
	newClient := func() *http.Client {
		lim, err := quota.New(store, table.API, table.Budgets, quota.WithClock(clk.Now))
		if err != nil {
			t.Fatal(err)
		}
		tr := quota.NewTransport(lim, table,
			quota.WithOwnerFunc(func(*http.Request) string { return "proj" }),
			quota.WithLabelFunc(func(r *http.Request) string { return r.Header.Get("X-Channel") }),
			quota.WithTransportLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		c := &http.Client{Transport: tr}
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	do := func(c *http.Client, method, path, key string) (int, error) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL()+path, strings.NewReader("{}"))
		req.Header.Set("X-Goog-Api-Key", key)
		req.Header.Set("X-Channel", key)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	const upload = "/upload/youtube/v3/videos?part=snippet&uploadType=multipart"
	a, b := newClient(), newClient()

	if code, err := do(a, "POST", upload, "chan-a"); err != nil || code != 200 {
		t.Fatalf("first upload: %d %v", code, err)
	}
	// Not uploads: no store read besides the take.
	before := store.usage.Load()
	for range 3 {
		if code, err := do(a, "GET", "/youtube/v3/videos?id=v", "chan-a"); err != nil || code != 200 {
			t.Fatalf("videos.list: %d %v", code, err)
		}
	}
	if n := store.usage.Load() - before; n != 0 {
		t.Fatalf("%d store reads for 3 requests that are not uploads, want 0", n)
	}
	// The channel's cap: 400 uploadLimitExceeded, returned as a refusal.
	_, err := do(a, "POST", upload, "chan-a")
	var ex *quota.ExhaustedError
	if !errors.As(err, &ex) || ex.API != "youtube.holds" || ex.Budget != "videos.insert" || ex.RetryAfter != 24*time.Hour || ex.Credential != "chan-a" {
		t.Fatalf("err = %v (%+v), want videos.insert held for chan-a for 24h", err, ex)
	}
	if !strings.Contains(err.Error(), "400 uploadLimitExceeded") || strings.Contains(logs.String(), "chan-a\x00") {
		t.Fatalf("err = %q", err)
	}
	received := srv.Received("chan-a", "uploads")
	// Refused without sending, in this process and in another one.
	for i, c := range []*http.Client{a, b} {
		if _, err := do(c, "POST", upload, "chan-a"); !errors.Is(err, quota.ErrExhausted) {
			t.Fatalf("process %d: err = %v, want the hold", i, err)
		}
	}
	if got := srv.Received("chan-a", "uploads"); got != received {
		t.Fatalf("upstream received %d more uploads from the held channel", got-received)
	}
	// The project's budgets are untouched: another channel uploads, the
	// meter counts what the upstream billed (the refused call included).
	if code, err := do(b, "POST", upload, "chan-b"); err != nil || code != 200 {
		t.Fatalf("another channel: %d %v", code, err)
	}
	lim, _ := quota.New(store, table.API, table.Budgets, quota.WithClock(clk.Now))
	u := trStatus(t, lim, quota.Credential{Secret: "chan-a", Owner: "proj"}, "uploads")
	if !u.ExhaustedUntil.IsZero() || u.Used != srv.Used("chan-a", "uploads") || u.Used != 3 {
		t.Fatalf("uploads = %+v, upstream %d; want open, 3 used on both sides", u, srv.Used("chan-a", "uploads"))
	}
	// 24 hours later the channel uploads again.
	clk.Add(24*time.Hour + time.Second)
	if code, err := do(b, "POST", upload, "chan-a"); err != nil || code != 200 {
		t.Fatalf("after 24 hours: %d %v", code, err)
	}
}

// Three keys of one project through one transport that names no owner: the
// transport meters them as one owner, so the simulator (quota per project)
// never answers quotaExceeded, and the store's usage equals the
// simulator's. It says so once in the log.
func TestTransportThreeKeysOneProject(t *testing.T) {
	keys := []string{"AIza-key-one", "AIza-key-two", "AIza-key-three"}
	for _, mapped := range []bool{false, true} {
		name := "unnamed"
		if mapped {
			name = "WithOwnerFunc"
		}
		t.Run(name, func(t *testing.T) {
			var opts []quota.TransportOption
			owner := trOwner
			if mapped {
				owner = "proj-1"
				opts = append(opts, quota.WithOwnerFunc(func(*http.Request) string { return "proj-1" }))
			}
			// The project's console says 30 units a day; the meter knows.
			e := newTrEnv(t, []ytsim.Option{ytsim.WithProject("proj-1", keys...), ytsim.WithLimit("units", 30)})
			budgets := slices.Clone(e.table.Budgets)
			budgets[slices.IndexFunc(budgets, func(b quota.Budget) bool { return b.Name == "units" })].Limit = 30
			lim, err := quota.New(e.store, e.table.API, budgets, quota.WithClock(e.clk.Now))
			if err != nil {
				t.Fatal(err)
			}
			e.lim = lim
			logger := slog.New(slog.NewTextHandler(e.logs, nil))
			e.client = &http.Client{Transport: quota.NewTransport(lim, e.table, append(opts, quota.WithTransportLogger(logger))...)}
			t.Cleanup(e.client.CloseIdleConnections)
			ctx := context.Background()
			refused := 0
			for i := range 45 {
				q := url.Values{"key": {keys[i%3]}, "id": {"v"}}
				_, _, err := e.do(ctx, "GET", e.srv.URL()+"/youtube/v3/videos?"+q.Encode(), nil)
				switch {
				case errors.Is(err, quota.ErrExhausted):
					refused++
				case err != nil:
					t.Fatalf("call %d: %v", i, err)
				}
			}
			if n := e.srv.QuotaExceeded(); n != 0 {
				t.Fatalf("the simulator answered quotaExceeded %d times: the meter let three keys spend more than one project's quota", n)
			}
			if refused != 15 {
				t.Fatalf("%d calls refused by the meter, want 15", refused)
			}
			for _, k := range keys {
				got := trStatus(t, e.lim, quota.Credential{Secret: k, Owner: owner}, "units").Used
				if want := e.srv.Used(k, "units"); got != want || got != 30 {
					t.Fatalf("store counts %d units for %s's owner, the simulator %d; want 30", got, k, want)
				}
			}
			if n := strings.Count(e.logs.String(), "none is named"); n != map[bool]int{false: 1, true: 0}[mapped] {
				t.Fatalf("logged the unnamed owner %d times:\n%s", n, e.logs.String())
			}
		})
	}
}

// An owner function returning a bad name is an error; the request is not
// sent.
func TestTransportOwnerFuncBadName(t *testing.T) {
	e := newTrEnv(t, nil, quota.WithOwnerFunc(func(*http.Request) string { return "my project" }))
	_, _, err := e.do(context.Background(), "GET", e.url("/youtube/v3/videos", "id", "v"), nil)
	if !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), "owner") {
		t.Fatalf("err = %v, want an invalid owner name", err)
	}
	if e.srv.Requests() != 0 {
		t.Fatal("the request was sent")
	}
}

// A Retry-After too large for a Duration (18446744074 s overflowed to
// 0.29 s) means "stop": the 429 goes back to the caller after one charged
// attempt.
func TestTransportHugeRetryAfterStops(t *testing.T) {
	for _, ra := range []string{"18446744074", "99999999999999999999999", "31536000"} {
		t.Run(ra, func(t *testing.T) {
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.Header().Set("Retry-After", ra)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(429)
				_, _ = w.Write(ytsim.RateLimitBody("rateLimitExceeded", false))
			}))
			t.Cleanup(srv.Close)
			e := newTrEnv(t, nil)
			resp, _, err := e.do(context.Background(), "GET", srv.URL+"/youtube/v3/videos?id=v&key="+trKey, nil)
			if err != nil || resp.StatusCode != 429 {
				t.Fatalf("resp %v, err %v; want the 429", resp, err)
			}
			if hits.Load() != 1 || len(e.waits()) != 0 {
				t.Fatalf("%d attempts, waits %v; want 1 attempt and no wait", hits.Load(), e.waits())
			}
			if got := e.used("units"); got != 1 {
				t.Fatalf("charged %d units, want 1", got)
			}
		})
	}
}

// recorder is a loopback server that records what reaches it.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func newRecorder(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *recorder {
	rc := &recorder{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, r.Clone(context.Background()))
		rc.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *recorder) requests() []*http.Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*http.Request(nil), rc.reqs...)
}

func okJSON(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"kind":"youtube#videoListResponse","items":[]}`))
}

// A redirect to another host never carries the credential — header,
// bearer token or key parameter — and one logical call is charged once.
func TestTransportRedirectToAnotherHost(t *testing.T) {
	for _, form := range []string{"X-Goog-Api-Key", "Bearer", "key="} {
		t.Run(form, func(t *testing.T) {
			other := newRecorder(t, okJSON)
			first := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.srv.URL+r.URL.Path+"?"+r.URL.RawQuery, http.StatusFound)
			})
			e := newTrEnv(t, nil)
			u := first.srv.URL + "/youtube/v3/videos?id=v"
			req, _ := http.NewRequest("GET", u, nil)
			switch form {
			case "X-Goog-Api-Key":
				req.Header.Set("X-Goog-Api-Key", trKey)
			case "Bearer":
				req.Header.Set("Authorization", "Bearer "+trKey)
			default:
				req.URL.RawQuery += "&key=" + trKey
			}
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || len(first.requests()) != 1 || len(other.requests()) != 1 {
				t.Fatalf("status %d, %d requests at the first host, %d at the other", resp.StatusCode, len(first.requests()), len(other.requests()))
			}
			got := other.requests()[0]
			if got.Header.Get("X-Goog-Api-Key") != "" || got.Header.Get("Authorization") != "" ||
				strings.Contains(got.URL.RawQuery, trKey) || got.URL.Query().Has("key") {
				t.Fatalf("the other host received the credential: %v %q", got.Header, got.URL.RawQuery)
			}
			if got.URL.Query().Get("id") != "v" {
				t.Fatalf("query %q lost its other parameters", got.URL.RawQuery)
			}
			if n := e.used("units"); n != 1 {
				t.Fatalf("charged %d units for one logical call, want 1", n)
			}
		})
	}
}

// A redirect on the same host keeps the credential and is charged once.
func TestTransportRedirectSameHost(t *testing.T) {
	var rc *recorder
	rc = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/youtube/v3/videos" && r.URL.Query().Get("hop") == "" {
			http.Redirect(w, r, "/youtube/v3/videos?hop=1&"+r.URL.RawQuery, http.StatusTemporaryRedirect)
			return
		}
		okJSON(w, r)
	})
	e := newTrEnv(t, nil)
	req, _ := http.NewRequest("GET", rc.srv.URL+"/youtube/v3/videos?id=v", nil)
	req.Header.Set("X-Goog-Api-Key", trKey)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reqs := rc.requests()
	if resp.StatusCode != 200 || len(reqs) != 2 || reqs[1].Header.Get("X-Goog-Api-Key") != trKey {
		t.Fatalf("status %d, %d requests", resp.StatusCode, len(reqs))
	}
	if n := e.used("units"); n != 1 {
		t.Fatalf("charged %d units for one logical call, want 1", n)
	}
}

// The unnamed owner never replaces an owner the store records for a
// credential (named by quotactl --owner or another process): the transport
// meters that owner.
func TestTransportKeepsARecordedOwner(t *testing.T) {
	e := newTrEnv(t, nil)
	ctx := context.Background()
	if _, err := e.lim.Take(ctx, quota.Credential{Secret: trKey, Label: "yt-key-1", Owner: "proj-a"}, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil); err != nil {
		t.Fatal(err)
	}
	if got := trStatus(t, e.lim, quota.Credential{Secret: trKey, Owner: "proj-a"}, "units").Used; got != 2 {
		t.Fatalf("proj-a used %d, want 2 (the transport's call metered there)", got)
	}
	if strings.Contains(e.logs.String(), "none is named") {
		t.Fatalf("logged the unnamed owner for a credential whose owner is recorded:\n%s", e.logs.String())
	}
}

// A limiter-wide owner (quota.WithOwner) is an owner mapping: the transport
// meters that owner and does not fall back to the unnamed one.
func TestTransportLimiterOwner(t *testing.T) {
	e := newTrEnv(t, nil)
	lim, err := quota.New(e.store, e.table.API, e.table.Budgets, quota.WithClock(e.clk.Now), quota.WithOwner("proj-l"))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(e.logs, nil))
	e.client = &http.Client{Transport: quota.NewTransport(lim, e.table, quota.WithTransportLogger(logger))}
	if _, _, err := e.do(context.Background(), "GET", e.url("/youtube/v3/videos", "id", "v"), nil); err != nil {
		t.Fatal(err)
	}
	if got := trStatus(t, lim, quota.Credential{Secret: trKey, Owner: "proj-l"}, "units").Used; got != 1 {
		t.Fatalf("proj-l used %d, want 1", got)
	}
	if strings.Contains(e.logs.String(), "none is named") {
		t.Fatalf("logged the unnamed owner with a limiter-wide owner:\n%s", e.logs.String())
	}
}

// nilRequestBase sends through http.DefaultTransport and returns the
// response without its Request, as many RoundTrippers do (http.Client
// fills it in only when the base does).
type nilRequestBase struct{}

func (nilRequestBase) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if resp != nil {
		resp.Request = nil
	}
	return resp, err
}

// dropRequest wraps a RoundTripper (here, the Transport) and drops the
// Request of its responses: the Transport then cannot tell where a
// redirect chain started.
type dropRequest struct{ rt http.RoundTripper }

func (d dropRequest) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.rt.RoundTrip(req)
	if resp != nil {
		resp.Request = nil
	}
	return resp, err
}

// withCredential sets trKey on req in one of the three forms the
// Transport reads.
func withCredential(req *http.Request, form string) {
	switch form {
	case "X-Goog-Api-Key":
		req.Header.Set("X-Goog-Api-Key", trKey)
	case "Bearer":
		req.Header.Set("Authorization", "Bearer "+trKey)
	default:
		req.URL.RawQuery += "&key=" + trKey
	}
}

// carries reports whether a request received by a server holds trKey in
// any form.
func carries(r *http.Request) bool {
	return strings.Contains(r.Header.Get("X-Goog-Api-Key"), trKey) || strings.Contains(r.Header.Get("Authorization"), trKey) ||
		strings.Contains(r.URL.RawQuery, trKey) || r.URL.Query().Has("key")
}

var credentialForms = []string{"X-Goog-Api-Key", "Bearer", "key="}

// A redirect to another host never carries the credential, also over a
// base RoundTripper that returns responses without their Request
// (http.Client leaves it nil then): the Transport still finds the host the
// call named.
func TestTransportRedirectToAnotherHostCustomBase(t *testing.T) {
	for _, form := range credentialForms {
		t.Run(form, func(t *testing.T) {
			other := newRecorder(t, okJSON)
			first := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.srv.URL+r.URL.Path+"?"+r.URL.RawQuery, http.StatusFound)
			})
			e := newTrEnv(t, nil, quota.WithBase(nilRequestBase{}))
			req, _ := http.NewRequest("GET", first.srv.URL+"/youtube/v3/videos?id=v", nil)
			withCredential(req, form)
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || len(first.requests()) != 1 || len(other.requests()) != 1 {
				t.Fatalf("status %d, %d requests at the first host, %d at the other", resp.StatusCode, len(first.requests()), len(other.requests()))
			}
			if !carries(first.requests()[0]) {
				t.Fatalf("the first host did not receive the credential")
			}
			got := other.requests()[0]
			if carries(got) {
				t.Fatalf("the other host received the credential: %v %q", got.Header, got.URL.RawQuery)
			}
			if got.URL.Query().Get("id") != "v" {
				t.Fatalf("query %q lost its other parameters", got.URL.RawQuery)
			}
			if n := e.used("units"); n != 1 {
				t.Fatalf("charged %d units for one logical call, want 1", n)
			}
		})
	}
}

// Over a base that returns responses without their Request, redirects on
// the same host keep the credential (two hops, then a third to another
// host, which does not get it), and the call is charged once.
func TestTransportRedirectSameHostCustomBase(t *testing.T) {
	for _, form := range credentialForms {
		t.Run(form, func(t *testing.T) {
			other := newRecorder(t, okJSON)
			rc := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Query().Get("hop") {
				case "":
					http.Redirect(w, r, "/youtube/v3/videos?hop=1&"+r.URL.RawQuery, http.StatusTemporaryRedirect)
				case "1":
					q := r.URL.Query()
					q.Set("hop", "2")
					http.Redirect(w, r, "/youtube/v3/videos?"+q.Encode(), http.StatusFound)
				default:
					http.Redirect(w, r, other.srv.URL+r.URL.Path+"?"+r.URL.RawQuery, http.StatusFound)
				}
			})
			e := newTrEnv(t, nil, quota.WithBase(nilRequestBase{}))
			req, _ := http.NewRequest("GET", rc.srv.URL+"/youtube/v3/videos?id=v", nil)
			withCredential(req, form)
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			reqs := rc.requests()
			if resp.StatusCode != 200 || len(reqs) != 3 || len(other.requests()) != 1 {
				t.Fatalf("status %d, %d requests on the host, %d at the other", resp.StatusCode, len(reqs), len(other.requests()))
			}
			for i, r := range reqs {
				if !carries(r) {
					t.Fatalf("request %d on the same host lost the credential: %v %q", i, r.Header, r.URL.RawQuery)
				}
			}
			if got := other.requests()[0]; carries(got) {
				t.Fatalf("the other host received the credential: %v %q", got.Header, got.URL.RawQuery)
			}
			if n := e.used("units"); n != 1 {
				t.Fatalf("charged %d units for one logical call, want 1", n)
			}
		})
	}
}

// When the Transport cannot tell where a redirect chain started (a
// RoundTripper wrapping it drops the responses' Request), a redirect
// carries no credential, even to the same host: it fails safe.
func TestTransportRedirectUnknownOriginStrips(t *testing.T) {
	for _, form := range credentialForms {
		t.Run(form, func(t *testing.T) {
			rc := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("hop") == "" {
					http.Redirect(w, r, "/youtube/v3/videos?hop=1&"+r.URL.RawQuery, http.StatusFound)
					return
				}
				okJSON(w, r)
			})
			e := newTrEnv(t, nil)
			e.client.Transport = dropRequest{e.client.Transport}
			req, _ := http.NewRequest("GET", rc.srv.URL+"/youtube/v3/videos?id=v", nil)
			withCredential(req, form)
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			reqs := rc.requests()
			if resp.StatusCode != 200 || len(reqs) != 2 {
				t.Fatalf("status %d, %d requests", resp.StatusCode, len(reqs))
			}
			if carries(reqs[1]) {
				t.Fatalf("a redirect whose origin is unknown carried the credential: %v %q", reqs[1].Header, reqs[1].URL.RawQuery)
			}
			if reqs[1].URL.Query().Get("id") != "v" {
				t.Fatalf("query %q lost its other parameters", reqs[1].URL.RawQuery)
			}
		})
	}
}
