package costs_test

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/rlsim"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
)

// The ratelimit-headers profile over the real Transport against rlsim: an
// unmetered client spends the partition's quota; the upstream's 429 marks
// the budget spent, and the meter refuses the next call without sending it.
func TestRateLimitHeadersTransportAgainstSimulator(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	srv, err := rlsim.New([]rlsim.Policy{{Name: "permin", Quota: 10, Window: time.Minute}}, rlsim.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	u, _ := url.Parse(srv.URL())
	table, err := builtin(t, "ratelimit-headers").WithHosts(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := quota.New(quota.NewMemoryStore(), table.API, table.Budgets, quota.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: quota.NewTransport(lim, table, quota.WithRetryClock(clk, clk.NewTimer))}
	defer client.CloseIdleConnections()
	call := func() (*http.Response, error) {
		req, _ := http.NewRequest("GET", srv.URL()+"/v1/things", nil)
		req.Header.Set("Authorization", "Bearer key-1")
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	for i := range 3 {
		if resp, err := call(); err != nil || resp.StatusCode != 200 || resp.Header.Get("RateLimit") == "" {
			t.Fatalf("call %d: %v %v", i, resp, err)
		}
	}
	if !srv.Spend("key-1", 7) {
		t.Fatal("Spend")
	}
	_, err = call()
	var ex *quota.ExhaustedError
	if !errors.As(err, &ex) || ex.Budget != "requests" {
		t.Fatalf("err = %v, want requests spent", err)
	}
	sent := srv.Requests()
	if _, err := call(); !errors.Is(err, quota.ErrExhausted) || srv.Requests() != sent || srv.Refused() != 1 {
		t.Fatalf("err = %v; %d more sent, %d refused upstream", err, srv.Requests()-sent, srv.Refused())
	}
}

// TestRateLimitHeadersDrift: another client on the same key spends 40% of
// the upstream's 50 a minute while a metered job runs; the job learns the
// limit from RateLimit-Policy (50, under the profile's provisional 60) and
// the spending from RateLimit, never draws a 429, and stops locally when
// the upstream's remaining is 0.
func TestRateLimitHeadersDrift(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	srv, err := rlsim.New([]rlsim.Policy{{Name: "permin", Quota: 50, Window: time.Minute}}, rlsim.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	u, _ := url.Parse(srv.URL())
	table, err := builtin(t, "ratelimit-headers").WithHosts(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := quota.New(quota.NewMemoryStore(), table.API, table.Budgets, quota.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: quota.NewTransport(lim, table, quota.WithRetryClock(clk, clk.NewTimer),
		quota.WithCredential(quota.Credential{Secret: "key-1", Owner: "acct"}))}
	defer client.CloseIdleConnections()
	job := 0
	for i := range 100 {
		if i == 10 && !srv.Spend("key-1", 20) {
			t.Fatal("Spend")
		}
		req, _ := http.NewRequest("GET", srv.URL()+"/v1/things", nil)
		req.Header.Set("Authorization", "Bearer key-1")
		resp, err := client.Do(req)
		if errors.Is(err, quota.ErrExhausted) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		job++
	}
	if srv.Refused() != 0 || job != 30 || srv.Used("key-1", "permin") != 50 {
		t.Fatalf("job made %d calls, upstream refused %d and counts %d; want 30, 0, 50", job, srv.Refused(), srv.Used("key-1", "permin"))
	}
}
