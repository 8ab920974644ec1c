package ytsim

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func (s *Server) popFault(path string) (Fault, bool) {
	for i, f := range s.faults {
		if strings.HasPrefix(path, f.Path) {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
			return f, true
		}
	}
	return Fault{}, false
}

// billed reports whether the upstream bills a request it answers with f.
// Google bills every request that reaches it, failed ones included, except
// those it refuses because a quota is spent: the faults the cost table's
// response rules read as exhausting a budget the request's method charges.
func (s *Server) billed(r *http.Request, f Fault) bool {
	if f.Drop {
		return true
	}
	status, header, body := faultResponse(f)
	v := s.rules.Classify(r, &http.Response{StatusCode: status, Header: header}, body)
	return len(v.Exhausted) == 0
}

// faultResponse returns the answer to a request failed with f (not Drop).
func faultResponse(f Fault) (int, http.Header, []byte) {
	h := http.Header{"Content-Type": {"application/json; charset=UTF-8"}}
	if f.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((f.RetryAfter+time.Second-1)/time.Second)))
	}
	reason := f.Reason
	var body []byte
	switch {
	case f.Status == http.StatusForbidden && (reason == "" || reason == "quotaExceeded"):
		body = errorBody(f.Status, quotaMessage, "youtube.quota", "quotaExceeded", "")
	case f.Status == http.StatusTooManyRequests:
		if reason == "" {
			reason = "rateLimitExceeded"
		}
		body = RateLimitBody(reason, f.Daily)
	case f.Status == http.StatusBadRequest && reason == "uploadLimitExceeded":
		body = errorBody(f.Status, uploadMessage, "youtube.video", reason, "")
	case f.Status >= 500:
		if reason == "" {
			reason = "backendError"
		}
		body = errorBody(f.Status, "Backend Error", "global", reason, "UNAVAILABLE")
	default:
		body = errorBody(f.Status, http.StatusText(f.Status), "global", reason, "")
	}
	return f.Status, h, body
}

func (s *Server) writeFault(w http.ResponseWriter, f Fault) {
	if f.Drop {
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic(http.ErrAbortHandler) // HTTP/2: abort the stream
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // reset, not a graceful close
			}
			_ = conn.Close()
		}
		return
	}
	status, header, body := faultResponse(f)
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// apiKey returns the credential of a request: the key parameter, the
// X-Goog-Api-Key header, or a bearer token.
func apiKey(r *http.Request) string {
	if k := r.URL.Query().Get("key"); k != "" {
		return k
	}
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return k
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

// uploadMessage is Google's message for a channel past its upload cap.
const uploadMessage = "The user has exceeded the number of videos they may upload."

// RateLimitBody returns the body of a 429 in Google's documented shape: the
// v1 errors[] list with reason, and a google.rpc.ErrorInfo detail
// (RATE_LIMIT_EXCEEDED) whose metadata.quota_limit, like the message, names
// a per-minute limit, or a per-day one when daily is set.
func RateLimitBody(reason string, daily bool) []byte {
	period, limit := "minute", "DefaultRequestsPerMinutePerProject"
	if daily {
		period, limit = "day", "DefaultRequestsPerDayPerProject"
	}
	msg := "Quota exceeded for quota metric 'Queries' and limit 'Queries per " + period +
		"' of service 'youtube.googleapis.com' for consumer 'project_number:123456789'."
	type item struct {
		Message string `json:"message"`
		Domain  string `json:"domain"`
		Reason  string `json:"reason"`
	}
	type detail struct {
		Type     string            `json:"@type"`
		Reason   string            `json:"reason"`
		Domain   string            `json:"domain"`
		Metadata map[string]string `json:"metadata"`
	}
	type body struct {
		Code    int      `json:"code"`
		Message string   `json:"message"`
		Errors  []item   `json:"errors"`
		Status  string   `json:"status"`
		Details []detail `json:"details"`
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]body{"error": {
		Code: http.StatusTooManyRequests, Message: msg, Errors: []item{{msg, "global", reason}}, Status: "RESOURCE_EXHAUSTED",
		Details: []detail{{
			Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: "RATE_LIMIT_EXCEEDED", Domain: "googleapis.com",
			Metadata: map[string]string{
				"consumer": "projects/123456789", "service": "youtube.googleapis.com",
				"quota_metric": "youtube.googleapis.com/default", "quota_limit": limit,
			},
		}},
	}})
	return buf.Bytes()
}

// quotaMessage is Google's message for a spent daily quota.
const quotaMessage = `The request cannot be completed because you have exceeded your <a href="/youtube/v3/getting-started#quota">quota</a>.`

func writeQuotaExceeded(w http.ResponseWriter) {
	writeError(w, http.StatusForbidden, quotaMessage, "youtube.quota", "quotaExceeded", "")
}

// writeError writes a Google API error response.
func writeError(w http.ResponseWriter, code int, msg, domain, reason, status string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_, _ = w.Write(errorBody(code, msg, domain, reason, status))
}

// errorBody returns a Google API error body:
// {"error":{"code":N,"message":M,"errors":[{"message":M,"domain":D,"reason":R}],"status":S}}.
func errorBody(code int, msg, domain, reason, status string) []byte {
	type item struct {
		Message string `json:"message"`
		Domain  string `json:"domain"`
		Reason  string `json:"reason"`
	}
	type body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Errors  []item `json:"errors"`
		Status  string `json:"status,omitempty"`
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]body{"error": {Code: code, Message: msg, Errors: []item{{msg, domain, reason}}, Status: status}})
	return buf.Bytes()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
