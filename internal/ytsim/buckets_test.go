package ytsim_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/internal/ytsim"
)

type errorInfoBody struct {
	Error struct {
		Code    int
		Message string
		Status  string
		Errors  []struct{ Reason, Domain string }
		Details []struct {
			Type     string `json:"@type"`
			Reason   string
			Domain   string
			Metadata map[string]string
		}
	}
}

// A spent per-method bucket answers 429 with the ErrorInfo naming it; the
// shared pool keeps its 403 quotaExceeded; the table reads the 429 as the
// bucket spent until midnight Pacific.
func TestBucket429ErrorInfo(t *testing.T) {
	start := time.Date(2026, 7, 4, 0, 0, 0, 0, la(t))
	clk := testkit.NewClock(start.Add(15 * time.Hour))
	s := ytsim.New(ytsim.WithClock(clk.Now), ytsim.WithLimit("search", 2), ytsim.WithLimit("uploads", 1), ytsim.WithLimit("units", 1))
	defer s.Close()
	for range 2 {
		if code, _, b := get(t, s, "GET", "/youtube/v3/search?q=x&key=k"); code != 200 {
			t.Fatalf("%d %s", code, b)
		}
	}
	for _, c := range []struct {
		method, target, metric, limit, display, value string
	}{
		{"GET", "/youtube/v3/search?q=x&key=k", "youtube.googleapis.com/search_list", "defaultSearchListPerDayPerProject", "Search List", "2"},
		{"POST", "/upload/youtube/v3/videos?part=snippet&key=k", "youtube.googleapis.com/video_insert", "defaultVideoInsertPerDayPerProject", "Video Uploads", "1"},
	} {
		if c.method == "POST" { // spend the one upload first
			if code, _, b := get(t, s, c.method, c.target); code != 200 {
				t.Fatalf("first upload: %d %s", code, b)
			}
		}
		code, h, b := get(t, s, c.method, c.target)
		var e errorInfoBody
		if err := json.Unmarshal(b, &e); err != nil || code != 429 || h.Get("Content-Type") != "application/json; charset=UTF-8" {
			t.Fatalf("%s: %d %s", c.target, code, b)
		}
		wantMsg := "Quota exceeded for quota metric '" + c.display + "' and limit '" + c.display + " per day' of service 'youtube.googleapis.com' for consumer 'project_number:123456789'."
		if e.Error.Code != 429 || e.Error.Status != "RESOURCE_EXHAUSTED" || e.Error.Message != wantMsg ||
			len(e.Error.Errors) != 1 || e.Error.Errors[0].Reason != "rateLimitExceeded" || len(e.Error.Details) != 1 {
			t.Fatalf("%s: %s", c.target, b)
		}
		d := e.Error.Details[0]
		want := map[string]string{
			"consumer": "projects/123456789", "service": "youtube.googleapis.com", "quota_metric": c.metric, "quota_limit": c.limit,
			"quota_limit_value": c.value, "quota_unit": "1/d/{project}", "window_start_time": strconv.FormatInt(start.Unix(), 10),
		}
		if d.Type != "type.googleapis.com/google.rpc.ErrorInfo" || d.Reason != "RATE_LIMIT_EXCEEDED" || d.Domain != "googleapis.com" || len(d.Metadata) != len(want) {
			t.Fatalf("detail %+v", d)
		}
		for k, v := range want {
			if d.Metadata[k] != v {
				t.Fatalf("metadata %s = %q, want %q", k, d.Metadata[k], v)
			}
		}
		// The table the server enforces reads it as the method's bucket spent.
		req, _ := http.NewRequest(c.method, "https://www.googleapis.com"+c.target, nil)
		v := s.Table().Classify(req, &http.Response{StatusCode: code, Header: h}, b)
		budget := map[string]string{"GET": "search", "POST": "uploads"}[c.method]
		if !slices.Equal(v.Exhausted, []string{budget}) || v.Transient {
			t.Fatalf("%s: verdict %+v, want %s exhausted", c.target, v, budget)
		}
	}
	// The shared pool still answers 403 quotaExceeded.
	get(t, s, "GET", "/youtube/v3/videos?id=v&key=k")
	if code, _, b := get(t, s, "GET", "/youtube/v3/videos?id=v&key=k"); code != 403 || !json.Valid(b) || !strings.Contains(string(b), `"reason":"quotaExceeded"`) {
		t.Fatalf("units spent: %d %s", code, b)
	}
	if s.QuotaExceeded() != 3 || s.Used("k", "search") != 2 {
		t.Fatalf("exceeded %d, search used %d", s.QuotaExceeded(), s.Used("k", "search"))
	}
	// WithBucket(budget, Bucket{}) turns a bucket back into a 403 pool.
	s2 := ytsim.New(ytsim.WithLimit("search", 1), ytsim.WithBucket("search", ytsim.Bucket{}))
	defer s2.Close()
	get(t, s2, "GET", "/youtube/v3/search?q=x&key=k")
	if code, _, _ := get(t, s2, "GET", "/youtube/v3/search?q=x&key=k"); code != 403 {
		t.Fatalf("search without a bucket: %d, want 403", code)
	}
}

// Spend charges the project as an unmetered client would.
func TestSpend(t *testing.T) {
	s := ytsim.New(ytsim.WithProject("p", "k1", "k2"), ytsim.WithLimit("units", 100))
	defer s.Close()
	if !s.Spend("k2", "units", 99) || s.Spend("k1", "units", 2) || s.Spend("k1", "nope", 1) || s.Spend("k1", "units", 0) {
		t.Fatal("Spend: want 99 to fit, 2 more not, an unknown budget or 0 refused")
	}
	if s.Used("k1", "units") != 99 || s.Received("k1", "units") != 0 {
		t.Fatalf("used %d", s.Used("k1", "units"))
	}
	if code, _, _ := get(t, s, "GET", "/youtube/v3/videos?id=v&key=k1"); code != 200 {
		t.Fatal("the 100th unit")
	}
	if code, _, _ := get(t, s, "GET", "/youtube/v3/videos?id=v&key=k1"); code != 403 {
		t.Fatal("the 101st unit")
	}
}
