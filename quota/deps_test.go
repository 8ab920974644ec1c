package quota_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreDependencies: importing quota pulls in no backend or adapter
// dependency; they live in their own packages.
func TestCoreDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/quotactl/quotactl/quota").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/redis/", "modernc.org/", "github.com/prometheus/", "go.opentelemetry.io/", "github.com/alicebob/"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("quota depends on %s", dep)
			}
		}
	}
}
