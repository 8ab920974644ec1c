package costs

import (
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/quotactl/quotactl/quota"
)

// googleError is the error body of Google APIs, in both its forms:
// error.errors[].reason (v1) and error.details[] (google.rpc.ErrorInfo,
// whose metadata names the quota limit that refused the call).
type googleError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Errors  []struct {
			Message string `json:"message"`
			Reason  string `json:"reason"`
			Domain  string `json:"domain"`
		} `json:"errors"`
		Details []struct {
			Type     string            `json:"@type"`
			Reason   string            `json:"reason"`
			Metadata map[string]string `json:"metadata"`
		} `json:"details"`
	} `json:"error"`
}

// errorInfo is what Classify reads from an error body.
type errorInfo struct {
	reasons []string // error.errors[].reason, error.details[].reason, else error.status
	limits  []string // normalized quota limits and messages, for Rule.Limits
	msgs    []string // lower-cased messages, for Rule.Messages
}

// parseError reads a Google API error body; a body that is not one gives
// the zero errorInfo.
func parseError(body []byte) errorInfo {
	var info errorInfo
	if len(body) == 0 {
		return info
	}
	// Other JSON APIs' errors carry a top-level message (GitHub's
	// {"message": ..., "documentation_url": ...}); read it on its own, so
	// that a body whose "error" is not Google's object still gives it.
	var top struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &top) == nil && top.Message != "" {
		info.msgs = append(info.msgs, strings.ToLower(top.Message))
	}
	var g googleError
	if json.Unmarshal(body, &g) != nil {
		return info
	}
	if g.Error.Message != "" {
		info.msgs = append(info.msgs, strings.ToLower(g.Error.Message))
	}
	for _, e := range g.Error.Errors {
		if e.Message != "" {
			info.msgs = append(info.msgs, strings.ToLower(e.Message))
		}
		if e.Reason != "" {
			info.reasons = append(info.reasons, e.Reason)
		}
		if e.Message != "" {
			info.limits = append(info.limits, normLimit(e.Message))
		}
	}
	for _, d := range g.Error.Details {
		if d.Reason != "" {
			info.reasons = append(info.reasons, d.Reason)
		}
		if q := d.Metadata["quota_limit"]; q != "" {
			info.limits = append(info.limits, normLimit(q))
		}
	}
	if len(info.reasons) == 0 && g.Error.Status != "" {
		info.reasons = append(info.reasons, g.Error.Status)
	}
	if g.Error.Message != "" {
		info.limits = append(info.limits, normLimit(g.Error.Message))
	}
	return info
}

// normLimit lower-cases s and drops spaces, '_' and '-', so that "per
// day" matches "DefaultRequestsPerDayPerProject" and "queries_per_day".
func normLimit(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '_', '-', '\t':
			return -1
		}
		return unicode.ToLower(r)
	}, s)
}

// Classify implements quota.Classifier: it reads an upstream error response
// with the table's response rules (see Rule). For the YouTube profile:
//
//   - 403 quotaExceeded or dailyLimitExceeded: every budget the request's
//     method charges is spent until its next reset;
//   - 429 whose quota limit is per day: the same;
//   - any other 429 (a per-minute throttle): transient, retried with
//     backoff, the budgets left open;
//   - 400 uploadLimitExceeded: the credential (channel) may not upload for
//     24 hours; the project's budgets are left alone.
//
// Responses no rule matches, and responses to a host the table does not
// price (Spec.Hosts), give the zero Verdict.
func (t *Table) Classify(req *http.Request, resp *http.Response, body []byte) quota.Verdict {
	if resp != nil && resp.StatusCode < 400 && t.pricesHost(req) {
		return t.classifyGraphQL(req, body)
	}
	if resp == nil || resp.StatusCode < 400 || len(t.spec.Responses) == 0 || !t.pricesHost(req) {
		return quota.Verdict{}
	}
	var info errorInfo
	parsed := false
	for _, rule := range t.spec.Responses {
		if rule.Status != resp.StatusCode || !matchHeaders(resp.Header, rule.Headers) {
			continue
		}
		if !parsed && (len(rule.Reasons) > 0 || len(rule.Limits) > 0 || len(rule.Messages) > 0) {
			info, parsed = parseError(body), true
		}
		reason := ""
		if len(rule.Reasons) > 0 {
			i := slices.IndexFunc(info.reasons, func(r string) bool { return slices.Contains(rule.Reasons, r) })
			if i < 0 {
				continue
			}
			reason = info.reasons[i]
		}
		if len(rule.Limits) > 0 && !matchLimit(info.limits, rule.Limits) {
			continue
		}
		if len(rule.Messages) > 0 {
			m := matchMessage(info.msgs, rule.Messages)
			if m == "" {
				continue
			}
			if reason == "" {
				reason = m
			}
		}
		var method string
		if len(rule.Hold) > 0 {
			if r := t.router.match(req.Method, req.URL.Path, req.URL.RawQuery); r != nil {
				method = r.m.Name
			}
			if !slices.Contains(rule.Hold, method) {
				continue
			}
		}
		if reason == "" {
			if !parsed {
				info, parsed = parseError(body), true
			}
			reason = ruleReason(info, rule)
		}
		switch {
		case rule.Retry:
			return quota.Verdict{Transient: true, Reason: reason}
		case len(rule.Hold) > 0:
			return quota.Verdict{Hold: []string{method}, HoldFor: rule.For, Reason: reason}
		}
		return quota.Verdict{Exhausted: t.charged(req, rule.Exhaust), Reason: reason, Until: resetAt(resp.Header, rule.ResetHeader)}
	}
	return quota.Verdict{}
}

// ruleReason returns the reason of a matched rule for errors and logs: the
// body's first reason, else the headers the rule matched.
func ruleReason(info errorInfo, rule Rule) string {
	if len(info.reasons) > 0 {
		return info.reasons[0]
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(rule.Headers)) {
		parts = append(parts, strings.ToLower(k)+": "+rule.Headers[k])
	}
	return strings.Join(parts, ", ")
}

// matchHeaders reports whether h has every header of want with its value.
func matchHeaders(h http.Header, want map[string]string) bool {
	for k, v := range want {
		if strings.TrimSpace(h.Get(k)) != v {
			return false
		}
	}
	return true
}

// matchMessage returns the first of want that one of the lower-cased
// messages contains, or "".
func matchMessage(have, want []string) string {
	for _, w := range want {
		lw := strings.ToLower(w)
		for _, h := range have {
			if strings.Contains(h, lw) {
				return w
			}
		}
	}
	return ""
}

// resetAt reads the epoch seconds in header name of h; zero when name is
// empty or the value is not a positive integer of at most 12 digits.
func resetAt(h http.Header, name string) time.Time {
	if name == "" {
		return time.Time{}
	}
	v := strings.TrimSpace(h.Get(name))
	if v == "" || len(v) > 12 {
		return time.Time{}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0)
}

// matchLimit reports whether one of the normalized limits in the body
// contains one of the rule's limit kinds.
func matchLimit(have, want []string) bool {
	for _, w := range want {
		w = normLimit(w)
		for _, h := range have {
			if strings.Contains(h, w) {
				return true
			}
		}
	}
	return false
}

// charged returns the budgets of names that req's method charges ("*":
// all of them), in table order.
func (t *Table) charged(req *http.Request, names []string) []string {
	var units map[string]int64
	if r := t.router.match(req.Method, req.URL.Path, req.URL.RawQuery); r != nil {
		units = r.m.Cost
	} else {
		units = t.def.Units
	}
	var out []string
	for _, b := range t.Budgets {
		if _, charged := units[b.Name]; charged && (slices.Contains(names, "*") || slices.Contains(names, b.Name)) {
			out = append(out, b.Name)
		}
	}
	return out
}

// classifyGraphQL reads a successful response of a method priced as a
// Shopify GraphQL query: a THROTTLED error (sent with HTTP 200) says the
// query-cost budgets cannot pay it now, until the bucket has restored the
// points it lacked (Verdict.RetryAfter, from throttleStatus and the
// requested cost; zero when they are not said: the budgets' window).
func (t *Table) classifyGraphQL(req *http.Request, body []byte) quota.Verdict {
	r := t.router.match(req.Method, req.URL.Path, req.URL.RawQuery)
	if r == nil || r.m.Body == nil || r.m.Body.Format != ShopifyGraphQL || len(body) == 0 {
		return quota.Verdict{}
	}
	u, err := ReadUsage(ShopifyGraphQL, body)
	if err != nil || !u.Throttled {
		return quota.Verdict{}
	}
	v := quota.Verdict{Exhausted: slices.Clone(r.m.Body.QueryCost), Reason: "THROTTLED"}
	if ts := u.Throttle; ts != nil && ts.RestoreRate > 0 && u.RequestedQueryCost > 0 {
		lack := float64(u.RequestedQueryCost) - ts.CurrentlyAvailable
		ms := math.Ceil(max(lack, 0) / ts.RestoreRate * 1000)
		v.RetryAfter = time.Duration(min(ms, float64(time.Hour/time.Millisecond))) * time.Millisecond // (a window is shorter anyway)
	}
	return v
}
