package report

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestGitHubDocumented: the example response headers of GitHub's "Rate
// limits for the REST API" (docs.github.com, read 2026-11-28).
func TestGitHubDocumented(t *testing.T) {
	reset := now.Add(40 * time.Minute)
	h := hdr("x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4999", "x-ratelimit-used", "1",
		"x-ratelimit-reset", strconv.FormatInt(reset.Unix(), 10), "x-ratelimit-resource", "core")
	rs, problems := GitHub(h, now)
	if len(problems) != 0 || len(rs) != 1 {
		t.Fatalf("%+v %v", rs, problems)
	}
	r := rs[0]
	if r.Scope != "core" || r.Limit != 5000 || r.Remaining != 4999 || r.Used != 1 || !r.Reset.Equal(reset) {
		t.Fatalf("%+v", r)
	}
	// a secondary limit: 403 with retry-after, search resource
	rs, problems = GitHub(hdr("x-ratelimit-resource", "search", "x-ratelimit-limit", "30", "x-ratelimit-remaining", "0", "retry-after", "60"), now)
	if len(problems) != 0 || len(rs) != 1 || rs[0].Scope != "search" || rs[0].Remaining != 0 || rs[0].RetryAfter != time.Minute {
		t.Fatalf("%+v %v", rs, problems)
	}
}

// TestMalformedIgnored: bad values are named in problems and left out,
// never read as something else.
func TestMalformedIgnored(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		want string
	}{
		{"negative", hdr("x-ratelimit-remaining", "-1"), "x-ratelimit-remaining"},
		{"not a number", hdr("x-ratelimit-used", "lots"), "x-ratelimit-used"},
		{"overflow", hdr("x-ratelimit-limit", "99999999999999999999999"), "x-ratelimit-limit"},
		{"twice", hdr("x-ratelimit-remaining", "5", "x-ratelimit-remaining", "7"), "twice"},
		{"reset in a century", hdr("x-ratelimit-remaining", "5", "x-ratelimit-reset", "9999999999"), "year"},
		{"reset not a number", hdr("x-ratelimit-remaining", "5", "x-ratelimit-reset", "soon"), "epoch"},
	} {
		rs, problems := GitHub(tc.h, now)
		if len(problems) == 0 || !strings.Contains(strings.Join(problems, ";"), tc.want) {
			t.Errorf("%s: problems %v, want one naming %q", tc.name, problems, tc.want)
		}
		for _, r := range rs {
			if r.Remaining < -1 || r.Used < -1 || r.Limit < 0 || (!r.Reset.IsZero() && r.Reset.Before(now)) {
				t.Errorf("%s: reading %+v", tc.name, r)
			}
		}
	}
}

// TestIETFDocumented: the draft's examples (draft-ietf-httpapi-ratelimit-
// headers-11, sections 4 and 5): a policy of 100 per 60 s, and a standing
// of 50 remaining for 30 s more; several policies; the legacy trio.
func TestIETFDocumented(t *testing.T) {
	rs, problems := IETF(hdr("RateLimit-Policy", `"burst";q=100;w=60,"daily";q=1000;w=86400`,
		"RateLimit", `"burst";r=50;t=30`), now)
	if len(problems) != 0 || len(rs) != 2 {
		t.Fatalf("%+v %v", rs, problems)
	}
	b := rs[0]
	if b.Scope != "burst" || b.Limit != 100 || b.Remaining != 50 || b.Window != time.Minute || !b.Reset.Equal(now.Add(30*time.Second)) {
		t.Fatalf("burst: %+v", b)
	}
	if d := rs[1]; d.Scope != "daily" || d.Limit != 1000 || d.Remaining != -1 || d.Window != 24*time.Hour {
		t.Fatalf("daily: %+v", d)
	}
	rs, problems = IETF(hdr("RateLimit-Policy", `"peruser";q=100;w=60;pk=:cHsdsRa894==:`, "RateLimit", `"peruser";r=0;t=5;pk=:cHsdsRa894==:`), now)
	if len(problems) != 0 || len(rs) != 1 || rs[0].Partition == "" || rs[0].Remaining != 0 {
		t.Fatalf("%+v %v", rs, problems)
	}
	rs, problems = IETF(hdr("RateLimit-Limit", "100", "RateLimit-Remaining", "7", "RateLimit-Reset", "12"), now)
	if len(problems) != 0 || len(rs) != 1 || rs[0].Limit != 100 || rs[0].Remaining != 7 || !rs[0].Reset.Equal(now.Add(12*time.Second)) {
		t.Fatalf("legacy: %+v %v", rs, problems)
	}
	for _, bad := range []http.Header{
		hdr("RateLimit", `burst;r=-1;t=3`),
		hdr("RateLimit", `"burst";r="ten"`),
		hdr("RateLimit", `((("`),
		hdr("RateLimit-Policy", `"x";w=60`),
	} {
		rs, problems := IETF(bad, now)
		if len(problems) == 0 {
			t.Errorf("%v: no problem reported (%+v)", bad, rs)
		}
	}
}

// TestOpenAIDocumented: OpenAI's documented header example (rate limits
// guide, read 2026-11-28 through a copy).
func TestOpenAIDocumented(t *testing.T) {
	rs, problems := OpenAI(hdr("x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
		"x-ratelimit-remaining-requests", "59", "x-ratelimit-remaining-tokens", "149984",
		"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"), now)
	if len(problems) != 0 || len(rs) != 2 {
		t.Fatalf("%+v %v", rs, problems)
	}
	if r := rs[1]; r.Scope != "tokens" || r.Limit != 150000 || r.Remaining != 149984 || !r.Reset.Equal(now.Add(6*time.Minute)) {
		t.Fatalf("%+v", r)
	}
	if _, problems := OpenAI(hdr("x-ratelimit-reset-tokens", "-5s"), now); len(problems) == 0 {
		t.Fatal("a negative reset is not reported")
	}
}

// TestAnthropicDocumented: Anthropic's response headers (API rate limits,
// read 2026-11-28 through a copy).
func TestAnthropicDocumented(t *testing.T) {
	reset := now.Add(20 * time.Second)
	rs, problems := Anthropic(hdr("anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49",
		"anthropic-ratelimit-requests-reset", reset.Format(time.RFC3339),
		"anthropic-ratelimit-input-tokens-limit", "30000", "anthropic-ratelimit-input-tokens-remaining", "29000",
		"retry-after", "3"), now)
	if len(problems) != 0 || len(rs) != 2 {
		t.Fatalf("%+v %v", rs, problems)
	}
	if r := rs[0]; r.Scope != "requests" || r.Remaining != 49 || !r.Reset.Equal(reset) || r.RetryAfter != 3*time.Second {
		t.Fatalf("%+v", r)
	}
	if _, problems := Anthropic(hdr("anthropic-ratelimit-requests-reset", "tomorrow"), now); len(problems) == 0 {
		t.Fatal("a bad reset is not reported")
	}
}

// TestGoogleErrorInfo: the body YouTube's per-method buckets send with a
// 429 (internal/ytsim sends the same shape).
func TestGoogleErrorInfo(t *testing.T) {
	body := []byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","domain":"googleapis.com","metadata":{"quota_limit":"SearchPerDayPerProject","quota_limit_value":"100","quota_metric":"youtube.googleapis.com/search","consumer":"projects/123","window_start_time":"2026-11-28T08:00:00Z"}}]}}`)
	rs, problems := GoogleErrorInfo(body, now)
	if len(problems) != 0 || len(rs) != 1 || rs[0].Scope != "SearchPerDayPerProject" || rs[0].Limit != 100 || rs[0].Remaining != 0 {
		t.Fatalf("%+v %v", rs, problems)
	}
	if _, problems := GoogleErrorInfo([]byte("<html>"), now); len(problems) == 0 {
		t.Fatal("a body that is not JSON is not reported")
	}
}

// TestShopify: throttleStatus is the bucket's size, what it holds, and the
// instant it is full again; a body without one says nothing, and values
// out of range are a problem, never a reading.
func TestShopify(t *testing.T) {
	rs, problems := Shopify([]byte(`{"data":{},"extensions":{"cost":{"requestedQueryCost":12,"actualQueryCost":7,
		"throttleStatus":{"maximumAvailable":2000.0,"currentlyAvailable":1493.5,"restoreRate":100.0}}}}`), now)
	if len(problems) != 0 || len(rs) != 1 {
		t.Fatalf("Shopify = %+v, %v", rs, problems)
	}
	r := rs[0]
	if r.Scope != "cost" || r.Limit != 2000 || r.Remaining != 1493 || r.Used != -1 || !r.Reset.Equal(now.Add(6*time.Second)) {
		t.Fatalf("reading %+v; want cost 2000, remaining 1493, reset in 6 s ((2000-1493.5)/100 rounded up)", r)
	}
	for _, body := range []string{``, `{}`, `{"data":{}}`, `{"extensions":{"cost":{}}}`, `not json`} {
		if rs, problems := Shopify([]byte(body), now); len(rs)+len(problems) != 0 {
			t.Errorf("Shopify(%q) = %+v, %v; want nothing said", body, rs, problems)
		}
	}
	for _, body := range []string{
		`{"extensions":{"cost":{"throttleStatus":{"maximumAvailable":100,"currentlyAvailable":200,"restoreRate":1}}}}`,
		`{"extensions":{"cost":{"throttleStatus":{"maximumAvailable":-1,"currentlyAvailable":0,"restoreRate":1}}}}`,
		`{"extensions":{"cost":{"throttleStatus":{"currentlyAvailable":0,"restoreRate":1}}}}`,
	} {
		if rs, problems := Shopify([]byte(body), now); len(rs) != 0 || len(problems) != 1 {
			t.Errorf("Shopify(%s) = %+v, %v; want one problem", body, rs, problems)
		}
	}
}
