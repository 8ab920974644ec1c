// Package report reads what upstream responses say of an account's
// standing: limit, remaining or used, and when the window resets. Each
// parser is a pure function of a response's headers or body and the time
// the response was received; it never fails and never panics: a value it
// cannot read is left out and named in the problems it returns.
//
// Formats: IETF RateLimit and RateLimit-Policy (draft-ietf-httpapi-
// ratelimit-headers, Structured Fields parsed with github.com/dunglas/httpsfv)
// and the older RateLimit-Limit/-Remaining/-Reset trio; GitHub's
// x-ratelimit-*; OpenAI's x-ratelimit-*-requests/-tokens; Anthropic's
// anthropic-ratelimit-*; Google's google.rpc.ErrorInfo error bodies.
package report

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Reading is one standing a response reports, in the upstream's terms.
type Reading struct {
	// Scope is the upstream's name for what it covers: a GitHub resource
	// ("core"), an IETF policy name, OpenAI's "requests" or "tokens", a
	// Google quota limit.
	Scope string
	// Partition is the IETF partition key (pk), when said.
	Partition string
	// Limit is the upstream's limit (0: not said).
	Limit int64
	// Used and Remaining are -1 when not said.
	Used, Remaining int64
	// Reset is when the window resets (zero: not said).
	Reset time.Time
	// Window is the window's length when said (IETF w).
	Window time.Duration
	// RetryAfter is the wait the upstream asked for (Retry-After).
	RetryAfter time.Duration
}

func newReading(scope string) Reading { return Reading{Scope: scope, Used: -1, Remaining: -1} }

// said reports whether r says anything a true-up can use.
func (r Reading) said() bool { return r.Used >= 0 || r.Remaining >= 0 || r.Limit > 0 }

// maxCount bounds counts: larger values are refused as implausible
// (quota.MaxLimit, 2^53-1).
const maxCount = 1<<53 - 1

// maxWait bounds resets and waits read from a response: a year.
const maxWait = 366 * 24 * time.Hour

// clip shortens a value for a problem message.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}

func problem(header, value, why string) string {
	return fmt.Sprintf("%s: %s: %s", header, clip(value), why)
}

// count parses a non-negative decimal count.
func count(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > maxCount {
		return 0, false
	}
	return n, true
}

// seconds parses a non-negative number of seconds (a decimal fraction
// allowed) as a duration, at most maxWait.
func seconds(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 32 {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) || f > maxWait.Seconds() {
		return 0, false
	}
	return time.Duration(math.Ceil(f * float64(time.Second))), true
}

// header returns h's single value for name; two different values are a
// problem (which one holds is not known).
func header(h http.Header, name string, problems *[]string) (string, bool) {
	vs := h.Values(name)
	if len(vs) == 0 {
		return "", false
	}
	for _, v := range vs[1:] {
		if v != vs[0] {
			*problems = append(*problems, problem(name, strings.Join(vs, ", "), "given twice with different values"))
			return "", false
		}
	}
	return vs[0], true
}

// retryAfter reads Retry-After: delta seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time, problems *[]string) time.Duration {
	v, ok := header(h, "Retry-After", problems)
	if !ok {
		return 0
	}
	if d, ok := seconds(v); ok {
		return d
	}
	if t, err := time.Parse(time.RFC1123, strings.TrimSpace(v)); err == nil {
		return min(max(t.Sub(now), 0), maxWait)
	}
	*problems = append(*problems, problem("Retry-After", v, "neither seconds nor an HTTP date"))
	return 0
}
