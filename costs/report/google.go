package report

import (
	"encoding/json"
	"time"
)

// GoogleErrorInfo reads a Google API error body whose details hold a
// google.rpc.ErrorInfo naming a quota limit
// (https://cloud.google.com/apis/design/errors#error_info, read
// 2026-11-28), as YouTube's per-method buckets send with a 429
// RESOURCE_EXHAUSTED: metadata quota_limit (the Scope) and
// quota_limit_value (the Limit). The bucket is spent: Remaining 0. Google
// says no reset time; the caller knows the bucket's window.
func GoogleErrorInfo(body []byte, now time.Time) ([]Reading, []string) {
	if len(body) == 0 {
		return nil, nil
	}
	var doc struct {
		Error struct {
			Details []struct {
				Type     string            `json:"@type"`
				Reason   string            `json:"reason"`
				Metadata map[string]string `json:"metadata"`
			} `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, []string{"error body: not JSON of Google's error shape"}
	}
	var out []Reading
	var problems []string
	for _, d := range doc.Error.Details {
		if d.Type != "type.googleapis.com/google.rpc.ErrorInfo" {
			continue
		}
		scope := d.Metadata["quota_limit"]
		if scope == "" {
			continue // an ErrorInfo of another kind
		}
		r := newReading(scope)
		r.Remaining = 0
		if v, ok := d.Metadata["quota_limit_value"]; ok {
			if n, ok := count(v); ok {
				r.Limit = n
			} else {
				problems = append(problems, problem("quota_limit_value", v, "not a count"))
			}
		}
		out = append(out, r)
	}
	_ = now
	return out, problems
}
