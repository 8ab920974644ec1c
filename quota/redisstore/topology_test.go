package redisstore_test

import (
	"testing"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/storetest"
)

// TestSentinel runs the conformance suite through a failover client that
// finds the master via Sentinel.
func TestSentinel(t *testing.T) {
	s := redistest.NewSentinel(t)
	c := s.Client(t)
	storetest.Run(t, func(t *testing.T) quota.Store {
		return redisstore.New(c, redisstore.WithPrefix(redistest.Prefix(t)))
	})
}
