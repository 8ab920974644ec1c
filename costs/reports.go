package costs

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/quotactl/quotactl/costs/report"
	"github.com/quotactl/quotactl/quota"
)

// The report formats a table may declare (ReportSpec.Format).
const (
	ReportGitHub    = "github"           // x-ratelimit-* (report.GitHub)
	ReportIETF      = "ietf"             // RateLimit and RateLimit-Policy (report.IETF)
	ReportOpenAI    = "openai"           // x-ratelimit-*-requests/-tokens (report.OpenAI)
	ReportAnthropic = "anthropic"        // anthropic-ratelimit-* (report.Anthropic)
	ReportGoogle    = "google-errorinfo" // google.rpc.ErrorInfo error bodies (report.GoogleErrorInfo)
	ReportShopify   = "shopify"          // extensions.cost.throttleStatus of GraphQL bodies (report.Shopify)
)

// ReportFormats are the formats a ReportSpec may name.
var ReportFormats = []string{ReportGitHub, ReportIETF, ReportOpenAI, ReportAnthropic, ReportGoogle, ReportShopify}

// ReportSpec declares how to read one kind of upstream report from the
// API's responses: the format, and which local budget each upstream scope
// (a GitHub resource, an IETF policy name, OpenAI's "requests" and
// "tokens", a Google quota limit) reports on.
type ReportSpec struct {
	Format string `json:"format"`
	// Budgets maps an upstream scope to a budget of the table.
	Budgets map[string]string `json:"budgets,omitempty"`
	// Default, when set, is the budget of scopes Budgets does not name;
	// empty: they are not read.
	Default string `json:"default,omitempty"`
}

var _ quota.Reporter = (*Table)(nil)

// checkReports checks the table's report declarations.
func (t *Table) checkReports(specs []ReportSpec) error {
	for i, r := range specs {
		field := fmt.Sprintf("reports[%d]", i)
		if r.Format == "" {
			return specErrorf(field+".format", "missing: one of %s", strings.Join(ReportFormats, ", "))
		}
		if err := checkEnum(field+".format", r.Format, ReportFormats); err != nil {
			return err
		}
		if len(r.Budgets) == 0 && r.Default == "" {
			return specErrorf(field, "name the budgets it reports on (budgets: {SCOPE: BUDGET}) or a default")
		}
		for _, scope := range sortedKeys(r.Budgets) {
			if _, ok := t.budgets[r.Budgets[scope]]; !ok {
				return specErrorf(field+".budgets."+scope, "unknown budget %q (the table's: %s)", r.Budgets[scope], t.budgetNames())
			}
		}
		if _, ok := t.budgets[r.Default]; r.Default != "" && !ok {
			return specErrorf(field+".default", "unknown budget %q (the table's: %s)", r.Default, t.budgetNames())
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Reports implements quota.Reporter: it reads the reports the table
// declares (Spec.Reports) from resp, and returns them for the budgets they
// map to, with what it could not read. A table that declares none returns
// nothing at no cost. Relative resets count from now (zero: the host
// clock), not from the response's Date: the upstream's clock may be off.
func (t *Table) Reports(req *http.Request, resp *http.Response, body []byte, now time.Time) ([]quota.Report, []string) {
	if len(t.spec.Reports) == 0 || resp == nil {
		return nil, nil
	}
	if now.IsZero() {
		now = time.Now()
	}
	var out []quota.Report
	var ignored []string
	for _, rs := range t.spec.Reports {
		var readings []report.Reading
		var problems []string
		switch rs.Format {
		case ReportGitHub:
			readings, problems = report.GitHub(resp.Header, now)
		case ReportIETF:
			readings, problems = report.IETF(resp.Header, now)
		case ReportOpenAI:
			readings, problems = report.OpenAI(resp.Header, now)
		case ReportAnthropic:
			readings, problems = report.Anthropic(resp.Header, now)
		case ReportGoogle:
			if resp.StatusCode >= 400 {
				readings, problems = report.GoogleErrorInfo(body, now)
			}
		case ReportShopify:
			// (the Transport peeks a GraphQL call's successful responses:
			// quota.Estimate.Peek)
			readings, problems = report.Shopify(body, now)
		}
		ignored = append(ignored, problems...)
		for _, r := range readings {
			if r.Limit > 0 && r.Remaining > r.Limit {
				// absurd: more left than the limit; what it says of used is not known
				ignored = append(ignored, fmt.Sprintf("%s %s: remaining %d is over the limit %d: remaining ignored", rs.Format, r.Scope, r.Remaining, r.Limit))
				r.Remaining = -1
				if r.Used < 0 {
					continue
				}
			}
			if r.Limit > 0 && r.Used > r.Limit {
				// past the limit counts as the limit: nothing more is
				// known, and a count of 2^53 would stay in the store (and
				// its drift metrics) until the reset
				r.Used = r.Limit
			}
			budget, ok := rs.Budgets[r.Scope]
			if !ok {
				budget = rs.Default
			}
			if budget == "" {
				continue
			}
			// GitHub's and IETF windows reset whole: nothing remaining
			// means nothing until the reset
			spent := (rs.Format == ReportGitHub || rs.Format == ReportIETF) && r.Remaining == 0 && !r.Reset.IsZero()
			out = append(out, quota.Report{Budget: budget, Limit: r.Limit, Used: r.Used, Remaining: r.Remaining,
				Reset: r.Reset, Window: r.Window, Scope: r.Scope, RetryAfter: r.RetryAfter, Spent: spent})
		}
	}
	return out, ignored
}

func cloneReports(rs []ReportSpec) []ReportSpec {
	out := slices.Clone(rs)
	for i := range out {
		out[i].Budgets = maps.Clone(out[i].Budgets)
	}
	return out
}
