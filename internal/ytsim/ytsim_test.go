package ytsim_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/internal/ytsim"
)

func la(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func get(t *testing.T, s *ytsim.Server, method, target string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func TestMostPopularPaging(t *testing.T) {
	s := ytsim.New(ytsim.WithPopular(23))
	defer s.Close()
	var ids []string
	token := ""
	pages := 0
	for {
		code, _, b := get(t, s, "GET", "/youtube/v3/videos?part=snippet&chart=mostPopular&regionCode=de&maxResults=10&key=k&pageToken="+token)
		if code != 200 {
			t.Fatalf("status %d: %s", code, b)
		}
		var page ytsim.VideoListResponse
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		pages++
		for _, v := range page.Items {
			ids = append(ids, v.ID)
			if len(v.ID) != 11 || !strings.HasPrefix(v.Snippet.Title, "Trending in DE #") {
				t.Fatalf("item %+v", v)
			}
		}
		if page.PageInfo.TotalResults != 23 {
			t.Fatalf("pageInfo %+v", page.PageInfo)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if pages != 3 || len(ids) != 23 {
		t.Fatalf("%d pages, %d items; want 3, 23", pages, len(ids))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
	// Deterministic: the same page again, from another server.
	s2 := ytsim.New(ytsim.WithPopular(23))
	defer s2.Close()
	_, _, b := get(t, s2, "GET", "/youtube/v3/videos?chart=mostPopular&regionCode=DE&maxResults=10&key=other")
	var page ytsim.VideoListResponse
	_ = json.Unmarshal(b, &page)
	if page.Items[0].ID != ids[0] || page.Items[9].ID != ids[9] {
		t.Fatal("pages differ between servers")
	}
	if got := s.Used("k", "units"); got != 3 {
		t.Fatalf("used = %d, want 3", got)
	}
	// A token from another list is rejected (and billed, as Google does).
	code, _, b := get(t, s, "GET", "/youtube/v3/videos?chart=mostPopular&regionCode=US&key=k&pageToken="+page.NextPageToken)
	if code != 400 || !strings.Contains(string(b), "invalidPageToken") {
		t.Fatalf("status %d: %s", code, b)
	}
	if got := s.Used("k", "units"); got != 4 {
		t.Fatalf("used = %d, want 4", got)
	}
}

func TestSearchAndOtherRoutes(t *testing.T) {
	s := ytsim.New()
	defer s.Close()
	code, _, b := get(t, s, "GET", "/youtube/v3/search?part=snippet&q=cats&maxResults=3", "X-Goog-Api-Key", "k")
	var sr ytsim.SearchListResponse
	if code != 200 || json.Unmarshal(b, &sr) != nil || len(sr.Items) != 3 || sr.Items[0].ID.VideoID == "" || sr.NextPageToken == "" {
		t.Fatalf("search: %d %s", code, b)
	}
	for _, c := range []struct {
		method, path string
		code         int
		budget       string
		units        int64
	}{
		{"POST", "/youtube/v3/videos/rate?id=v&rating=like", 200, "units", 50},
		{"DELETE", "/youtube/v3/playlists?id=p", 204, "units", 50},
		{"GET", "/youtube/v3/captions/abc", 200, "units", 200},
		{"GET", "/youtube/v3/liveChat/messages?liveChatId=c", 200, "units", 5},
		{"POST", "/upload/youtube/v3/videos?uploadType=resumable", 200, "uploads", 1},
		{"PUT", "/upload/youtube/v3/videos?uploadType=resumable&upload_id=u", 200, "", 0},
		{"GET", "/youtube/v3/videos:batchGetStats?id=a", 200, "stats", 1},
	} {
		before := int64(0)
		if c.budget != "" {
			before = s.Used("k", c.budget)
		}
		code, _, b := get(t, s, c.method, c.path, "Authorization", "Bearer k")
		if code != c.code {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, b)
		}
		if c.budget != "" && s.Used("k", c.budget)-before != c.units {
			t.Fatalf("%s %s: charged %d, want %d", c.method, c.path, s.Used("k", c.budget)-before, c.units)
		}
	}
	if code, _, b := get(t, s, "GET", "/youtube/v3/nothing?key=k"); code != 404 || !strings.Contains(string(b), "notFound") {
		t.Fatalf("unknown route: %d %s", code, b)
	}
}

func TestKeys(t *testing.T) {
	s := ytsim.New(ytsim.WithKeys("good"))
	defer s.Close()
	for _, target := range []string{"/youtube/v3/videos?id=v", "/youtube/v3/videos?id=v&key=bad"} {
		code, _, b := get(t, s, "GET", target)
		var e struct {
			Error struct {
				Code   int
				Errors []struct{ Reason, Domain string }
			}
		}
		if code != 400 || json.Unmarshal(b, &e) != nil || e.Error.Code != 400 || e.Error.Errors[0].Reason != "keyInvalid" {
			t.Fatalf("%s: %d %s", target, code, b)
		}
	}
	if code, _, _ := get(t, s, "GET", "/youtube/v3/videos?id=v&key=good"); code != 200 {
		t.Fatalf("good key: %d", code)
	}
}

func TestQuotaEnforcedPerKeyAndResetAtMidnightPacific(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 7, 4, 23, 59, 0, 0, la(t)))
	s := ytsim.New(ytsim.WithClock(clk.Now), ytsim.WithLimit("units", 100))
	defer s.Close()
	rate := "/youtube/v3/videos/rate?id=v&rating=like&key=" // 50 units
	for range 2 {
		if code, _, b := get(t, s, "POST", rate+"a"); code != 200 {
			t.Fatalf("%d %s", code, b)
		}
	}
	code, _, b := get(t, s, "POST", rate+"a")
	want := `{"error":{"code":403,"message":"The request cannot be completed because you have exceeded your <a href=\"/youtube/v3/getting-started#quota\">quota</a>.","errors":[{"message":"The request cannot be completed because you have exceeded your <a href=\"/youtube/v3/getting-started#quota\">quota</a>.","domain":"youtube.quota","reason":"quotaExceeded"}]}}`
	if code != 403 || strings.TrimSpace(string(b)) != want {
		t.Fatalf("got %d %s\nwant 403 %s", code, b, want)
	}
	// Refused requests are received, not billed; other keys are separate.
	if s.Used("a", "units") != 100 || s.Received("a", "units") != 3 || s.Charged("a", "units") != 100 {
		t.Fatalf("used %d received %d charged %d", s.Used("a", "units"), s.Received("a", "units"), s.Charged("a", "units"))
	}
	if code, _, _ := get(t, s, "POST", rate+"b"); code != 200 {
		t.Fatal("key b refused")
	}
	// search.list has its own bucket.
	if code, _, _ := get(t, s, "GET", "/youtube/v3/search?q=x&key=a"); code != 200 {
		t.Fatal("search refused")
	}
	// Midnight Pacific: a new day.
	clk.Set(time.Date(2026, 7, 5, 0, 0, 0, 0, la(t)))
	if s.Used("a", "units") != 0 {
		t.Fatalf("used after midnight = %d", s.Used("a", "units"))
	}
	if code, _, _ := get(t, s, "POST", rate+"a"); code != 200 {
		t.Fatal("refused after midnight")
	}
	if s.Used("a", "units") != 50 || s.Charged("a", "units") != 150 {
		t.Fatalf("used %d charged %d", s.Used("a", "units"), s.Charged("a", "units"))
	}
}

func TestFaults(t *testing.T) {
	s := ytsim.New()
	defer s.Close()
	s.Inject(
		ytsim.Fault{Status: 503},
		ytsim.Fault{Status: 429, RetryAfter: 1500 * time.Millisecond},
		ytsim.Fault{Status: 429, Path: "/youtube/v3/search", Daily: true},
		ytsim.Fault{Status: 403},
	)
	target := "/youtube/v3/videos?id=v&key=k"
	code, _, b := get(t, s, "GET", target)
	if code != 503 || !strings.Contains(string(b), "backendError") {
		t.Fatalf("%d %s", code, b)
	}
	code, h, b := get(t, s, "GET", target)
	if code != 429 || h.Get("Retry-After") != "2" || !strings.Contains(string(b), "rateLimitExceeded") ||
		!strings.Contains(string(b), `"quota_limit":"DefaultRequestsPerMinutePerProject"`) || !strings.Contains(string(b), "RATE_LIMIT_EXCEEDED") {
		t.Fatalf("%d %v %s", code, h, b)
	}
	// The search fault waits for a search; the 403 comes next.
	code, _, b = get(t, s, "GET", target)
	if code != 403 || !strings.Contains(string(b), "quotaExceeded") {
		t.Fatalf("%d %s", code, b)
	}
	code, _, b = get(t, s, "GET", "/youtube/v3/search?q=x&key=k")
	if code != 429 || !strings.Contains(string(b), "per day") || !strings.Contains(string(b), "PerDayPerProject") {
		t.Fatalf("%d %s", code, b)
	}
	// Billing: the 503 and the per-minute 429 reached the upstream and are
	// billed; the quota refusals (403 quotaExceeded, the daily 429 on
	// search's own bucket) are not.
	if s.Used("k", "units") != 2 || s.Used("k", "search") != 0 || s.Received("k", "units") != 3 {
		t.Fatalf("units used %d, search used %d, received %d", s.Used("k", "units"), s.Used("k", "search"), s.Received("k", "units"))
	}
	// A dropped connection: no response at all, but billed.
	s.Inject(ytsim.Fault{Drop: true})
	req, _ := http.NewRequest("GET", s.URL()+target, nil)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("want a connection error")
	}
	var ue interface{ Timeout() bool }
	if errors.As(err, &ue) && ue.Timeout() {
		t.Fatalf("err = %v, want a broken connection", err)
	}
	if s.Used("k", "units") != 3 {
		t.Fatalf("used %d after the drop, want 3", s.Used("k", "units"))
	}
	if s.Requests() != 5 {
		t.Fatalf("requests = %d, want 5", s.Requests())
	}
}

func TestHandler(t *testing.T) {
	h := ytsim.NewHandler()
	if h.URL() != "" {
		t.Fatal("an unstarted server has no URL")
	}
	h.Close() // no-op
	req, _ := http.NewRequest("GET", "/youtube/v3/videos?chart=mostPopular&key=k", nil)
	rec := &recorder{h: http.Header{}}
	h.ServeHTTP(rec, req)
	if rec.code != 200 || h.Used("k", "units") != 1 {
		t.Fatalf("code %d used %d", rec.code, h.Used("k", "units"))
	}
}

type recorder struct {
	h    http.Header
	code int
	body strings.Builder
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) WriteHeader(c int)   { r.code = c }
func (r *recorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.body.Write(p)
}

// Every route of the cost table is served, and charged its cost.
func TestEveryRouteServedAndCharged(t *testing.T) {
	s := ytsim.New()
	defer s.Close()
	for _, m := range s.Table().Methods() {
		for _, r := range m.Routes {
			verb, target, _ := strings.Cut(r, " ")
			target = strings.NewReplacer("{resource...}", "videos", "{id}", "abc", "?upload_id", "?upload_id=u").Replace(target)
			sep := "?"
			if strings.Contains(target, "?") {
				sep = "&"
			}
			if m.Name == "videos.list" {
				target += sep + "chart=mostPopular"
				sep = "&"
			}
			key := "k-" + m.Name + "-" + verb + target
			code, _, b := get(t, s, verb, target+sep+"key="+strings.ReplaceAll(key, "&", "%26"))
			if code/100 != 2 {
				t.Fatalf("%s (%s): %d %s", r, m.Name, code, b)
			}
			for budget, units := range m.Cost {
				if got := s.Used(key, budget); got != units {
					t.Fatalf("%s: charged %d %s, want %d", r, got, budget, units)
				}
			}
			if m.Free && (s.Used(key, "units") != 0 || s.Requests() == 0) {
				t.Fatalf("%s: a free method was charged", r)
			}
		}
	}
}

// Keys of one project share its quota; a key no project claims is a
// project of its own.
func TestProjects(t *testing.T) {
	s := ytsim.New(ytsim.WithProject("proj-a", "k1", "k2"), ytsim.WithLimit("units", 3))
	defer s.Close()
	for i, k := range []string{"k1", "k2", "k1"} {
		if code, _, b := get(t, s, "GET", "/youtube/v3/videos?id=v&key="+k); code != 200 {
			t.Fatalf("call %d with %s: %d %s", i, k, code, b)
		}
	}
	code, _, b := get(t, s, "GET", "/youtube/v3/videos?id=v&key=k2")
	if code != 403 || !strings.Contains(string(b), "quotaExceeded") {
		t.Fatalf("4th call of the project: %d %s, want 403 quotaExceeded", code, b)
	}
	if s.Used("k1", "units") != 3 || s.Used("k2", "units") != 3 || s.Received("k1", "units") != 2 || s.Received("k2", "units") != 2 || s.QuotaExceeded() != 1 {
		t.Fatalf("used %d/%d received %d/%d exceeded %d", s.Used("k1", "units"), s.Used("k2", "units"), s.Received("k1", "units"), s.Received("k2", "units"), s.QuotaExceeded())
	}
	if s.Project("k1") != "proj-a" || s.Project("k3") != "k3" {
		t.Fatalf("projects %q %q", s.Project("k1"), s.Project("k3"))
	}
	// Another key is another project, with its own quota.
	if code, _, _ := get(t, s, "GET", "/youtube/v3/videos?id=v&key=k3"); code != 200 || s.Used("k3", "units") != 1 {
		t.Fatalf("k3: %d, used %d", code, s.Used("k3", "units"))
	}
}

// A channel past its upload cap gets 400 uploadLimitExceeded for 24 hours,
// billed; another channel of the project still uploads.
func TestUploadCap(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 7, 4, 10, 0, 0, 0, la(t)))
	s := ytsim.New(ytsim.WithClock(clk.Now), ytsim.WithUploadCap(2), ytsim.WithProject("p", "chan-a", "chan-b"))
	defer s.Close()
	up := "/upload/youtube/v3/videos?part=snippet&key="
	for i := 0; i < 2; i++ {
		if code, _, b := get(t, s, "POST", up+"chan-a"); code != 200 {
			t.Fatalf("upload %d: %d %s", i, code, b)
		}
	}
	code, _, b := get(t, s, "POST", up+"chan-a")
	if code != 400 || !strings.Contains(string(b), `"reason":"uploadLimitExceeded"`) || !strings.Contains(string(b), "youtube.video") {
		t.Fatalf("3rd upload: %d %s", code, b)
	}
	if s.Used("chan-a", "uploads") != 3 {
		t.Fatalf("uploads used %d, want 3 (the refused one billed)", s.Used("chan-a", "uploads"))
	}
	if code, _, _ := get(t, s, "POST", up+"chan-b"); code != 200 {
		t.Fatalf("another channel: %d", code)
	}
	clk.Set(clk.Now().Add(24*time.Hour + time.Second))
	if code, _, b := get(t, s, "POST", up+"chan-a"); code != 200 {
		t.Fatalf("after 24 hours: %d %s", code, b)
	}
}
