package report

import (
	"net/http"
	"strings"
	"time"
)

// OpenAI reads OpenAI's rate-limit headers
// (https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers,
// read 2026-11-28 through a copy): x-ratelimit-limit-requests and -tokens,
// x-ratelimit-remaining-requests and -tokens, x-ratelimit-reset-requests
// and -tokens (durations such as "1s", "6m0s", "12ms"). Scopes "requests"
// and "tokens".
func OpenAI(h http.Header, now time.Time) ([]Reading, []string) {
	var problems []string
	var out []Reading
	for _, scope := range []string{"requests", "tokens"} {
		r := newReading(scope)
		if v, ok := header(h, "X-Ratelimit-Limit-"+scope, &problems); ok {
			if n, ok := count(v); ok {
				r.Limit = n
			} else {
				problems = append(problems, problem("x-ratelimit-limit-"+scope, v, "not a count"))
			}
		}
		if v, ok := header(h, "X-Ratelimit-Remaining-"+scope, &problems); ok {
			if n, ok := count(v); ok {
				r.Remaining = n
			} else {
				problems = append(problems, problem("x-ratelimit-remaining-"+scope, v, "not a count"))
			}
		}
		if v, ok := header(h, "X-Ratelimit-Reset-"+scope, &problems); ok {
			if d, ok := goDuration(v); ok {
				r.Reset = now.Add(d)
			} else {
				problems = append(problems, problem("x-ratelimit-reset-"+scope, v, "not a duration"))
			}
		}
		if r.said() {
			out = append(out, r)
		}
	}
	return out, problems
}

// goDuration parses OpenAI's reset durations: Go's form ("6m0s", "12ms",
// "1h2m3.5s") or bare seconds, at most maxWait, rounded up to the
// millisecond.
func goDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if d, ok := seconds(s); ok {
		return d, true
	}
	if len(s) > 32 || strings.HasPrefix(s, "-") {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxWait {
		return 0, false
	}
	return d, true
}
