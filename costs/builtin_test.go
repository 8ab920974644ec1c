package costs_test

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

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

func TestBuiltins(t *testing.T) {
	if got := costs.Builtins(); !slices.Equal(got, []string{"youtube", "youtube-legacy"}) {
		t.Fatalf("Builtins() = %v", got)
	}
	_, err := costs.Builtin("tiktok")
	if err == nil || !strings.Contains(err.Error(), "youtube, youtube-legacy") {
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
		"liveChatModerators.list":      {"units": 50},
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
	{"GET", "/youtube/v3/liveChat/messages/stream?liveChatId=c", "liveChatMessages.stream"},
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
	for _, name := range costs.Builtins() {
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
				target = strings.NewReplacer("{resource...}", "videos", "{id}", "abc").Replace(target)
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

func TestLegacyTable(t *testing.T) {
	cur, leg := builtin(t, "youtube"), builtin(t, "youtube-legacy")
	if leg.API != "youtube" || len(leg.Budgets) != 1 || leg.Budgets[0].Name != "units" || leg.Budgets[0].Limit != 10000 {
		t.Fatalf("legacy budgets %v", leg.Budgets)
	}
	cm, lm := cur.Methods(), leg.Methods()
	if len(cm) != len(lm) {
		t.Fatalf("%d methods vs %d", len(cm), len(lm))
	}
	differ := map[string]map[string]int64{
		"search.list":          {"units": 100},
		"videos.insert":        {"units": 1600},
		"videos.batchGetStats": {"units": 1},
	}
	for i := range cm {
		c, l := cm[i], lm[i]
		if c.Name != l.Name || !slices.Equal(c.Routes, l.Routes) || c.Free != l.Free {
			t.Fatalf("method %d: %+v vs %+v", i, c, l)
		}
		if want, ok := differ[c.Name]; ok {
			if !maps.Equal(l.Cost, want) {
				t.Errorf("legacy %s costs %v, want %v", c.Name, l.Cost, want)
			}
		} else if !maps.Equal(c.Cost, l.Cost) {
			t.Errorf("%s: %v vs legacy %v", c.Name, c.Cost, l.Cost)
		}
	}
}

func TestYouTubeClassify(t *testing.T) {
	const quotaBody = `{"error":{"code":403,"message":"The request cannot be completed because you have exceeded your quota.","errors":[{"message":"...","domain":"youtube.quota","reason":"quotaExceeded"}]}}`
	cases := []struct {
		table, verb, path string
		status            int
		body              string
		exhausted         []string
		transient         bool
	}{
		{"youtube", "GET", "/youtube/v3/videos", 403, quotaBody, []string{"units"}, false},
		{"youtube", "GET", "/youtube/v3/search", 403, quotaBody, []string{"search"}, false},
		{"youtube", "POST", "/upload/youtube/v3/videos", 403, quotaBody, []string{"uploads"}, false},
		{"youtube", "GET", "/youtube/v3/videos", 403, `{"error":{"code":403,"errors":[{"reason":"dailyLimitExceeded","domain":"usageLimits"}]}}`, []string{"units"}, false},
		{"youtube", "GET", "/youtube/v3/search", 429, `{"error":{"code":429,"errors":[{"reason":"rateLimitExceeded"}]}}`, []string{"search"}, false},
		{"youtube", "GET", "/youtube/v3/search", 429, `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED"}]}}`, []string{"search"}, false},
		{"youtube", "GET", "/youtube/v3/videos:batchGetStats", 429, `{"error":{"errors":[{"reason":"rateLimitExceeded"}]}}`, []string{"stats"}, false},
		{"youtube", "GET", "/youtube/v3/videos", 429, `{"error":{"errors":[{"reason":"rateLimitExceeded"}]}}`, nil, false},
		{"youtube", "GET", "/youtube/v3/videos", 403, `{"error":{"errors":[{"reason":"userRateLimitExceeded"}]}}`, nil, true},
		{"youtube", "GET", "/youtube/v3/videos", 403, `{"error":{"errors":[{"reason":"forbidden"}]}}`, nil, false},
		{"youtube", "GET", "/youtube/v3/videos", 503, `{"error":{"errors":[{"reason":"backendError"}]}}`, nil, false},
		{"youtube", "GET", "/youtube/v3/videos", 403, `<html>quotaExceeded</html>`, nil, false},
		{"youtube", "GET", "/youtube/v3/videos", 200, quotaBody, nil, false},
		{"youtube-legacy", "GET", "/youtube/v3/search", 403, quotaBody, []string{"units"}, false},
		{"youtube-legacy", "GET", "/youtube/v3/search", 429, `{"error":{"errors":[{"reason":"rateLimitExceeded"}]}}`, nil, false},
	}
	for _, c := range cases {
		tb := builtin(t, c.table)
		req, _ := http.NewRequest(c.verb, "https://youtube.googleapis.com"+c.path, nil)
		v := tb.Classify(req, &http.Response{StatusCode: c.status}, []byte(c.body))
		if !slices.Equal(v.Exhausted, c.exhausted) || v.Transient != c.transient {
			t.Errorf("%s %s %s %d %s: verdict %+v, want exhausted %v transient %v", c.table, c.verb, c.path, c.status, c.body, v, c.exhausted, c.transient)
		}
		if len(c.exhausted) > 0 && v.Reason == "" {
			t.Errorf("%s %d: no reason in %+v", c.path, c.status, v)
		}
	}
}
