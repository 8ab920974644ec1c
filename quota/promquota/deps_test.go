package promquota_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies: the store collector shares the tools' view model
// (internal/view), and that pulls in neither the jobs scheduler nor the
// cost tables.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/quotactl/quotactl/quota/promquota").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/quotactl/quotactl/jobs", "github.com/quotactl/quotactl/costs", "github.com/robfig/", "go.yaml.in/", "modernc.org/", "github.com/redis/"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("promquota depends on %s", dep)
			}
		}
	}
}
