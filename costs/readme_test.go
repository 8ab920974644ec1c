package costs_test

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/quota"
)

// TestReadmeTable loads the YAML table the cost tables guide shows
// (docs/cost-tables.md, kept verbatim in testdata/readme-github.yaml) and
// prices requests with it.
func TestReadmeTable(t *testing.T) {
	file, err := os.ReadFile("testdata/readme-github.yaml")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../docs/cost-tables.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```yaml\n"+string(file)+"```") {
		t.Fatal("testdata/readme-github.yaml is not the table of docs/cost-tables.md any more")
	}
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
	// Another host is not the API's, not even at the default charge.
	req, _ := http.NewRequest("GET", "https://uploads.github.com/repos/quotactl/quotactl", nil)
	if ch, err := tb.Price(req); !errors.Is(err, quota.ErrForeignHost) {
		t.Fatalf("Price(uploads.github.com) = %v, %v; want ErrForeignHost", ch, err)
	}
}

// TestPackageDocTable parses the example table of the package doc
// (doc.go), so that the schema it shows stays true.
func TestPackageDocTable(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var yaml strings.Builder
	in := false
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case strings.HasPrefix(line, "// A table file holds one mapping. YAML:"):
			in = true
		case strings.HasPrefix(line, "// The same in JSON"):
			in = false
		case in && strings.HasPrefix(line, "//\t"):
			yaml.WriteString(strings.TrimPrefix(line, "//\t") + "\n")
		}
	}
	tb, err := costs.Parse("doc.yaml", []byte(yaml.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, yaml.String())
	}
	if tb.Owner != "project" || len(tb.HoldMethods()) != 1 || len(tb.Hosts()) != 2 {
		t.Fatalf("owner %q, holds %v, hosts %q", tb.Owner, tb.HoldMethods(), tb.Hosts())
	}
}
