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

// TestBackendDependencies: the store contract imports the standard library
// only, and the stores implement it without importing quota (as
// database/sql drivers import database/sql/driver, not database/sql).
func TestBackendDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/quotactl/quotactl/quota/backend").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, ".") && dep != "github.com/quotactl/quotactl/quota/backend" {
			t.Errorf("quota/backend depends on %s", dep)
		}
	}
	for _, store := range []string{"redisstore", "sqlitestore"} {
		out, err := exec.Command("go", "list", "-deps", "github.com/quotactl/quotactl/quota/"+store).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps: %v\n%s", err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == "github.com/quotactl/quotactl/quota" {
				t.Errorf("quota/%s imports quota: a store imports quota/backend only", store)
			}
		}
	}
}
