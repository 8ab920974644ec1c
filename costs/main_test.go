package costs_test

import (
	"testing"

	"github.com/quotactl/quotactl/internal/redistest"
)

// TestMain stops the shared redis-server BenchmarkTransportRedis may start.
func TestMain(m *testing.M) { redistest.Main(m) }
