package proxy_test

import (
	"testing"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
)

// TestMain sends a child process (testkit.Child) to its role, and stops
// the shared redis-server the Redis tests start.
func TestMain(m *testing.M) {
	testkit.RunChild(map[string]func(string) int{"proxy": runProxyChild})
	redistest.Main(m)
}
