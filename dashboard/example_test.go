package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/quotactl/quotactl/dashboard"
	"github.com/quotactl/quotactl/quota"
)

// ExampleNew serves the dashboard of a store: the page on /, Prometheus on
// /metrics, JSON on /api/... (here read directly from the handler).
func ExampleNew() {
	now := time.Date(2026, 11, 22, 17, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now } // a fixed clock, for the output
	store := quota.NewMemoryStore()
	la, _ := time.LoadLocation("America/Los_Angeles")
	lim, _ := quota.New(store, "youtube", []quota.Budget{{Name: "units", Limit: 10000, Window: quota.Daily(la)}}, quota.WithClock(clock))
	key := quota.Credential{Secret: "AIza...", Label: "yt-key-1"}
	if _, err := lim.Take(context.Background(), key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 9700}}); err != nil {
		panic(err)
	}

	h, err := dashboard.New(store, dashboard.WithClock(clock))
	if err != nil {
		panic(err)
	}
	// In a program: http.ListenAndServe("127.0.0.1:8080", h).
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/status", nil))
	var rows []dashboard.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &rows); err != nil {
		panic(err)
	}
	for _, r := range rows {
		fmt.Printf("%s/%s %s: %d of %d used (%d%%), %d left, resets in %v\n", r.API, r.Budget, r.Credential, r.Used, r.Limit, r.Percent, r.Remaining, time.Duration(r.ResetSeconds)*time.Second)
	}
	// Output:
	// youtube/units yt-key-1: 9700 of 10000 used (97%), 300 left, resets in 15h0m0s
}
