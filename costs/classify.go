package costs

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/quotactl/quotactl/quota"
)

// googleError is the error body of Google APIs, in both its forms:
// error.errors[].reason (v1) and error.details[].reason (google.rpc.ErrorInfo).
type googleError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Errors  []struct {
			Reason string `json:"reason"`
			Domain string `json:"domain"`
		} `json:"errors"`
		Details []struct {
			Reason string `json:"reason"`
		} `json:"details"`
	} `json:"error"`
}

// reasons returns the error reasons in a Google API error body, or nil.
func reasons(body []byte) []string {
	if len(body) == 0 {
		return nil
	}
	var g googleError
	if json.Unmarshal(body, &g) != nil {
		return nil
	}
	var out []string
	for _, e := range g.Error.Errors {
		if e.Reason != "" {
			out = append(out, e.Reason)
		}
	}
	for _, d := range g.Error.Details {
		if d.Reason != "" {
			out = append(out, d.Reason)
		}
	}
	if len(out) == 0 && g.Error.Status != "" {
		out = append(out, g.Error.Status)
	}
	return out
}

// Classify implements quota.Classifier: it reads an upstream error response
// with the table's response rules. For the YouTube profile a 403
// quotaExceeded or dailyLimitExceeded means every budget the request's
// method charges is spent until its next reset; a 429 rateLimitExceeded means
// the method's own bucket (search, uploads, stats) is spent. Responses no
// rule matches give the zero Verdict.
func (t *Table) Classify(req *http.Request, resp *http.Response, body []byte) quota.Verdict {
	if resp == nil || resp.StatusCode < 400 || len(t.spec.Responses) == 0 {
		return quota.Verdict{}
	}
	var rs []string
	parsed := false
	for _, rule := range t.spec.Responses {
		if rule.Status != resp.StatusCode {
			continue
		}
		reason := ""
		if len(rule.Reasons) > 0 {
			if !parsed {
				rs, parsed = reasons(body), true
			}
			i := slices.IndexFunc(rs, func(r string) bool { return slices.Contains(rule.Reasons, r) })
			if i < 0 {
				continue
			}
			reason = rs[i]
		}
		if rule.Retry {
			return quota.Verdict{Transient: true, Reason: reason}
		}
		return quota.Verdict{Exhausted: t.exhausted(req, rule.Exhaust), Reason: reason}
	}
	return quota.Verdict{}
}

// exhausted returns the budgets of names that req's method charges ("*":
// all of them), in table order.
func (t *Table) exhausted(req *http.Request, names []string) []string {
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
