package costs

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
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
}

// parseError reads a Google API error body; a body that is not one gives
// the zero errorInfo.
func parseError(body []byte) errorInfo {
	var info errorInfo
	if len(body) == 0 {
		return info
	}
	var g googleError
	if json.Unmarshal(body, &g) != nil {
		return info
	}
	for _, e := range g.Error.Errors {
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
	if resp == nil || resp.StatusCode < 400 || len(t.spec.Responses) == 0 || !t.pricesHost(req) {
		return quota.Verdict{}
	}
	var info errorInfo
	parsed := false
	for _, rule := range t.spec.Responses {
		if rule.Status != resp.StatusCode {
			continue
		}
		if !parsed && (len(rule.Reasons) > 0 || len(rule.Limits) > 0) {
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
			if len(info.reasons) > 0 {
				reason = info.reasons[0]
			}
		}
		switch {
		case rule.Retry:
			return quota.Verdict{Transient: true, Reason: reason}
		case len(rule.Hold) > 0:
			return quota.Verdict{Hold: []string{method}, HoldFor: rule.For, Reason: reason}
		}
		return quota.Verdict{Exhausted: t.charged(req, rule.Exhaust), Reason: reason}
	}
	return quota.Verdict{}
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
