package rlsim_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/rlsim"
	"github.com/quotactl/quotactl/internal/testkit"
)

var t0 = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

func get(t *testing.T, s *rlsim.Server, key string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL()+"/v1/things", nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func pk(key string) string {
	return ":" + base64.StdEncoding.EncodeToString(rlsim.PartitionKey(key)) + ":"
}

func newServer(t *testing.T, clk *testkit.Clock, opts ...rlsim.Option) *rlsim.Server {
	t.Helper()
	s, err := rlsim.New([]rlsim.Policy{{Name: "burst", Quota: 3, Window: 10 * time.Second}, {Name: "daily", Quota: 5, Window: 24 * time.Hour}},
		append([]rlsim.Option{rlsim.WithClock(clk.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestFieldsAndFixedWindows(t *testing.T) {
	clk := testkit.NewClock(t0)
	s := newServer(t, clk)
	p := pk("k1")
	wantPolicy := `"burst";q=3;w=10;pk=` + p + `, "daily";q=5;w=86400;pk=` + p
	for i, want := range []string{
		`"burst";r=2;t=10;pk=` + p + `, "daily";r=4;t=86400;pk=` + p,
		`"burst";r=1;t=6;pk=` + p + `, "daily";r=3;t=86396;pk=` + p,
		`"burst";r=0;t=2;pk=` + p + `, "daily";r=2;t=86392;pk=` + p,
	} {
		code, h, _ := get(t, s, "k1")
		if code != 200 || h.Get("RateLimit") != want || h.Get("RateLimit-Policy") != wantPolicy {
			t.Fatalf("call %d: %d\nRateLimit:        %s\nwant              %s\nRateLimit-Policy: %s", i, code, h.Get("RateLimit"), want, h.Get("RateLimit-Policy"))
		}
		if strings.Contains(h.Get("RateLimit")+h.Get("RateLimit-Policy"), "k1") {
			t.Fatal("the key itself is in a field")
		}
		clk.Add(4 * time.Second)
	}
	// 12s after the first call the burst window (10s from it) has reset.
	code, h, _ := get(t, s, "k1")
	if code != 200 || !strings.HasPrefix(h.Get("RateLimit"), `"burst";r=2;t=10;`) || !strings.Contains(h.Get("RateLimit"), `"daily";r=1;`) {
		t.Fatalf("after the burst window: %d %s", code, h.Get("RateLimit"))
	}
	if s.Used("k1", "daily") != 4 || s.Used("k1", "burst") != 1 {
		t.Fatalf("used daily %d burst %d", s.Used("k1", "daily"), s.Used("k1", "burst"))
	}
}

func TestRefusalAndPartitions(t *testing.T) {
	clk := testkit.NewClock(t0)
	s := newServer(t, clk, rlsim.WithLegacyFields())
	// Another client, unmetered, spends 4 of k1's daily 5 (and its burst).
	if !s.Spend("k1", 3) || s.Spend("k1", 1) {
		t.Fatal("Spend: 3 should fit the burst, then 1 more should not")
	}
	code, h, b := get(t, s, "k1")
	if code != 429 || h.Get("Retry-After") != "10" {
		t.Fatalf("%d retry-after %q", code, h.Get("Retry-After"))
	}
	var prob struct {
		Type     string
		Title    string
		Violated []string `json:"violated-policies"`
	}
	if err := json.Unmarshal(b, &prob); err != nil || prob.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" ||
		len(prob.Violated) != 1 || prob.Violated[0] != "burst" || h.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("problem %s", b)
	}
	if h.Get("RateLimit-Limit") != "3" || h.Get("RateLimit-Remaining") != "0" || h.Get("RateLimit-Reset") != "10" {
		t.Fatalf("legacy fields %v", h)
	}
	// Another key is another partition.
	if code, h, _ := get(t, s, "k2"); code != 200 || !strings.Contains(h.Get("RateLimit"), pk("k2")) {
		t.Fatalf("k2: %d %v", code, h)
	}
	clk.Add(10 * time.Second)
	get(t, s, "k1")
	get(t, s, "k1")
	clk.Add(10 * time.Second)
	code, h, b = get(t, s, "k1") // daily: 3 spent + 2 = 5
	if code != 429 || !strings.Contains(string(b), `"daily"`) || h.Get("Retry-After") != "86380" {
		t.Fatalf("daily spent: %d %s retry-after %s", code, b, h.Get("Retry-After"))
	}
	if s.Requests() != 5 || s.Served() != 3 || s.Refused() != 2 {
		t.Fatalf("requests %d served %d refused %d", s.Requests(), s.Served(), s.Refused())
	}
}

func TestKeysAndBadPolicies(t *testing.T) {
	for _, r := range []*http.Request{
		httptest.NewRequest("GET", "/?key=q", nil),
		func() *http.Request {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("X-Api-Key", "q")
			return r
		}(),
		func() *http.Request {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Authorization", "bearer q")
			return r
		}(),
	} {
		if rlsim.Key(r) != "q" {
			t.Fatalf("key of %v", r)
		}
	}
	for _, ps := range [][]rlsim.Policy{
		nil,
		{{Name: "", Quota: 1, Window: time.Second}},
		{{Name: "a\nb", Quota: 1, Window: time.Second}},
		{{Name: "a", Quota: 0, Window: time.Second}},
		{{Name: "a", Quota: 1, Window: 1500 * time.Millisecond}},
		{{Name: "a", Quota: 1, Window: time.Second}, {Name: "a", Quota: 2, Window: time.Second}},
	} {
		if _, err := rlsim.NewHandler(ps); err == nil {
			t.Fatalf("%+v: want an error", ps)
		}
	}
	h, err := rlsim.NewHandler([]rlsim.Policy{{Name: `we"ird\`, Quota: 1, Window: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if got := rec.Header().Get("RateLimit-Policy"); !strings.HasPrefix(got, `"we\"ird\\";q=1;w=1;pk=:`) || rec.Code != 200 {
		t.Fatalf("%d %q", rec.Code, got)
	}
}
