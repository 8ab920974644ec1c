package report

import (
	"encoding/json"
	"math"
	"time"
)

// Shopify reads the throttleStatus a Shopify Admin GraphQL response
// carries in its body (extensions.cost.throttleStatus: maximumAvailable,
// currentlyAvailable, restoreRate;
// https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits, read
// 2026-11-28), successful or THROTTLED (both HTTP 200). Scope "cost": the
// limit is the bucket's size, remaining what it holds, and the reset the
// instant it would be full again at its restore rate (rounded up to the
// second): the points spent all count until then.
func Shopify(body []byte, now time.Time) ([]Reading, []string) {
	if len(body) == 0 {
		return nil, nil
	}
	var doc struct {
		Extensions *struct {
			Cost *struct {
				Throttle *struct {
					Max     *float64 `json:"maximumAvailable"`
					Current *float64 `json:"currentlyAvailable"`
					Restore *float64 `json:"restoreRate"`
				} `json:"throttleStatus"`
			} `json:"cost"`
		} `json:"extensions"`
	}
	if json.Unmarshal(body, &doc) != nil || doc.Extensions == nil || doc.Extensions.Cost == nil || doc.Extensions.Cost.Throttle == nil {
		return nil, nil // not a GraphQL body with a cost (or one cut short): nothing said
	}
	ts := doc.Extensions.Cost.Throttle
	ok := func(f *float64) bool { return f != nil && *f >= 0 && *f <= maxCount && !math.IsNaN(*f) }
	if !ok(ts.Max) || !ok(ts.Current) || *ts.Current > *ts.Max || *ts.Max < 1 {
		return nil, []string{"extensions.cost.throttleStatus: maximumAvailable and currentlyAvailable must be counts with currentlyAvailable at most maximumAvailable"}
	}
	r := newReading("cost")
	r.Limit = int64(*ts.Max)
	r.Remaining = int64(math.Floor(*ts.Current))
	if ok(ts.Restore) && *ts.Restore > 0 {
		secs := math.Ceil((*ts.Max - *ts.Current) / *ts.Restore)
		r.Reset = now.Add(min(time.Duration(secs)*time.Second, maxWait))
	}
	return []Reading{r}, nil
}
