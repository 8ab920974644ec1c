package report

import (
	"net/http"
	"testing"
)

// check asserts what every parser promises of its readings.
func check(t *testing.T, rs []Reading) {
	t.Helper()
	for _, r := range rs {
		if r.Remaining < -1 || r.Used < -1 || r.Limit < 0 || r.Limit > maxCount || r.Window < 0 || r.RetryAfter < 0 ||
			(!r.Reset.IsZero() && r.Reset.Before(now)) || r.Reset.After(now.Add(maxWait)) {
			t.Fatalf("reading %+v", r)
		}
	}
}

func FuzzIETF(f *testing.F) {
	f.Add(`"burst";q=100;w=60,"daily";q=1000;w=86400`, `"burst";r=50;t=30`, "100", "7", "12")
	f.Add(`x;q=1;pk=:AAA=:`, `x;r=0;t=0`, "", "", "")
	f.Fuzz(func(t *testing.T, policy, standing, limit, remaining, reset string) {
		h := http.Header{}
		for k, v := range map[string]string{"RateLimit-Policy": policy, "RateLimit": standing, "RateLimit-Limit": limit, "RateLimit-Remaining": remaining, "RateLimit-Reset": reset} {
			if v != "" {
				h.Set(k, v)
			}
		}
		rs, _ := IETF(h, now)
		check(t, rs)
	})
}

func FuzzGitHub(f *testing.F) {
	f.Add("5000", "4999", "1", "1795338000", "core", "60")
	f.Fuzz(func(t *testing.T, limit, remaining, used, reset, resource, retry string) {
		h := hdr("x-ratelimit-limit", limit, "x-ratelimit-remaining", remaining, "x-ratelimit-used", used,
			"x-ratelimit-reset", reset, "x-ratelimit-resource", resource, "retry-after", retry)
		rs, _ := GitHub(h, now)
		check(t, rs)
	})
}

func FuzzOpenAI(f *testing.F) {
	f.Add("60", "59", "1s", "150000", "149984", "6m0s")
	f.Fuzz(func(t *testing.T, lr, rr, tr, lt, rt, tt string) {
		rs, _ := OpenAI(hdr("x-ratelimit-limit-requests", lr, "x-ratelimit-remaining-requests", rr, "x-ratelimit-reset-requests", tr,
			"x-ratelimit-limit-tokens", lt, "x-ratelimit-remaining-tokens", rt, "x-ratelimit-reset-tokens", tt), now)
		check(t, rs)
	})
}

func FuzzAnthropic(f *testing.F) {
	f.Add("50", "49", "2026-11-28T09:00:20Z", "3")
	f.Fuzz(func(t *testing.T, limit, remaining, reset, retry string) {
		rs, _ := Anthropic(hdr("anthropic-ratelimit-tokens-limit", limit, "anthropic-ratelimit-tokens-remaining", remaining,
			"anthropic-ratelimit-tokens-reset", reset, "retry-after", retry), now)
		check(t, rs)
	})
}

func FuzzErrorInfo(f *testing.F) {
	f.Add([]byte(`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","metadata":{"quota_limit":"x","quota_limit_value":"100"}}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rs, _ := GoogleErrorInfo(body, now)
		check(t, rs)
	})
}

func FuzzShopify(f *testing.F) {
	f.Add([]byte(`{"data":{},"extensions":{"cost":{"requestedQueryCost":12,"actualQueryCost":7,"throttleStatus":{"maximumAvailable":2000.0,"currentlyAvailable":1993,"restoreRate":100.0}}}}`))
	f.Add([]byte(`{"extensions":{"cost":{"throttleStatus":{"maximumAvailable":1e300,"currentlyAvailable":0,"restoreRate":1e-300}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rs, _ := Shopify(body, now)
		check(t, rs)
	})
}
