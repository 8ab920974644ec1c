package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

func decodeJSON(t *testing.T, body string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, body)
	}
}

// TestAPIStatusEqualsStore: /api/status holds, for every credential and
// budget, exactly what the limiter reads from the store.
func TestAPIStatusEqualsStore(t *testing.T) {
	w := seed(t)
	srv := serve(t, w)
	code, body := get(t, srv, "/api/status")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var got []Status
	decodeJSON(t, body, &got)
	ctx := context.Background()
	type key struct{ api, label, budget string }
	want := map[key]quota.Usage{}
	for _, c := range []struct {
		l    *quota.Limiter
		cred quota.Credential
	}{{w.youtube, w.key1}, {w.youtube, w.key2}, {w.github, w.gh}} {
		us, err := c.l.Status(ctx, c.cred)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			want[key{c.l.API(), c.cred.Label, u.Budget}] = u
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(got), len(want), got)
	}
	for _, s := range got {
		u, ok := want[key{s.API, s.Credential, s.Budget}]
		if !ok {
			t.Errorf("unexpected row %+v", s)
			continue
		}
		if s.Used != u.Used || s.Limit != u.Limit || s.Remaining != u.Remaining || s.Window != u.Window.String() {
			t.Errorf("%s/%s %s: used %d limit %d remaining %d window %s; store says %d %d %d %s",
				s.API, s.Budget, s.Credential, s.Used, s.Limit, s.Remaining, s.Window, u.Used, u.Limit, u.Remaining, u.Window)
		}
		if (s.ExhaustedUntil == nil) != u.ExhaustedUntil.IsZero() || s.ExhaustedUntil != nil && !s.ExhaustedUntil.Equal(u.ExhaustedUntil) {
			t.Errorf("%s/%s %s: exhausted_until %v, store %v", s.API, s.Budget, s.Credential, s.ExhaustedUntil, u.ExhaustedUntil)
		}
		if len(s.Fingerprint) != quota.FingerprintLen {
			t.Errorf("fingerprint %q", s.Fingerprint)
		}
	}
	// Sorted by api, owner, budget.
	if !slices.IsSortedFunc(got, func(a, b Status) int {
		return strings.Compare(a.API+"\x00"+a.Credential+"\x00"+a.Budget, b.API+"\x00"+b.Credential+"\x00"+b.Budget)
	}) {
		t.Errorf("rows not sorted: %+v", got)
	}
	// The figures the issue names: 97% is 97, not a full bar; a marked
	// budget is 100%.
	for _, s := range got {
		switch {
		case s.Credential == "yt-key-1" && s.Budget == "units":
			if s.Used != 9700 || s.Percent != 97 {
				t.Errorf("yt-key-1 units: used %d, percent %d; want 9700, 97", s.Used, s.Percent)
			}
			// The daily reset: next midnight in Los Angeles.
			if want := time.Date(2026, 11, 23, 0, 0, 0, 0, la); s.Reset == nil || !s.Reset.Equal(want) || s.ResetSeconds != want.Sub(t0).Seconds() {
				t.Errorf("yt-key-1 units reset %v (%v s), want %v", s.Reset, s.ResetSeconds, want)
			}
		case s.Credential == "yt-key-2" && s.Budget == "units":
			if s.Percent != 100 || s.Remaining != 0 || s.Used != 2500 {
				t.Errorf("yt-key-2 units (marked spent): %+v", s)
			}
		}
	}
}

// TestAPIHistoryPerHourInBudgetZone: the chart data is per hour from the
// budget's local midnight, and its buckets add up to the store's entries.
func TestAPIHistoryPerHourInBudgetZone(t *testing.T) {
	w := seed(t)
	srv := serve(t, w, WithLocation(time.UTC)) // the display zone must not move a daily budget's hours
	_, body := get(t, srv, "/api/history")
	var got []History
	decodeJSON(t, body, &got)
	ctx := context.Background()
	found := 0
	for _, h := range got {
		if h.API != "youtube" || h.Credential != "yt-key-1" || h.Budget != "units" {
			continue
		}
		found++
		if h.Zone != "America/Los_Angeles" || h.EverySeconds != 3600 {
			t.Errorf("zone %q every %v", h.Zone, h.EverySeconds)
		}
		// 00:00 to 09:30 Los Angeles: 10 hourly buckets, the first at local midnight.
		if len(h.Buckets) != 10 || !h.Buckets[0].Start.Equal(time.Date(2026, 11, 22, 0, 0, 0, 0, la)) {
			t.Fatalf("%d buckets from %v", len(h.Buckets), h.Buckets[0].Start)
		}
		entries, err := w.youtube.Entries(ctx, w.key1, "units")
		if err != nil {
			t.Fatal(err)
		}
		var sum, used int64
		perHour := map[int]int64{}
		for _, e := range entries {
			used += e.Cost
			perHour[e.At.In(la).Hour()] += e.Cost
		}
		for i, b := range h.Buckets {
			sum += b.Units
			if b.Units != perHour[i] {
				t.Errorf("hour %02d: %d units, store's entries say %d", i, b.Units, perHour[i])
			}
		}
		if sum != used || h.Used != used || h.Used != 9700 || h.Limit != 10000 {
			t.Errorf("buckets sum %d, used %d, store %d", sum, h.Used, used)
		}
		if h.Buckets[9].Units != 1650 || h.Buckets[4].Units != 0 {
			t.Errorf("09:00 has %d units (want 1150+500), 04:00 has %d", h.Buckets[9].Units, h.Buckets[4].Units)
		}
	}
	if found != 1 {
		t.Fatalf("no history of youtube/units for yt-key-1 in %s", body)
	}
}

// TestAPIJobs: job runs with their outcome and units, as the jobs package
// recorded them.
func TestAPIJobs(t *testing.T) {
	w := seed(t)
	srv := serve(t, w)
	_, body := get(t, srv, "/api/jobs")
	var got []Job
	decodeJSON(t, body, &got)
	recs, err := jobs.History(context.Background(), w.store, "trending", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Job != "trending" || len(got[0].Runs) != 2 || got[0].Last == nil {
		t.Fatalf("jobs %s", body)
	}
	for i, r := range got[0].Runs {
		if r.Run != recs[i].Run || r.Outcome != recs[i].Outcome || r.Spent["youtube/search"] != recs[i].Spent["youtube/search"] {
			t.Errorf("run %d: %+v, store %+v", i, r, recs[i])
		}
	}
	if got[0].Last.Outcome != jobs.Exhausted || got[0].Last.Spent["youtube/search"] != 89 || got[0].Runs[1].Spent["youtube/search"] != 3 {
		t.Errorf("last run %+v; first %+v", got[0].Last, got[0].Runs[1])
	}
	code, one := get(t, srv, "/api/jobs/trending")
	var j Job
	decodeJSON(t, one, &j)
	if code != 200 || j.Job != "trending" || len(j.Runs) != 2 {
		t.Errorf("/api/jobs/trending: %d %s", code, one)
	}
	if code, _ := get(t, srv, "/api/jobs/nope"); code != http.StatusNotFound {
		t.Errorf("/api/jobs/nope: %d", code)
	}
}

// TestThresholdsDerived: the crossings are the charges that first reached
// each level in the window.
func TestThresholdsDerived(t *testing.T) {
	w := seed(t)
	srv := serve(t, w)
	_, body := get(t, srv, "/api/thresholds")
	var th Thresholds
	decodeJSON(t, body, &th)
	if !th.Derived || !slices.Equal(th.Levels, []int64{50, 80, 95, 100}) {
		t.Errorf("derived %v levels %v", th.Derived, th.Levels)
	}
	got := map[string]Crossing{}
	for _, c := range th.Crossings {
		got[fmt.Sprintf("%s/%s/%s/%d", c.API, c.Credential, c.Budget, c.Percent)] = c
	}
	// yt-key-1's units: 1,150 per hour-slot; 5,000 is reached by the first
	// charge of the 5th slot (06:04: 4*1150+400 = 5,000).
	day := time.Date(2026, 11, 22, 0, 0, 0, 0, la)
	c50, ok := got["youtube/yt-key-1/units/50"]
	if !ok || !c50.At.Equal(day.Add(6*time.Hour+4*time.Minute)) || c50.Used != 5000 {
		t.Errorf("50%% crossing %+v", c50)
	}
	c80 := got["youtube/yt-key-1/units/80"]
	if c80.Used != 8050 { // 7*1150 = 8,050 at the end of the 7th slot
		t.Errorf("80%% crossing %+v", c80)
	}
	if _, ok := got["youtube/yt-key-1/units/100"]; ok {
		t.Error("97% crossed 100%")
	}
	if _, ok := got["youtube/yt-key-1/search/100"]; !ok {
		t.Errorf("search spent: no 100%% crossing in %s", body)
	}
	if _, ok := got["youtube/yt-key-2/units/50"]; ok {
		t.Error("yt-key-2 at 25% crossed 50%")
	}
}

// TestMetricsExactSeries: /metrics holds exactly the store's gauges.
func TestMetricsExactSeries(t *testing.T) {
	w := seed(t)
	srv := serve(t, w)
	code, body := get(t, srv, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics %d", code)
	}
	var lines []string
	for l := range strings.Lines(body) {
		if strings.HasPrefix(l, "quota_store_") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	reset := time.Date(2026, 11, 23, 0, 0, 0, 0, la).Sub(t0).Seconds() // 14.5h
	gh := `github",budget="core",owner="` + strings.NewReplacer(`"`, `\"`).Replace(nastyLabel) + `"}`
	want := []string{
		`quota_store_exhausted{api="github",budget="core",owner="` + gh[len(`github",budget="core",owner="`):] + ` 0`,
		`quota_store_exhausted{api="youtube",budget="search",owner="yt-key-1"} 0`,
		`quota_store_exhausted{api="youtube",budget="search",owner="yt-key-2"} 0`,
		`quota_store_exhausted{api="youtube",budget="units",owner="yt-key-1"} 0`,
		`quota_store_exhausted{api="youtube",budget="units",owner="yt-key-2"} 1`,
		`quota_store_limit_units{api="` + gh + ` 5000`,
		`quota_store_limit_units{api="youtube",budget="search",owner="yt-key-1"} 100`,
		`quota_store_limit_units{api="youtube",budget="search",owner="yt-key-2"} 100`,
		`quota_store_limit_units{api="youtube",budget="units",owner="yt-key-1"} 10000`,
		`quota_store_limit_units{api="youtube",budget="units",owner="yt-key-2"} 10000`,
		`quota_store_remaining_units{api="` + gh + ` 3766`,
		`quota_store_remaining_units{api="youtube",budget="search",owner="yt-key-1"} 0`,
		`quota_store_remaining_units{api="youtube",budget="search",owner="yt-key-2"} 100`,
		`quota_store_remaining_units{api="youtube",budget="units",owner="yt-key-1"} 300`,
		`quota_store_remaining_units{api="youtube",budget="units",owner="yt-key-2"} 0`,
		// github's oldest entry (50 minutes old) leaves its hour in 10 minutes.
		`quota_store_reset_seconds{api="` + gh + ` 600`,
		fmt.Sprintf(`quota_store_reset_seconds{api="youtube",budget="search",owner="yt-key-1"} %g`, reset),
		fmt.Sprintf(`quota_store_reset_seconds{api="youtube",budget="search",owner="yt-key-2"} %g`, reset),
		fmt.Sprintf(`quota_store_reset_seconds{api="youtube",budget="units",owner="yt-key-1"} %g`, reset),
		fmt.Sprintf(`quota_store_reset_seconds{api="youtube",budget="units",owner="yt-key-2"} %g`, reset),
		`quota_store_up 1`,
		`quota_store_used_units{api="` + gh + ` 1234`,
		`quota_store_used_units{api="youtube",budget="search",owner="yt-key-1"} 100`,
		`quota_store_used_units{api="youtube",budget="search",owner="yt-key-2"} 0`,
		`quota_store_used_units{api="youtube",budget="units",owner="yt-key-1"} 9700`,
		`quota_store_used_units{api="youtube",budget="units",owner="yt-key-2"} 2500`,
	}
	if !slices.Equal(lines, want) {
		t.Errorf("series:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// TestTokenRequired: with a token, nothing is served without it; a bearer
// header or the login form's cookie opens it; the token appears in no
// response and not in the cookie.
func TestTokenRequired(t *testing.T) {
	const token = "s3cret-dashboard-token-XYZ"
	w := seed(t)
	srv := serve(t, w, WithToken(token))
	for _, p := range []string{"/", "/api/status", "/api/snapshot", "/metrics", "/events", "/fragment", "/api/jobs/trending"} {
		if code, _ := get(t, srv, p); code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", p, code)
		}
		if code, _ := get(t, srv, p, "Authorization", "Bearer wrong"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d, want 401", p, code)
		}
	}
	// A browser is sent to the login form.
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.Header.Set("Accept", "text/html")
	noRedirect := *srv.Client()
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("browser without a session: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	code, body := get(t, srv, "/api/status", "Authorization", "Bearer "+token)
	if code != 200 || !strings.Contains(body, "yt-key-1") {
		t.Errorf("with the token: %d %.100s", code, body)
	}
	// The login form: a wrong token is refused, the right one sets a cookie.
	resp, err = noRedirect.PostForm(srv.URL+"/login", url.Values{"token": {"nope"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("wrong login: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	resp, err = noRedirect.PostForm(srv.URL+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].HttpOnly || strings.Contains(cookies[0].Value, token) {
		t.Fatalf("login: %d, cookies %v", resp.StatusCode, cookies)
	}
	code, page := get(t, srv, "/", "Cookie", cookies[0].Name+"="+cookies[0].Value)
	if code != 200 || !strings.Contains(page, "yt-key-1") {
		t.Errorf("page with the session cookie: %d", code)
	}
	if code, _ := get(t, srv, "/", "Cookie", cookies[0].Name+"="+cookies[0].Value+"0"); code != http.StatusUnauthorized {
		t.Errorf("a forged cookie: %d", code)
	}
	for _, p := range []string{"/", "/login", "/api/snapshot", "/metrics", "/fragment"} {
		if _, b := get(t, srv, p, "Authorization", "Bearer "+token); strings.Contains(b, token) {
			t.Errorf("%s shows the token", p)
		}
	}
}

// TestNoSecretInAnyPage: no credential secret in anything served, and
// labels are escaped in HTML.
func TestNoSecretInAnyPage(t *testing.T) {
	w := seed(t)
	srv := serve(t, w)
	for _, p := range []string{"/", "/fragment", "/login", "/api/snapshot", "/api/status", "/api/history", "/api/jobs", "/api/thresholds", "/metrics", "/assets/app.js", "/assets/style.css"} {
		code, body := get(t, srv, p)
		if code != 200 {
			t.Errorf("%s: %d", p, code)
		}
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("%s shows secret %q", p, s)
			}
		}
		if p == "/metrics" {
			// Prometheus text, not HTML: label values are quoted, and
			// nosniff keeps a browser from reading it as a page.
			if ct := "text/plain"; !strings.Contains(metricsType(t, srv), ct) {
				t.Errorf("/metrics is not %s", ct)
			}
			continue
		}
		if strings.Contains(body, nastyLabel) || strings.Contains(body, "<img") {
			t.Errorf("%s holds the label unescaped", p)
		}
	}
	_, page := get(t, srv, "/")
	// Works with no internet access: nothing loaded from another origin.
	for _, attr := range []string{`src="http`, `href="http`, `src="//`, `href="//`, "@import", "url("} {
		if strings.Contains(page, attr) {
			t.Errorf("the page refers elsewhere: %s", attr)
		}
	}
	if !strings.Contains(page, "&lt;img src=x onerror=alert(1)&gt;&amp;&#34;ci&#34;") {
		t.Errorf("the page does not show the label escaped")
	}
	ev := firstEvent(t, srv, "/events", "main")
	for _, s := range secrets {
		if strings.Contains(ev, s) {
			t.Errorf("/events shows secret %q", s)
		}
	}
}

func metricsType(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("/metrics without nosniff")
	}
	return resp.Header.Get("Content-Type")
}

// sse reads a server-sent event stream.
type sse struct {
	sc    *bufio.Scanner
	close func()
}

func openEvents(t *testing.T, srv *httptest.Server, path string) *sse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	s := &sse{sc: sc, close: func() { cancel(); resp.Body.Close() }}
	t.Cleanup(s.close)
	return s
}

// next returns the data of the next event named name.
func (s *sse) next(t *testing.T, name string) string {
	t.Helper()
	event, data := "", []string{}
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if event == name {
				return strings.Join(data, "\n")
			}
			event, data = "", nil
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
	t.Fatalf("stream ended before a %q event: %v", name, s.sc.Err())
	return ""
}

func firstEvent(t *testing.T, srv *httptest.Server, path, name string) string {
	t.Helper()
	return openEvents(t, srv, path).next(t, name)
}

// TestEventsFollowTheStore: the live stream sends the page's main part at
// once, and again when another process charges the store.
func TestEventsFollowTheStore(t *testing.T) {
	w := seed(t)
	srv := serve(t, w, WithRefresh(5*time.Millisecond))
	ev := openEvents(t, srv, "/events")
	first := ev.next(t, "main")
	if !strings.Contains(first, `data-field="used">9,700<`) {
		t.Fatalf("first event lacks yt-key-1's 9,700 units:\n%s", first)
	}
	if _, err := w.youtube.Take(context.Background(), w.key1, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 100}}); err != nil {
		t.Fatal(err)
	}
	// The stream sends "same" while nothing changes and "main" on a change.
	// The page reads several things from the store one after the other, so
	// one refresh may catch the chart before the table: read until the
	// table shows the charge (the stream's context bounds the wait).
	for {
		next := ev.next(t, "main")
		if strings.Contains(next, `data-field="used">9,800<`) {
			if !strings.Contains(next, `data-field="percent">98%<`) {
				t.Errorf("9,800 of 10,000 is not shown as 98%%")
			}
			return
		}
	}
}

// countingStore counts how often the dashboard lists a real store.
type countingStore struct {
	*sqlitestore.Store
	lists atomic.Int64
}

func (c *countingStore) List(ctx context.Context) ([]quota.APIInfo, error) {
	c.lists.Add(1)
	return c.Store.List(ctx)
}

// TestEventsShareOneRead: five open pages cost one store read per refresh,
// not five.
func TestEventsShareOneRead(t *testing.T) {
	w := seed(t)
	cs := &countingStore{Store: w.store}
	h, err := New(cs, WithClock(w.clock.Now), WithLocation(la), WithRefresh(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for range 5 {
		if ev := openEvents(t, srv, "/events").next(t, "main"); !strings.Contains(ev, "yt-key-1") {
			t.Fatal("no budgets in the event")
		}
	}
	if n := cs.lists.Load(); n != 1 {
		t.Errorf("5 pages read the store %d times, want 1", n)
	}
}

// TestOwnerGroupsCredentials: two keys of one owner (a Cloud project) are
// one budget on the page, in the API and in /metrics.
func TestOwnerGroupsCredentials(t *testing.T) {
	st, err := sqlitestore.Open(t.TempDir() + "/quota.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := testkit.NewClock(t0)
	l, err := quota.New(st, "youtube", []quota.Budget{{Name: "units", Limit: 10000, Window: quota.Daily(la)}}, quota.WithClock(c.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, k := range []quota.Credential{{Secret: "AIza-owner-one", Label: "k1", Owner: "proj-a"}, {Secret: "AIza-owner-two", Label: "k2", Owner: "proj-a"}} {
		if _, err := l.Take(ctx, k, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": int64(100 * (i + 1))}}); err != nil {
			t.Fatal(err)
		}
	}
	srv := serve(t, &world{store: st, clock: c})
	_, body := get(t, srv, "/api/status")
	var rows []Status
	decodeJSON(t, body, &rows)
	if len(rows) != 1 || rows[0].Owner != "proj-a" || rows[0].Used != 300 || len(rows[0].Credentials) != 2 {
		t.Fatalf("status: %s", body)
	}
	_, page := get(t, srv, "/")
	if !strings.Contains(page, `<span class="oname">proj-a</span><div class="sub">k1, k2</div>`) {
		t.Errorf("the page does not show the owner with its keys")
	}
	_, metrics := get(t, srv, "/metrics")
	if !strings.Contains(metrics, `quota_store_used_units{api="youtube",budget="units",owner="proj-a"} 300`) || strings.Count(metrics, "quota_store_used_units{") != 1 {
		t.Errorf("metrics:\n%s", metrics)
	}
}

// TestOperatorOverride: a budget an operator set ('quotactl budget set') is
// the one in force: the page, the API and /metrics show its limit.
func TestOperatorOverride(t *testing.T) {
	w := seed(t)
	b := quota.Budget{Name: "units", Limit: 20000, Window: quota.Daily(la)}
	if err := quota.SetOverride(context.Background(), w.store, "youtube", b, t0); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, w)
	_, body := get(t, srv, "/api/status")
	var rows []Status
	decodeJSON(t, body, &rows)
	n := 0
	for _, r := range rows {
		if r.API == "youtube" && r.Budget == "units" {
			n++
			if r.Limit != 20000 || r.Source != quota.SourceOperator {
				t.Errorf("%s: limit %d source %q, want 20000 operator", r.Credential, r.Limit, r.Source)
			}
		}
		if r.API == "youtube" && r.Budget == "search" && r.Source != quota.SourceProgram {
			t.Errorf("search: source %q", r.Source)
		}
	}
	if n != 2 {
		t.Errorf("%d youtube/units rows", n)
	}
	if _, m := get(t, srv, "/metrics"); !strings.Contains(m, `quota_store_limit_units{api="youtube",budget="units",owner="yt-key-1"} 20000`) {
		t.Errorf("/metrics does not show the operator's limit")
	}
}

// TestResetSecondsWhileMarkedSpent: a sliding budget the upstream marked
// spent for three hours frees nothing before the mark ends, though its
// oldest entry leaves the window in ten minutes: /api/status and
// quota_store_reset_seconds say three hours, so the README's alert
// (remaining < 20% and reset_seconds > 2h) fires.
func TestResetSecondsWhileMarkedSpent(t *testing.T) {
	w := seed(t)
	if err := w.github.Exhaust(context.Background(), w.gh, "core", t0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, w)
	code, body := get(t, srv, "/api/status")
	if code != http.StatusOK {
		t.Fatalf("/api/status: %d %s", code, body)
	}
	var got []Status
	decodeJSON(t, body, &got)
	found := false
	for _, s := range got {
		if s.API == "github" && s.Budget == "core" {
			found = true
			if s.ResetSeconds != 3*3600 {
				t.Errorf("github/core marked spent for 3h: reset_seconds %v, want %v", s.ResetSeconds, 3*3600)
			}
		}
	}
	if !found {
		t.Fatalf("no github/core row in %s", body)
	}
	_, metrics := get(t, srv, "/metrics")
	if want := `quota_store_reset_seconds{api="github",budget="core",owner=` + fmt.Sprintf("%q", nastyLabel) + `} 10800`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s:\n%s", want, metrics)
	}
}

// TestRotatedKeyOwnerName: after a key rotation the account is the old
// key's fingerprint; the page names it by its first 8 digits, as quotactl
// status and /metrics do, never by the whole fingerprint.
func TestRotatedKeyOwnerName(t *testing.T) {
	st, err := sqlitestore.Open(t.TempDir() + "/quota.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := testkit.NewClock(t0)
	l, err := quota.New(st, "youtube", []quota.Budget{{Name: "units", Limit: 10000, Window: quota.Daily(la)}}, quota.WithClock(c.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Take(ctx, quota.Credential{Secret: "AIza-old-key", Label: "yt-key-1"}, quota.Units("units", 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Rotate(ctx, "yt-key-1", quota.Credential{Secret: "AIza-new-key"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx, quota.Credential{Secret: "AIza-new-key", Label: "yt-key-1"}, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	old := quota.DefaultFingerprint("AIza-old-key")
	srv := serve(t, &world{store: st, clock: c})
	_, page := get(t, srv, "/")
	if want := `<span class="oname">` + old[:8] + `</span>`; !strings.Contains(page, want) || strings.Contains(page, `<span class="oname">`+old+`</span>`) {
		t.Errorf("the page does not name the rotated key's owner %s", want)
	}
	_, metrics := get(t, srv, "/metrics")
	if want := `quota_store_used_units{api="youtube",budget="units",owner="` + old[:8] + `"} 6`; !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %s:\n%s", want, metrics)
	}
}

// TestOwnerLimitSources: owners' own limits (an operator's, one learned
// from the upstream) are what /api/status, the page and /metrics show, and
// each says where it comes from.
func TestOwnerLimitSources(t *testing.T) {
	w := seed(t)
	ctx := context.Background()
	fp1, fp2 := w.youtube.Fingerprint(secrets[0]), w.youtube.Fingerprint(secrets[1])
	if err := quota.SetOwnerLimit(ctx, w.store, "youtube", fp1, "units", 50000, t0); err != nil {
		t.Fatal(err)
	}
	if applied, err := w.youtube.LearnLimit(ctx, fp2, "units", 5000); err != nil || !applied {
		t.Fatalf("LearnLimit = %v, %v", applied, err)
	}
	if applied, err := w.youtube.LearnLimit(ctx, fp2, "search", 400); err != nil || applied {
		t.Fatalf("LearnLimit(larger) = %v, %v; want recorded, not applied", applied, err)
	}
	srv := serve(t, w)
	_, body := get(t, srv, "/api/status")
	var rows []Status
	decodeJSON(t, body, &rows)
	want := map[string]struct {
		limit, learned int64
		src            quota.Source
		own            bool
	}{
		"yt-key-1/units":  {50000, 0, quota.SourceOperator, true},
		"yt-key-2/units":  {5000, 5000, quota.SourceUpstream, true},
		"yt-key-2/search": {100, 400, quota.SourceProgram, false},
		"yt-key-1/search": {100, 0, quota.SourceProgram, false},
	}
	for _, r := range rows {
		wr, ok := want[r.Credential+"/"+r.Budget]
		if r.API != "youtube" || !ok {
			continue
		}
		delete(want, r.Credential+"/"+r.Budget)
		if r.Limit != wr.limit || r.LimitSource != wr.src || r.OwnLimit != wr.own || r.LearnedLimit != wr.learned {
			t.Errorf("%s/%s: limit %d from %q (own %v, learned %d); want %+v", r.Credential, r.Budget, r.Limit, r.LimitSource, r.OwnLimit, r.LearnedLimit, wr)
		}
	}
	if len(want) > 0 {
		t.Errorf("rows missing from /api/status: %v", want)
	}
	if !strings.Contains(body, `"limit_source": "operator"`) {
		t.Errorf("/api/status has no limit_source field:\n%s", body)
	}
	_, page := get(t, srv, "/")
	for _, s := range []string{`<span data-field="limit">50,000</span>`, ">operator (owner)</div>", ">upstream (owner)</div>", ">program; upstream says 400</div>"} {
		if !strings.Contains(page, s) {
			t.Errorf("the page does not show %q", s)
		}
	}
	if _, m := get(t, srv, "/metrics"); !strings.Contains(m, `quota_store_limit_units{api="youtube",budget="units",owner="yt-key-1"} 50000`) {
		t.Errorf("/metrics does not show the owner's limit")
	}
}
