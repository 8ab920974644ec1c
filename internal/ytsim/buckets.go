package ytsim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Bucket describes one of YouTube's per-method quota buckets (Google's
// "granular quota system" since 2026-06-01,
// https://developers.google.com/youtube/v3/revision_history, read
// 2026-11-22): when it is spent the server answers 429 RESOURCE_EXHAUSTED
// with a google.rpc.ErrorInfo (reason RATE_LIMIT_EXCEEDED) whose metadata
// names the bucket, instead of the 403 quotaExceeded of the shared units
// pool.
type Bucket struct {
	// Metric is metadata.quota_metric, e.g.
	// "youtube.googleapis.com/video_insert".
	Metric string
	// Limit is metadata.quota_limit, e.g.
	// "defaultVideoInsertPerDayPerProject".
	Limit string
	// Display is the metric's display name in the message, e.g. "Video
	// Uploads" ("limit 'Video Uploads per day'").
	Display string
}

// defaultBuckets are the per-method buckets of the built-in YouTube table.
//
// uploads: the shape of a 429 YouTube sent for videos.insert, quoted in a
// public report (metadata quota_limit "defaultVideoInsertPerDayPerProject",
// quota_limit_value, quota_metric "youtube.googleapis.com/video_insert",
// window_start_time in epoch seconds, quota_unit "1/d/{project}"; message
// "Quota exceeded for quota metric 'Video Uploads' and limit 'Video Uploads
// per day' of service 'youtube.googleapis.com' for consumer
// 'project_number:N'."). search and stats: not published; named on the same
// pattern. The field meanings are Google's error model:
// https://github.com/googleapis/googleapis/blob/master/google/api/error_reason.proto
// (RATE_LIMIT_EXCEEDED: quota_metric, quota_limit), read 2026-11-28.
var defaultBuckets = map[string]Bucket{
	"uploads": {Metric: "youtube.googleapis.com/video_insert", Limit: "defaultVideoInsertPerDayPerProject", Display: "Video Uploads"},
	"search":  {Metric: "youtube.googleapis.com/search_list", Limit: "defaultSearchListPerDayPerProject", Display: "Search List"},
	"stats":   {Metric: "youtube.googleapis.com/videos_batch_get_stats", Limit: "defaultVideosBatchGetStatsPerDayPerProject", Display: "Video Stats"},
}

// WithBucket makes budget a per-method bucket answered, when spent, with
// the 429 ErrorInfo of b; WithBucket(budget, Bucket{}) makes it answer 403
// quotaExceeded like the shared pool. Default: the buckets "search",
// "uploads" and "stats" of the built-in table.
func WithBucket(budget string, b Bucket) Option {
	return func(s *Server) {
		if b == (Bucket{}) {
			delete(s.buckets, budget)
			return
		}
		s.buckets[budget] = b
	}
}

// BucketBody returns the body of the 429 a spent per-method bucket sends:
// error.code 429, status RESOURCE_EXHAUSTED, the v1 errors[] list (reason
// rateLimitExceeded) and a google.rpc.ErrorInfo detail with reason
// RATE_LIMIT_EXCEEDED and metadata quota_limit, quota_limit_value (limit),
// quota_metric, quota_unit and window_start_time (the window's start, epoch
// seconds).
func BucketBody(b Bucket, limit int64, windowStart time.Time) []byte {
	msg := "Quota exceeded for quota metric '" + b.Display + "' and limit '" + b.Display +
		" per day' of service 'youtube.googleapis.com' for consumer 'project_number:123456789'."
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
		Code: http.StatusTooManyRequests, Message: msg, Errors: []item{{msg, "global", "rateLimitExceeded"}}, Status: "RESOURCE_EXHAUSTED",
		Details: []detail{{
			Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: "RATE_LIMIT_EXCEEDED", Domain: "googleapis.com",
			Metadata: map[string]string{
				"consumer": "projects/123456789", "service": "youtube.googleapis.com",
				"quota_metric": b.Metric, "quota_limit": b.Limit, "quota_limit_value": strconv.FormatInt(limit, 10),
				"quota_unit": "1/d/{project}", "window_start_time": strconv.FormatInt(windowStart.Unix(), 10),
			},
		}},
	}})
	return buf.Bytes()
}

// writeSpent answers a request refused because budget is spent: the 429 of
// a per-method bucket, or 403 quotaExceeded for the shared pool.
func (s *Server) writeSpent(w http.ResponseWriter, budget string, now time.Time) {
	bk, ok := s.buckets[budget]
	if !ok {
		writeQuotaExceeded(w)
		return
	}
	b, _ := s.budget(budget)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(BucketBody(bk, b.Limit, b.Window.Start(now)))
}

// Spend charges units of budget to the project of key, as a client the
// meter does not see (another service on the key, a person's script) would
// by calling the API, and reports whether the project could pay (false:
// nothing was charged).
func (s *Server) Spend(key, budget string, units int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.budget(budget); !ok || units <= 0 {
		return false
	}
	return s.charge(s.keyState(s.Project(key)), map[string]int64{budget: units}) == ""
}
