package redisstore_test

import (
	"os"
	"testing"

	"github.com/quotactl/quotactl/internal/redistest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	redistest.Main(m)
}
