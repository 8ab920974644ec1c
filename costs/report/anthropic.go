package report

import (
	"net/http"
	"strings"
	"time"
)

// Anthropic reads Anthropic's rate-limit headers
// (https://docs.anthropic.com/en/api/rate-limits#response-headers, read
// 2026-11-28 through a copy): anthropic-ratelimit-{requests,tokens,
// input-tokens,output-tokens}-{limit,remaining,reset} (reset in RFC 3339)
// and retry-after. Scopes "requests", "tokens", "input-tokens" and
// "output-tokens".
func Anthropic(h http.Header, now time.Time) ([]Reading, []string) {
	var problems []string
	var out []Reading
	wait := retryAfter(h, now, &problems)
	for _, scope := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		r := newReading(scope)
		base := "Anthropic-Ratelimit-" + scope + "-"
		if v, ok := header(h, base+"Limit", &problems); ok {
			if n, ok := count(v); ok {
				r.Limit = n
			} else {
				problems = append(problems, problem(strings.ToLower(base+"limit"), v, "not a count"))
			}
		}
		if v, ok := header(h, base+"Remaining", &problems); ok {
			if n, ok := count(v); ok {
				r.Remaining = n
			} else {
				problems = append(problems, problem(strings.ToLower(base+"remaining"), v, "not a count"))
			}
		}
		if v, ok := header(h, base+"Reset", &problems); ok {
			t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
			switch {
			case err != nil:
				problems = append(problems, problem(strings.ToLower(base+"reset"), v, "not an RFC 3339 time"))
			case t.After(now.Add(maxWait)):
				problems = append(problems, problem(strings.ToLower(base+"reset"), v, "more than a year ahead"))
			case t.After(now):
				r.Reset = t
			}
		}
		if r.said() {
			r.RetryAfter = wait
			out = append(out, r)
		}
	}
	return out, problems
}
