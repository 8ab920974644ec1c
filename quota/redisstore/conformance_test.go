package redisstore_test

import (
	"testing"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/storetest"
)

// TestConformance runs the storetest suite on the shared Redis (a real
// server unless none is available; CI requires one).
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) quota.Store {
		return redisstore.New(redistest.Client(t), redisstore.WithPrefix(redistest.Prefix(t)))
	})
}

// TestConformanceMiniredis runs the suite on an in-process miniredis.
func TestConformanceMiniredis(t *testing.T) {
	storetest.Run(t, func(t *testing.T) quota.Store {
		return redisstore.New(redistest.MiniClient(t, redistest.Mini(t)))
	})
}

// TestConcurrentOverrides: operator overrides set and removed at once
// through two clients, as two processes would, all take effect.
func TestConcurrentOverrides(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		p := redistest.Prefix(t)
		storetest.ConcurrentOverrides(t, []quota.Store{
			redisstore.New(redistest.Client(t), redisstore.WithPrefix(p)),
			redisstore.New(redistest.Client(t), redisstore.WithPrefix(p)),
		})
	})
	t.Run("miniredis", func(t *testing.T) {
		m := redistest.Mini(t)
		storetest.ConcurrentOverrides(t, []quota.Store{
			redisstore.New(redistest.MiniClient(t, m)),
			redisstore.New(redistest.MiniClient(t, m)),
		})
	})
}

// TestLeasesSeeChanges: an Adjust or Exhaust made through another client
// (what another process has) reaches an open lease within CheckEvery.
func TestLeasesSeeChanges(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		p := redistest.Prefix(t)
		storetest.LeasesSeeChanges(t,
			redisstore.New(redistest.Client(t), redisstore.WithPrefix(p)),
			redisstore.New(redistest.Client(t), redisstore.WithPrefix(p)))
	})
	t.Run("miniredis", func(t *testing.T) {
		m := redistest.Mini(t)
		storetest.LeasesSeeChanges(t, redisstore.New(redistest.MiniClient(t, m)), redisstore.New(redistest.MiniClient(t, m)))
	})
}

// TestSharedOwnerLimits: limits per owner recorded through one client
// decide through a limiter on another client of the same Redis
// (storetest.SharedOwnerLimits).
func TestSharedOwnerLimits(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		p := redistest.Prefix(t)
		storetest.SharedOwnerLimits(t,
			redisstore.New(redistest.Client(t), redisstore.WithPrefix(p)),
			redisstore.New(redistest.Client(t), redisstore.WithPrefix(p)))
	})
	t.Run("miniredis", func(t *testing.T) {
		m := redistest.Mini(t)
		storetest.SharedOwnerLimits(t, redisstore.New(redistest.MiniClient(t, m)), redisstore.New(redistest.MiniClient(t, m)))
	})
}
