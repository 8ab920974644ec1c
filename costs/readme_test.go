package costs_test

import (
	"net/http"
	"testing"

	"github.com/quotactl/quotactl/costs"
)

// TestReadmeTable loads the YAML table the README shows (kept verbatim in
// testdata/readme-github.yaml) and prices requests with it.
func TestReadmeTable(t *testing.T) {
	tb, err := costs.Load("testdata/readme-github.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want map[string]int64
	}{
		{"/search/code?q=x", map[string]int64{"search": 1, "core": 1}},
		{"/repos/quotactl/quotactl", map[string]int64{"core": 1}},
		{"/users/octocat", map[string]int64{"core": 1}}, // the default charge
	} {
		req, _ := http.NewRequest("GET", "https://api.github.com"+tc.path, nil)
		ch, err := tb.Price(req)
		if err != nil || len(ch.Units) != len(tc.want) {
			t.Fatalf("Price(%s) = %v, %v; want %v", tc.path, ch, err, tc.want)
		}
		for b, n := range tc.want {
			if ch.Units[b] != n {
				t.Fatalf("Price(%s) = %v; want %v", tc.path, ch.Units, tc.want)
			}
		}
	}
}
