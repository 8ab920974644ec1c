package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/storetest"
)

// TestMatchesModel drives the Redis store through storetest's random runs
// and requires the answers of its reference model (storetest.MatchesModel;
// $QUOTA_MODEL_SEEDS and $QUOTA_MODEL_STEPS size the run): on the shared
// Redis (a real server unless none is available), each run under a prefix
// of its own, and on miniredis with its clock moving along with the run's,
// so that keys expire when their lifetimes say. A real server counts key
// lifetimes down on its own clock, which the run cannot stop: there the
// run's clock keeps clear of the moments just before an expiry or a reset
// (storetest.ServerClock); miniredis takes them.
func TestMatchesModel(t *testing.T) {
	seeds, steps := storetest.ModelSeeds(t, 6, 250)
	t.Run("redis", func(t *testing.T) {
		c := redistest.Client(t)
		for _, seed := range seeds {
			t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
				// one prefix swept at the end, a key space of its own
				// for each run (shrinking replays runs)
				prefix, runs := redistest.Prefix(t), 0
				var first *redisstore.Store
				newStore := func(t *testing.T) quota.Store {
					runs++
					st := redisstore.New(c, redisstore.WithPrefix(fmt.Sprintf("%s%d:", prefix, runs)))
					if first == nil {
						first = st
					}
					return st
				}
				storetest.MatchesModel(t, newStore, seed, steps, storetest.ServerClock(ServerClockMargin))
				t.Logf("batch.lua decided %d of the run's decisions", redisstore.Batched(first))
			})
		}
	})
	t.Run("miniredis", func(t *testing.T) {
		for _, seed := range seeds {
			t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { storetest.MatchesModelMoving(t, newMovingMini, seed, steps) })
		}
	})
}

// ServerClockMargin is how long before an expiry or a reset the run's clock
// never stands on a real Redis (storetest.ServerClock): far more than the
// server's time a run spends at one instant of its own clock.
const ServerClockMargin = 10 * time.Second

// newMovingMini returns a store on a new miniredis and the function that
// moves its clock with the run's: SetTime, for TIME, and FastForward, which
// expires keys, only past the latest instant the run reached (after the
// run's clock steps back, keys set since expire no earlier than their
// lifetimes say; a key set before lives as long as it would have).
func newMovingMini(t *testing.T) (quota.Store, func(time.Time)) {
	m := redistest.Mini(t)
	var high time.Time
	move := func(now time.Time) {
		if !high.IsZero() && now.After(high) {
			m.FastForward(now.Sub(high))
		}
		if high.IsZero() || now.After(high) {
			high = now
		}
		m.SetTime(now)
	}
	return redisstore.New(redistest.MiniClient(t, m)), move
}
