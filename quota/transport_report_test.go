package quota_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
)

// fixedWindow is an upstream with one fixed window of limit calls per
// account, shared by every client, that states where the account stands on
// every response (X-Used, X-Limit, X-Reset in epoch seconds) and answers
// 429 once the window is spent.
type fixedWindow struct {
	mu     sync.Mutex
	clock  func() time.Time
	limit  int64
	used   int64
	reset  time.Time
	quota  int // 429s sent
	served int
}

func (f *fixedWindow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock()
	if !now.Before(f.reset) {
		f.used, f.reset = 0, now.Add(time.Hour).Truncate(time.Second)
	}
	h := w.Header()
	h.Set("X-Limit", strconv.FormatInt(f.limit, 10))
	h.Set("X-Reset", strconv.FormatInt(f.reset.Unix(), 10))
	if f.used >= f.limit {
		f.quota++
		h.Set("X-Used", strconv.FormatInt(f.used, 10))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	f.used++
	f.served++
	h.Set("X-Used", strconv.FormatInt(f.used, 10))
	w.WriteHeader(http.StatusOK)
}

// headerReporter prices every request at 1 unit of "calls" and reads
// fixedWindow's headers as a Report; a malformed X-Used is ignored.
type headerReporter struct{}

func (headerReporter) Price(*http.Request) (quota.Charge, error) {
	return quota.Charge{Method: "get", Units: map[string]int64{"calls": 1}}, nil
}

func (headerReporter) Reports(_ *http.Request, resp *http.Response, _ []byte, _ time.Time) ([]quota.Report, []string) {
	used, err := strconv.ParseInt(resp.Header.Get("X-Used"), 10, 64)
	if err != nil || used < 0 {
		return nil, []string{"X-Used: not a count"}
	}
	limit, _ := strconv.ParseInt(resp.Header.Get("X-Limit"), 10, 64)
	reset, _ := strconv.ParseInt(resp.Header.Get("X-Reset"), 10, 64)
	return []quota.Report{{Budget: "calls", Limit: limit, Used: used, Remaining: -1, Reset: time.Unix(reset, 0), Scope: "test"}}, nil
}

// TestTransportTruesUpToReports: another, unmetered client spends 40% of
// the upstream's window while a metered job runs; the job learns it from
// the responses, never draws a 429, and stops on a local refusal whose
// RetryAt is the upstream's reset.
func TestTransportTruesUpToReports(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	up := &fixedWindow{clock: clk.Now, limit: 100}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)

	var (
		mu      sync.Mutex
		trueUps int64
		reports int
	)
	obs := quota.ObserverFunc(func(e quota.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case quota.EventTrueUp:
			trueUps += e.Units
		case quota.EventReport:
			reports++
		}
	})
	store := quota.NewMemoryStore()
	lim, err := quota.New(store, "fixed", []quota.Budget{{Name: "calls", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(clk.Now), quota.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: quota.NewTransport(lim, headerReporter{}, quota.WithCredential(quota.Credential{Secret: "job-token", Label: "job"}))}
	other := srv.Client() // the unmetered client: same account, no meter

	get := func(c *http.Client) (int, error) {
		resp, err := c.Get(srv.URL + "/x")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	var job int
	var refusal *quota.ExhaustedError
	for i := 0; i < 200 && refusal == nil; i++ {
		if i >= 10 && i < 50 { // the other client's 40 calls, interleaved
			if code, err := get(other); err != nil || code != http.StatusOK {
				t.Fatalf("other client: %d %v", code, err)
			}
		}
		clk.Add(time.Second)
		code, err := get(client)
		switch {
		case errors.As(err, &refusal):
		case err != nil:
			t.Fatal(err)
		case code != http.StatusOK:
			t.Fatalf("metered call %d drew %d from the upstream", i, code)
		default:
			job++
		}
	}
	lim.Flush(t.Context())
	if refusal == nil {
		t.Fatal("the job was never refused")
	}
	if up.quota != 0 {
		t.Fatalf("upstream sent %d 429s", up.quota)
	}
	if job != 60 || up.used != 100 {
		t.Fatalf("job made %d calls, upstream counts %d; want 60 and 100", job, up.used)
	}
	mu.Lock()
	defer mu.Unlock()
	if trueUps != 40 {
		t.Fatalf("true-ups added %d units, want the other client's 40", trueUps)
	}
	if reports != job {
		t.Fatalf("%d report events for %d responses", reports, job)
	}
	if !refusal.RetryAt.Equal(up.reset) {
		t.Fatalf("refused until %v, want the upstream's reset %v", refusal.RetryAt, up.reset)
	}
	st, err := lim.Status(t.Context(), quota.Credential{Secret: "job-token"})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Used != up.used {
		t.Fatalf("store counts %d, upstream %d", st[0].Used, up.used)
	}
}

// TestTransportTrueDown: after the upstream's fixed window resets, a
// sliding budget still counts the last window's calls; with WithTrueDown
// the reports bring the count down, so the job goes on, and it still never
// draws a 429. Without it the job stops after what the sliding hour allows.
func TestTransportTrueDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []quota.TransportOption
		// want is how many of the 90 calls after the upstream's reset
		// are admitted: at least min, at most max.
		min, max int
	}{
		{"reports only add", nil, 21, 21},
		{"WithTrueDown", []quota.TransportOption{quota.WithTrueDown(30 * time.Second)}, 60, 90},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testkit.NewClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
			up := &fixedWindow{clock: clk.Now, limit: 100}
			srv := httptest.NewServer(up)
			t.Cleanup(srv.Close)
			lim, err := quota.New(quota.NewMemoryStore(), "fixed", []quota.Budget{{Name: "calls", Limit: 100, Window: quota.Sliding(time.Hour)}},
				quota.WithClock(clk.Now))
			if err != nil {
				t.Fatal(err)
			}
			opts := append([]quota.TransportOption{quota.WithCredential(quota.Credential{Secret: "job-token"})}, tc.opts...)
			client := &http.Client{Transport: quota.NewTransport(lim, headerReporter{}, opts...)}
			call := func() (bool, error) {
				resp, err := client.Get(srv.URL + "/x")
				var ee *quota.ExhaustedError
				if errors.As(err, &ee) {
					return false, nil
				}
				if err != nil {
					return false, err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return false, errors.New("upstream answered " + resp.Status)
				}
				return true, nil
			}
			// the upstream's window opens at 9:00; 80 calls from 9:50
			clk.Set(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
			if ok, err := call(); !ok || err != nil {
				t.Fatal(ok, err)
			}
			clk.Set(time.Date(2026, 11, 28, 9, 50, 0, 0, time.UTC))
			for range 79 {
				clk.Add(time.Second)
				if ok, err := call(); !ok || err != nil {
					t.Fatal(ok, err)
				}
			}
			// 10:05: the upstream's window reset at 10:00
			clk.Set(time.Date(2026, 11, 28, 10, 5, 0, 0, time.UTC))
			admitted := 0
			for range 90 {
				clk.Add(time.Second)
				ok, err := call()
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					admitted++
				}
			}
			if admitted < tc.min || admitted > tc.max {
				t.Fatalf("admitted %d of 90 after the reset, want %d..%d", admitted, tc.min, tc.max)
			}
			if up.quota != 0 {
				t.Fatalf("upstream sent %d 429s", up.quota)
			}
		})
	}
}
