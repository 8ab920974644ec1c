package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/quota"
)

// ProblemBase prefixes the type of every problem document the proxy
// answers with (RFC 9457): ProblemBase + "budget-exhausted", ...; the
// guide documents each under that anchor.
const ProblemBase = "https://github.com/quotactl/quotactl/blob/main/docs/proxy.md#"

// problem is an RFC 9457 problem document, with the budget's standing
// when a budget refused the call.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`

	API        string `json:"api,omitempty"`
	Budget     string `json:"budget,omitempty"` // API/BUDGET
	Used       *int64 `json:"used,omitempty"`
	Limit      *int64 `json:"limit,omitempty"`
	Cost       *int64 `json:"cost,omitempty"`
	RetryAfter *int64 `json:"retry_after,omitempty"` // whole seconds, rounded up
	RetryAt    string `json:"retry_at,omitempty"`    // RFC 3339
}

// problem writes pb as application/problem+json; its Type is a fragment
// of ProblemBase.
func (p *Proxy) problem(w http.ResponseWriter, r *http.Request, pb problem) {
	pb.Type = ProblemBase + pb.Type
	pb.Detail = p.scrub(pb.Detail)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(pb.Status)
	_ = json.NewEncoder(w).Encode(pb)
}

// fail answers a request the Transport did not bring a response for
// (httputil.ReverseProxy's ErrorHandler).
func (p *Proxy) fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		ex *quota.ExhaustedError
		mb *http.MaxBytesError
	)
	switch {
	case errors.As(err, &ex):
		p.refuse(w, r, ex)
	case errors.As(err, &mb):
		p.tooLarge(w, r)
	case errClientGone(r, err):
		w.WriteHeader(499) // nobody reads it; the charge is refunded if the call was not sent
	case errors.Is(err, quota.ErrStoreUnavailable):
		p.log.LogAttrs(r.Context(), slog.LevelError, "proxy: store unavailable", slog.String("method", r.Method), slog.String("path", p.scrub(r.URL.Path)), slog.String("err", p.scrub(err.Error())))
		w.Header().Set("Retry-After", "1")
		p.problem(w, r, problem{Type: "store-unavailable", Title: "Quota store unavailable", Status: http.StatusServiceUnavailable,
			Detail: "the quota store cannot be reached, so the call was not metered and not sent"})
	case errors.Is(err, quota.ErrCostExceedsLimit):
		p.problem(w, r, problem{Type: "cost-exceeds-limit", Title: "Call costs more than the limit", Status: http.StatusForbidden,
			Detail: "the call costs more than its budget's whole limit: it can never be paid, do not retry it; " + p.scrub(err.Error())})
	case errors.Is(err, costs.ErrUnknownMethod):
		p.problem(w, r, problem{Type: "unknown-method", Title: "Not a method of the cost table", Status: http.StatusNotFound,
			Detail: fmt.Sprintf("the cost table %s prices no %s %s and declares no default cost: not sent", p.table.API, r.Method, p.scrub(r.URL.Path))})
	case errors.Is(err, costs.ErrDeprecated):
		p.problem(w, r, problem{Type: "deprecated-method", Title: "Method no longer served", Status: http.StatusGone, Detail: p.scrub(err.Error())})
	case errors.Is(err, quota.ErrInvalid):
		p.problem(w, r, problem{Type: "bad-request", Title: "Request cannot be metered", Status: http.StatusBadRequest, Detail: p.scrub(err.Error())})
	default:
		p.log.LogAttrs(r.Context(), slog.LevelWarn, "proxy: upstream unreachable", slog.String("method", r.Method), slog.String("path", p.scrub(r.URL.Path)), slog.String("err", p.scrub(err.Error())))
		p.problem(w, r, problem{Type: "upstream-unreachable", Title: "Upstream unreachable", Status: http.StatusBadGateway,
			Detail: "the upstream could not be reached or its answer could not be read"})
	}
}

func (p *Proxy) tooLarge(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	p.problem(w, r, problem{Type: "body-too-large", Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
		Detail: fmt.Sprintf("the request body is larger than this proxy's limit of %d bytes (quotactl proxy --max-body)", p.maxBody)})
}

// retrySeconds returns d in whole seconds, rounded up, at least 1.
func retrySeconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}

// refuse answers a call a budget refused, in the table's refusal shape,
// and logs one line saying so.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, ex *quota.ExhaustedError) {
	secs := retrySeconds(ex.RetryAfter)
	at := ex.RetryAt
	if at.IsZero() {
		at = time.Now().Add(ex.RetryAfter)
	}
	budget := ex.API + "/" + ex.Budget
	p.log.LogAttrs(r.Context(), slog.LevelWarn, "proxy: refused",
		slog.String("method", r.Method), slog.String("path", p.scrub(r.URL.Path)), slog.String("budget", budget),
		slog.Int64("used", ex.Used), slog.Int64("limit", ex.Limit), slog.Int64("cost", ex.Cost),
		slog.Int64("retry_after", secs), slog.String("shape", p.table.Refusal()))
	detail := fmt.Sprintf("%s: %d of %d units used, the call costs %d; capacity returns in %ds (at %s)",
		budget, ex.Used, ex.Limit, ex.Cost, secs, at.UTC().Format(time.RFC3339))
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	switch p.table.Refusal() {
	case costs.RefusalGoogle:
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
		writeGoogle(w, ex.API, detail)
	case costs.RefusalGitHub:
		writeGitHub(w, ex, at, detail)
	default:
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
		used, limit, cost := ex.Used, ex.Limit, ex.Cost
		p.problem(w, r, problem{Type: "budget-exhausted", Title: "Budget exhausted", Status: http.StatusTooManyRequests,
			Detail: detail, API: ex.API, Budget: budget, Used: &used, Limit: &limit, Cost: &cost,
			RetryAfter: &secs, RetryAt: at.UTC().Format(time.RFC3339)})
	}
}

// googleMessage is Google's message for a spent daily quota.
const googleMessage = `The request cannot be completed because you have exceeded your <a href="/youtube/v3/getting-started#quota">quota</a>.`

// writeGoogle answers as a Google API whose quota is spent: 403, reason
// quotaExceeded (which Google's client libraries do not retry).
func writeGoogle(w http.ResponseWriter, api, detail string) {
	domain := "usageLimits"
	if api == "youtube" {
		domain = "youtube.quota"
	}
	msg := googleMessage + " (quotactl proxy: " + detail + ")"
	type item struct {
		Message string `json:"message"`
		Domain  string `json:"domain"`
		Reason  string `json:"reason"`
	}
	type body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Errors  []item `json:"errors"`
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusForbidden)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]body{"error": {Code: http.StatusForbidden, Message: msg, Errors: []item{{msg, domain, "quotaExceeded"}}}})
}

// writeGitHub answers as GitHub does when a primary rate limit is spent:
// 403, x-ratelimit-remaining: 0 and x-ratelimit-reset (epoch seconds).
func writeGitHub(w http.ResponseWriter, ex *quota.ExhaustedError, at time.Time, detail string) {
	h := w.Header()
	reset := at.Unix()
	if at.Nanosecond() > 0 {
		reset++
	}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Ratelimit-Limit", strconv.FormatInt(ex.Limit, 10))
	h.Set("X-Ratelimit-Remaining", "0")
	h.Set("X-Ratelimit-Used", strconv.FormatInt(ex.Used, 10))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(reset, 10))
	h.Set("X-Ratelimit-Resource", ex.Budget)
	w.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(w).Encode(map[string]string{
		"message":           "API rate limit exceeded (quotactl proxy: " + detail + ")",
		"documentation_url": "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api",
	})
}
