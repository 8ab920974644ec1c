package quota_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
)

type untilClassifier struct{ until time.Time }

func (c untilClassifier) Classify(*http.Request, *http.Response, []byte) quota.Verdict {
	return quota.Verdict{Exhausted: []string{"calls"}, Until: c.until, Reason: "spent"}
}

// Verdict.Until marks the budget spent until the upstream's reset when that
// is sooner than the window's; a later or past Until is not taken.
func TestTransportVerdictUntil(t *testing.T) {
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	defer srv.Close()
	for _, c := range []struct {
		name        string
		until, want time.Time
	}{
		{"sooner", now.Add(10 * time.Minute), now.Add(10 * time.Minute)},
		{"later than the window", now.Add(3 * time.Hour), now.Add(time.Hour)},
		{"past", now.Add(-time.Minute), now.Add(time.Hour)},
		{"unset", time.Time{}, now.Add(time.Hour)},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := testkit.NewClock(now)
			lim, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{{Name: "calls", Limit: 100, Window: quota.Sliding(time.Hour)}}, quota.WithClock(clk.Now))
			if err != nil {
				t.Fatal(err)
			}
			pricer := quota.PricerFunc(func(*http.Request) (quota.Charge, error) {
				return quota.Charge{Method: "get", Units: map[string]int64{"calls": 1}}, nil
			})
			tr := quota.NewTransport(lim, pricer, quota.WithCredential(quota.Credential{Secret: "k"}), quota.WithClassifier(untilClassifier{c.until}))
			req, _ := http.NewRequestWithContext(context.Background(), "GET", srv.URL, nil)
			_, err = tr.RoundTrip(req)
			var ex *quota.ExhaustedError
			if !errors.As(err, &ex) || !ex.ExhaustedUntil.Equal(c.want) {
				t.Fatalf("err = %v (%+v), want spent until %v", err, ex, c.want)
			}
		})
	}
}
