package quota_test

import (
	"testing"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) quota.Store { return quota.NewMemoryStore() })
}
