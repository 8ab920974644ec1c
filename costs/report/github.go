package report

import (
	"net/http"
	"strings"
	"time"
)

// GitHub reads GitHub's rate-limit headers, sent on every REST and GraphQL
// response (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api,
// read 2026-11-28): x-ratelimit-limit, -remaining, -used, -reset (epoch
// seconds) and -resource (the Scope: core, search, code_search, graphql,
// ...), and retry-after, which a secondary limit's 403 or 429 carries. A
// response without x-ratelimit-resource is read as "core".
func GitHub(h http.Header, now time.Time) ([]Reading, []string) {
	var problems []string
	r := newReading("core")
	if v, ok := header(h, "X-Ratelimit-Resource", &problems); ok && v != "" {
		r.Scope = v
	}
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"X-Ratelimit-Limit", &r.Limit}, {"X-Ratelimit-Remaining", &r.Remaining}, {"X-Ratelimit-Used", &r.Used}} {
		v, ok := header(h, f.name, &problems)
		if !ok {
			continue
		}
		n, ok := count(v)
		if !ok {
			problems = append(problems, problem(strings.ToLower(f.name), v, "not a count"))
			continue
		}
		*f.dst = n
	}
	if v, ok := header(h, "X-Ratelimit-Reset", &problems); ok {
		n, ok := count(v)
		switch reset := time.Unix(n, 0); {
		case !ok:
			problems = append(problems, problem("x-ratelimit-reset", v, "not epoch seconds"))
		case reset.After(now.Add(maxWait)):
			problems = append(problems, problem("x-ratelimit-reset", v, "more than a year ahead"))
		case reset.After(now):
			r.Reset = reset
		}
	}
	if r.Limit > 0 && r.Used > r.Limit && r.Remaining > 0 {
		problems = append(problems, "x-ratelimit-used is over x-ratelimit-limit while remaining is not 0: contradictory, ignored")
		return nil, problems
	}
	r.RetryAfter = retryAfter(h, now, &problems)
	if !r.said() {
		return nil, problems
	}
	return []Reading{r}, problems
}
