package redisstore_test

import (
	"testing"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.RunChild(map[string]func(string) int{"hammer": hammerChild})
	redistest.Main(m)
}
