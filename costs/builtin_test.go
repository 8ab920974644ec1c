package costs_test

import (
	"errors"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/quota"
)

func builtin(t testing.TB, name string) *costs.Table {
	t.Helper()
	tb, err := costs.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// youtubeBuiltins are the built-in YouTube tables.
func youtubeBuiltins() []string {
	var out []string
	for _, n := range costs.Builtins() {
		if strings.HasPrefix(n, "youtube") {
			out = append(out, n)
		}
	}
	return out
}

func TestBuiltins(t *testing.T) {
	if got := costs.Builtins(); !slices.Equal(got, []string{"anthropic", "github", "openai", "ratelimit-headers", "shopify-admin", "youtube", "youtube-2025-12", "youtube-legacy"}) {
		t.Fatalf("Builtins() = %v", got)
	}
	_, err := costs.Builtin("tiktok")
	if err == nil || !strings.Contains(err.Error(), "anthropic, github, openai, ratelimit-headers, shopify-admin, youtube, youtube-2025-12, youtube-legacy") {
		t.Fatalf("unknown builtin: err = %v, want it to list the built-in tables", err)
	}
	for _, bad := range []string{"", "../costs", "profiles/youtube", "youtube.yaml"} {
		if _, err := costs.Builtin(bad); err == nil {
			t.Errorf("Builtin(%q): want an error", bad)
		}
	}
	// Each call returns its own copy of the exported fields.
	a, b := builtin(t, "youtube"), builtin(t, "youtube")
	a.Budgets[0].Limit = 1
	if b.Budgets[0].Limit != 10000 {
		t.Fatal("Builtin shares Budgets between calls")
	}
}

func TestYouTubeBudgets(t *testing.T) {
	tb := builtin(t, "youtube")
	if tb.API != "youtube" || !strings.Contains(tb.Source, "developers.google.com/youtube") {
		t.Fatalf("API %q, Source %q", tb.API, tb.Source)
	}
	want := map[string]int64{"units": 10000, "search": 100, "uploads": 100, "stats": 10000}
	if len(tb.Budgets) != len(want) {
		t.Fatalf("budgets = %v", tb.Budgets)
	}
	for _, b := range tb.Budgets {
		if want[b.Name] != b.Limit || !b.Window.IsDaily() || b.Window.Location().String() != "America/Los_Angeles" {
			t.Errorf("budget %+v", b)
		}
	}
	// The table works as is with a Limiter.
	if _, err := quota.New(quota.NewMemoryStore(), tb.API, tb.Budgets); err != nil {
		t.Fatal(err)
	}
}

func TestYouTubeCosts(t *testing.T) {
	tb := builtin(t, "youtube")
	for method, want := range map[string]map[string]int64{
		"videos.list":                  {"units": 1},
		"videos.update":                {"units": 50},
		"videos.insert":                {"uploads": 1},
		"videos.batchGetStats":         {"stats": 1},
		"search.list":                  {"search": 1},
		"captions.insert":              {"units": 400},
		"captions.update":              {"units": 450},
		"captions.list":                {"units": 50},
		"liveChatMessages.list":        {"units": 5},
		"activities.list":              {"units": 1},
		"channelBanners.insert":        {"units": 50},
		"comments.setModerationStatus": {"units": 50},
		"thumbnails.set":               {"units": 50},
		"watermarks.unset":             {"units": 50},
		"videos.getRating":             {"units": 1},
		"liveBroadcasts.bind":          {"units": 50},
		"liveChatModerators.list":      {"units": 5},
		"liveChatMessages.streamList":  {"units": 5},
	} {
		ch, err := tb.Charge(method)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if ch.Method != method || !maps.Equal(ch.Units, want) {
			t.Errorf("%s costs %v, want %v", method, ch.Units, want)
		}
	}
	// Every documented resource is priced.
	resources := map[string]bool{}
	for _, m := range tb.Methods() {
		r, _, _ := strings.Cut(m.Name, ".")
		resources[r] = true
	}
	for _, r := range []string{
		"activities", "captions", "channelBanners", "channels", "channelSections", "comments", "commentThreads",
		"guideCategories", "i18nLanguages", "i18nRegions", "members", "membershipsLevels", "playlistImages",
		"playlistItems", "playlists", "search", "subscriptions", "superChatEvents", "tests", "thirdPartyLinks",
		"thumbnails", "videoAbuseReportReasons", "videoCategories", "videos", "watermarks", "liveBroadcasts",
		"liveChatBans", "liveChatMessages", "liveChatModerators", "liveStreams", "abuseReports", "videoTrainability",
	} {
		if !resources[r] {
			t.Errorf("resource %s has no method", r)
		}
	}
}

// youtubeRoutes are requests an API client sends, and the method each calls.
var youtubeRoutes = []struct{ verb, target, method string }{
	{"GET", "/youtube/v3/videos?part=snippet&chart=mostPopular&regionCode=US", "videos.list"},
	{"GET", "/youtube/v3/videos/", "videos.list"},
	{"POST", "/youtube/v3/videos?part=snippet", "videos.insert"},
	{"PUT", "/youtube/v3/videos?part=snippet", "videos.update"},
	{"DELETE", "/youtube/v3/videos?id=x", "videos.delete"},
	{"POST", "/upload/youtube/v3/videos?uploadType=multipart&part=snippet", "videos.insert"},
	{"POST", "/upload/youtube/v3/videos?uploadType=resumable", "videos.insert"},
	{"PUT", "/upload/youtube/v3/videos?uploadType=resumable&upload_id=ABC", "media.upload"},
	{"POST", "/resumable/upload/youtube/v3/videos?part=snippet", "videos.insert"},
	{"PUT", "/resumable/upload/youtube/v3/videos?upload_id=ABC", "media.upload"},
	{"POST", "/youtube/v3/videos/rate?id=x&rating=like", "videos.rate"},
	{"GET", "/youtube/v3/videos/getRating?id=x", "videos.getRating"},
	{"POST", "/youtube/v3/videos/reportAbuse", "videos.reportAbuse"},
	{"GET", "/youtube/v3/videos:batchGetStats?id=a,b", "videos.batchGetStats"},
	{"POST", "/youtube/v3/thumbnails/set?videoId=x", "thumbnails.set"},
	{"POST", "/upload/youtube/v3/thumbnails/set?videoId=x", "thumbnails.set"},
	{"POST", "/resumable/upload/youtube/v3/thumbnails/set?videoId=x", "thumbnails.set"},
	{"POST", "/youtube/v3/watermarks/set?channelId=c", "watermarks.set"},
	{"POST", "/upload/youtube/v3/watermarks/set?channelId=c", "watermarks.set"},
	{"POST", "/youtube/v3/watermarks/unset?channelId=c", "watermarks.unset"},
	{"POST", "/youtube/v3/channelBanners/insert", "channelBanners.insert"},
	{"POST", "/upload/youtube/v3/channelBanners/insert", "channelBanners.insert"},
	{"GET", "/youtube/v3/captions?videoId=x", "captions.list"},
	{"GET", "/youtube/v3/captions/AUieDaZ?tfmt=srt", "captions.download"},
	{"POST", "/upload/youtube/v3/captions?part=snippet", "captions.insert"},
	{"PUT", "/upload/youtube/v3/captions?part=snippet", "captions.update"},
	{"PUT", "/upload/youtube/v3/captions?upload_id=Z", "media.upload"},
	{"DELETE", "/youtube/v3/captions?id=x", "captions.delete"},
	{"POST", "/youtube/v3/comments/setModerationStatus?id=x&moderationStatus=published", "comments.setModerationStatus"},
	{"POST", "/youtube/v3/comments/markAsSpam?id=x", "comments.markAsSpam"},
	{"PUT", "/youtube/v3/commentThreads", "commentThreads.update"},
	{"GET", "/youtube/v3/search?q=cats", "search.list"},
	{"POST", "/youtube/v3/liveBroadcasts/bind?id=b", "liveBroadcasts.bind"},
	{"POST", "/youtube/v3/liveBroadcasts/transition?broadcastStatus=live", "liveBroadcasts.transition"},
	{"POST", "/youtube/v3/liveBroadcasts/cuepoint?id=b", "liveBroadcasts.cuepoint"},
	{"GET", "/youtube/v3/liveChat/messages?liveChatId=c", "liveChatMessages.list"},
	{"POST", "/youtube/v3/liveChat/messages", "liveChatMessages.insert"},
	{"DELETE", "/youtube/v3/liveChat/messages?id=m", "liveChatMessages.delete"},
	{"GET", "/youtube/v3/liveChat/messages/stream?liveChatId=c", "liveChatMessages.streamList"},
	{"POST", "/youtube/v3/liveChat/messages/transition?id=m&status=closed", "liveChatMessages.transition"},
	{"POST", "/youtube/v3/liveChat/bans", "liveChatBans.insert"},
	{"DELETE", "/youtube/v3/liveChat/bans?id=b", "liveChatBans.delete"},
	{"GET", "/youtube/v3/liveChat/moderators?liveChatId=c", "liveChatModerators.list"},
	{"POST", "/youtube/v3/liveChat/moderators", "liveChatModerators.insert"},
	{"DELETE", "/youtube/v3/liveChat/moderators?id=m", "liveChatModerators.delete"},
	{"GET", "/youtube/v3/liveStreams", "liveStreams.list"},
	{"PUT", "/youtube/v3/playlistImages", "playlistImages.update"},
	{"POST", "/upload/youtube/v3/playlistImages", "playlistImages.insert"},
	{"GET", "/youtube/v3/members", "members.list"},
	{"GET", "/youtube/v3/membershipsLevels", "membershipsLevels.list"},
	{"GET", "/youtube/v3/superChatEvents", "superChatEvents.list"},
	{"POST", "/youtube/v3/tests", "tests.insert"},
	{"PUT", "/youtube/v3/thirdPartyLinks", "thirdPartyLinks.update"},
	{"GET", "/youtube/v3/guideCategories", "guideCategories.list"},
	{"GET", "/youtube/v3/i18nLanguages", "i18nLanguages.list"},
	{"GET", "/youtube/v3/i18nRegions", "i18nRegions.list"},
	{"GET", "/youtube/v3/videoAbuseReportReasons", "videoAbuseReportReasons.list"},
	{"GET", "/youtube/v3/videoCategories", "videoCategories.list"},
	{"POST", "/youtube/v3/abuseReports", "abuseReports.insert"},
}

func TestYouTubeRoutes(t *testing.T) {
	for _, name := range youtubeBuiltins() {
		tb := builtin(t, name)
		for _, r := range youtubeRoutes {
			got, ok := tb.Resolve(r.verb, r.target)
			if !ok || got != r.method {
				t.Errorf("%s: %s %s -> %q, %v; want %s", name, r.verb, r.target, got, ok, r.method)
			}
		}
		for _, r := range []struct{ verb, target string }{
			{"GET", "/youtube/v3/nope"},
			{"PATCH", "/youtube/v3/videos"},
			{"GET", "/youtube/v3/captions/a/b"},
			{"GET", "/youtube/v3/captions//"},
			{"GET", "youtube/v3/videos"},
			{"GET", ""},
			{"POST", "/youtube/v3/videos/rate/extra"},
		} {
			if got, ok := tb.Resolve(r.verb, r.target); ok {
				t.Errorf("%s: %s %q resolved to %s, want no match", name, r.verb, r.target, got)
			}
		}
	}
}

// Every route a table declares resolves to the method that declares it.
func TestEveryRouteResolvesToItsMethod(t *testing.T) {
	for _, name := range costs.Builtins() {
		tb := builtin(t, name)
		for _, m := range tb.Methods() {
			for _, r := range m.Routes {
				verb, target, _ := strings.Cut(r, " ")
				target = strings.NewReplacer("{resource...}", "videos", "{id}", "abc", "{version}", "2025-10").Replace(target)
				if strings.Contains(target, "?upload_id") {
					target = strings.Replace(target, "?upload_id", "?upload_id=u", 1)
				}
				if got, ok := tb.Resolve(verb, target); !ok || got != m.Name {
					t.Errorf("%s: route %q -> %q, want %s", name, r, got, m.Name)
				}
			}
		}
	}
}

// The dated tables are the "youtube" table with one pool: only the budgets
// and the costs of search.list, videos.insert and videos.batchGetStats
// differ; routes, notes, the owner and the response rules are the same.
func TestDatedTables(t *testing.T) {
	cur := builtin(t, "youtube")
	for name, differ := range map[string]map[string]map[string]int64{
		"youtube-legacy": {
			"search.list":          {"units": 100},
			"videos.insert":        {"units": 1600},
			"videos.batchGetStats": {"units": 1},
		},
		"youtube-2025-12": {
			"search.list":          {"units": 100},
			"videos.insert":        {"units": 100},
			"videos.batchGetStats": {"units": 1},
		},
	} {
		leg := builtin(t, name)
		if leg.API != "youtube" || len(leg.Budgets) != 1 || leg.Budgets[0].Name != "units" || leg.Budgets[0].Limit != 10000 {
			t.Fatalf("%s budgets %v", name, leg.Budgets)
		}
		if leg.Owner != "project" || !reflect.DeepEqual(leg.Spec().Responses, cur.Spec().Responses) {
			t.Errorf("%s: owner %q, rules %+v; want the youtube table's", name, leg.Owner, leg.Spec().Responses)
		}
		cm, lm := cur.Methods(), leg.Methods()
		if len(cm) != len(lm) {
			t.Fatalf("%s: %d methods vs %d", name, len(cm), len(lm))
		}
		for i := range cm {
			c, l := cm[i], lm[i]
			if c.Name != l.Name || !slices.Equal(c.Routes, l.Routes) || c.Free != l.Free || c.Deprecated != l.Deprecated {
				t.Fatalf("%s: method %d: %+v vs %+v", name, i, c, l)
			}
			if want, ok := differ[c.Name]; ok {
				if !maps.Equal(l.Cost, want) {
					t.Errorf("%s: %s costs %v, want %v", name, c.Name, l.Cost, want)
				}
			} else if !maps.Equal(c.Cost, l.Cost) || c.Note != l.Note {
				t.Errorf("%s: %s: %v %q vs %v %q", name, c.Name, c.Cost, c.Note, l.Cost, l.Note)
			}
		}
	}
}

// Every cost and every response rule of the built-in tables says where it
// comes from: the table's source (a method without a note is a row of the
// quota table), a URL and a date, or "not published" with the reasoning.
func TestBuiltinSources(t *testing.T) {
	dated := regexp.MustCompile(`\b20\d\d-\d\d-\d\d\b`)
	for _, name := range costs.Builtins() {
		tb := builtin(t, name)
		if !strings.Contains(tb.Source, "https://") || !dated.MatchString(tb.Source) {
			t.Errorf("%s: source %q: want a URL and a date", name, tb.Source)
		}
		for _, m := range tb.Methods() {
			switch n := m.Note; {
			case n == "":
			case strings.HasPrefix(n, "not published: ") && len(n) > len("not published: ")+20:
			case strings.HasPrefix(n, "[method]") && strings.Contains(n, "https://") && dated.MatchString(n):
			case strings.HasPrefix(n, "[rev] ") && dated.MatchString(n):
			case name != "youtube" && (strings.HasPrefix(n, "editions of [quota]") || strings.HasPrefix(n, "not in the API before")):
			case !strings.HasPrefix(name, "youtube") && strings.HasPrefix(n, "[") && dated.MatchString(n):
			default:
				t.Errorf("%s: %s: note %q says neither where the cost comes from nor why it is not published", name, m.Name, n)
			}
		}
		for i, r := range tb.Spec().Responses {
			if !dated.MatchString(r.Source) && !strings.Contains(r.Source, "not published") {
				t.Errorf("%s: responses[%d]: source %q: want a source and a date, or not published", name, i, r.Source)
			}
		}
	}
}

// Only liveChatMessages.list and streamList have published live costs;
// every other live method says "not published".
func TestYouTubeLiveCosts(t *testing.T) {
	tb := builtin(t, "youtube")
	n := 0
	for _, m := range tb.Methods() {
		if !strings.HasPrefix(m.Name, "live") {
			continue
		}
		n++
		published := m.Name == "liveChatMessages.list" || m.Name == "liveChatMessages.streamList"
		if published != !strings.HasPrefix(m.Note, "not published") {
			t.Errorf("%s: note %q", m.Name, m.Note)
		}
		if published && m.Cost["units"] != 5 {
			t.Errorf("%s costs %v, want 5", m.Name, m.Cost)
		}
	}
	if n < 20 {
		t.Fatalf("only %d live methods", n)
	}
	if got := tb.Method; got == nil {
		t.Fatal("no Method")
	}
	if m, _ := tb.Method("liveChatModerators.list"); m.Cost["units"] != 5 {
		t.Errorf("liveChatModerators.list costs %v: a list at 50 is out of line", m.Cost)
	}
}

// comments.markAsSpam is deprecated upstream: Price refuses it (the
// request is never sent), Charge still prices it for planning.
func TestDeprecatedMethod(t *testing.T) {
	for _, name := range costs.Builtins() {
		if !strings.HasPrefix(name, "youtube") {
			continue
		}
		tb := builtin(t, name)
		req, _ := http.NewRequest("POST", "https://youtube.googleapis.com/youtube/v3/comments/markAsSpam?id=c", nil)
		_, err := tb.Price(req)
		if !errors.Is(err, costs.ErrDeprecated) || !strings.Contains(err.Error(), "comments.markAsSpam") || !strings.Contains(err.Error(), "no longer supported") {
			t.Errorf("%s: Price(markAsSpam) err = %v, want ErrDeprecated naming the method and the notice", name, err)
		}
		if ch, err := tb.Charge("comments.markAsSpam"); err != nil || ch.Units["units"] != 50 {
			t.Errorf("%s: Charge = %v, %v", name, ch, err)
		}
	}
}

// Google's documented error shapes: the v1 errors[] list and the
// google.rpc.ErrorInfo detail whose metadata names the quota limit.
const (
	quotaBody = `{"error":{"code":403,"message":"The request cannot be completed because you have exceeded your <a href=\"/youtube/v3/getting-started#quota\">quota</a>.","errors":[{"message":"The request cannot be completed because you have exceeded your <a href=\"/youtube/v3/getting-started#quota\">quota</a>.","domain":"youtube.quota","reason":"quotaExceeded"}]}}`
	dailyBody = `{"error":{"code":403,"message":"Daily Limit Exceeded.","errors":[{"message":"Daily Limit Exceeded.","domain":"usageLimits","reason":"dailyLimitExceeded"}]}}`
	minute429 = `{"error":{"code":429,"message":"Quota exceeded for quota metric 'Search requests' and limit 'Search requests per minute' of service 'youtube.googleapis.com' for consumer 'project_number:123456789'.","errors":[{"message":"Quota exceeded for quota metric 'Search requests' and limit 'Search requests per minute' of service 'youtube.googleapis.com' for consumer 'project_number:123456789'.","domain":"global","reason":"rateLimitExceeded"}],"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","domain":"googleapis.com","metadata":{"consumer":"projects/123456789","service":"youtube.googleapis.com","quota_metric":"youtube.googleapis.com/search_requests","quota_limit":"SearchRequestsPerMinutePerProject","quota_limit_value":"100"}}]}}`
	day429    = `{"error":{"code":429,"message":"Quota exceeded for quota metric 'Search requests' and limit 'Search requests per day' of service 'youtube.googleapis.com' for consumer 'project_number:123456789'.","errors":[{"message":"Quota exceeded for quota metric 'Search requests' and limit 'Search requests per day' of service 'youtube.googleapis.com' for consumer 'project_number:123456789'.","domain":"global","reason":"rateLimitExceeded"}],"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","domain":"googleapis.com","metadata":{"consumer":"projects/123456789","service":"youtube.googleapis.com","quota_metric":"youtube.googleapis.com/search_requests","quota_limit":"SearchRequestsPerDayPerProject","quota_limit_value":"100"}}]}}`
	// dayDetail429 says "per day" only in its ErrorInfo detail: the
	// message is generic.
	dayDetail429 = `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","domain":"googleapis.com","metadata":{"service":"youtube.googleapis.com","quota_limit":"DefaultPerDayPerProject"}}]}}`
	uploadBody   = `{"error":{"code":400,"message":"The user has exceeded the number of videos they may upload.","errors":[{"message":"The user has exceeded the number of videos they may upload.","domain":"youtube.video","reason":"uploadLimitExceeded"}]}}`
)

func TestYouTubeClassify(t *testing.T) {
	cases := []struct {
		table, verb, path string
		status            int
		body              string
		exhausted         []string
		transient         bool
		hold              []string
	}{
		{"youtube", "GET", "/youtube/v3/videos", 403, quotaBody, []string{"units"}, false, nil},
		{"youtube", "GET", "/youtube/v3/search", 403, quotaBody, []string{"search"}, false, nil},
		{"youtube", "POST", "/upload/youtube/v3/videos", 403, quotaBody, []string{"uploads"}, false, nil},
		{"youtube", "GET", "/youtube/v3/videos", 403, dailyBody, []string{"units"}, false, nil},
		// A 429 is a per-minute throttle unless it names a daily limit.
		{"youtube", "GET", "/youtube/v3/search", 429, minute429, nil, true, nil},
		{"youtube", "GET", "/youtube/v3/search", 429, day429, []string{"search"}, false, nil},
		{"youtube", "GET", "/youtube/v3/search", 429, dayDetail429, []string{"search"}, false, nil},
		{"youtube", "GET", "/youtube/v3/videos:batchGetStats", 429, strings.ReplaceAll(day429, "Search", "Stats"), []string{"stats"}, false, nil},
		{"youtube", "GET", "/youtube/v3/videos:batchGetStats", 429, minute429, nil, true, nil},
		{"youtube", "GET", "/youtube/v3/videos", 429, minute429, nil, true, nil},
		{"youtube", "GET", "/youtube/v3/videos", 429, day429, []string{"units"}, false, nil},
		{"youtube", "GET", "/youtube/v3/videos", 429, `{"error":{"code":429,"errors":[{"reason":"rateLimitExceeded"}]}}`, nil, true, nil},
		{"youtube", "GET", "/youtube/v3/videos", 429, ``, nil, true, nil},
		// The per-channel upload cap holds the credential's uploads only.
		{"youtube", "POST", "/upload/youtube/v3/videos", 400, uploadBody, nil, false, []string{"videos.insert"}},
		{"youtube", "POST", "/resumable/upload/youtube/v3/videos", 400, uploadBody, nil, false, []string{"videos.insert"}},
		{"youtube", "POST", "/youtube/v3/playlists", 400, uploadBody, nil, false, nil},
		{"youtube", "POST", "/upload/youtube/v3/videos", 400, `{"error":{"code":400,"errors":[{"reason":"invalidTitle"}]}}`, nil, false, nil},
		{"youtube", "GET", "/youtube/v3/videos", 403, `{"error":{"errors":[{"reason":"userRateLimitExceeded"}]}}`, nil, true, nil},
		{"youtube", "GET", "/youtube/v3/videos", 403, `{"error":{"errors":[{"reason":"forbidden"}]}}`, nil, false, nil},
		{"youtube", "GET", "/youtube/v3/videos", 503, `{"error":{"errors":[{"reason":"backendError"}]}}`, nil, false, nil},
		{"youtube", "GET", "/youtube/v3/videos", 403, `<html>quotaExceeded</html>`, nil, false, nil},
		{"youtube", "GET", "/youtube/v3/videos", 200, quotaBody, nil, false, nil},
		{"youtube-legacy", "GET", "/youtube/v3/search", 403, quotaBody, []string{"units"}, false, nil},
		{"youtube-legacy", "GET", "/youtube/v3/search", 429, minute429, nil, true, nil},
		{"youtube-legacy", "POST", "/upload/youtube/v3/videos", 400, uploadBody, nil, false, []string{"videos.insert"}},
		{"youtube-2025-12", "GET", "/youtube/v3/search", 429, day429, []string{"units"}, false, nil},
	}
	for _, c := range cases {
		tb := builtin(t, c.table)
		req, _ := http.NewRequest(c.verb, "https://youtube.googleapis.com"+c.path, nil)
		v := tb.Classify(req, &http.Response{StatusCode: c.status}, []byte(c.body))
		if !slices.Equal(v.Exhausted, c.exhausted) || v.Transient != c.transient || !slices.Equal(v.Hold, c.hold) {
			t.Errorf("%s %s %s %d %.60s: verdict %+v, want exhausted %v transient %v hold %v", c.table, c.verb, c.path, c.status, c.body, v, c.exhausted, c.transient, c.hold)
		}
		if (len(c.exhausted) > 0 || len(c.hold) > 0) && v.Reason == "" {
			t.Errorf("%s %d: no reason in %+v", c.path, c.status, v)
		}
		if len(c.hold) > 0 && v.HoldFor != 24*time.Hour {
			t.Errorf("%s %d: hold for %v, want 24h", c.path, c.status, v.HoldFor)
		}
	}
	if got := builtin(t, "youtube").HoldMethods(); !slices.Equal(got, []string{"videos.insert"}) {
		t.Errorf("HoldMethods = %v", got)
	}
	if got := builtin(t, "youtube").OwnerKind(); got != "project" {
		t.Errorf("OwnerKind = %q", got)
	}
}

// The built-in YouTube tables name the hosts that serve the Data API and
// price nothing else: not a YouTube path on another host, not the other
// Google hosts a YouTube client talks to.
func TestBuiltinHosts(t *testing.T) {
	for _, name := range costs.Builtins() {
		if !strings.HasPrefix(name, "youtube") {
			continue // TestLLMProfiles checks the others' hosts
		}
		tb := builtin(t, name)
		if got, want := tb.Hosts(), []string{"www.googleapis.com", "youtube.googleapis.com", "youtube.mtls.googleapis.com"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: hosts %q, want %q", name, got, want)
		}
		for _, c := range []struct {
			verb, url string
			priced    bool
		}{
			{"GET", "https://www.googleapis.com/youtube/v3/videos?part=id", true},
			{"GET", "https://youtube.googleapis.com/youtube/v3/videos?part=id", true},
			{"GET", "https://Youtube.GoogleApis.com:443/youtube/v3/videos?part=id", true},
			{"POST", "https://www.googleapis.com/upload/youtube/v3/videos?uploadType=resumable", true},
			{"GET", "https://evil.example/youtube/v3/videos?part=id", false},
			{"GET", "https://www.googleapis.com.evil.example/youtube/v3/videos?part=id", false},
			{"GET", "https://i.ytimg.com/vi/abc/hqdefault.jpg", false},
			{"POST", "https://oauth2.googleapis.com/token", false},
			{"GET", "https://www.googleapis.com:8443/youtube/v3/videos?part=id", false},
		} {
			req, _ := http.NewRequest(c.verb, c.url, nil)
			ch, err := tb.Price(req)
			if c.priced != (err == nil && ch.Method != "") || !c.priced && !errors.Is(err, quota.ErrForeignHost) {
				t.Errorf("%s: Price(%s %s) = %+v, %v; priced: want %v", name, c.verb, c.url, ch, err, c.priced)
			}
		}
	}
}
