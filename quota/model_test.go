package quota_test

import (
	"fmt"
	"testing"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storetest"
)

// TestMatchesModel drives the MemoryStore through storetest's random runs
// and requires the answers of its reference model (storetest.MatchesModel;
// $QUOTA_MODEL_SEEDS and $QUOTA_MODEL_STEPS size the run).
func TestMatchesModel(t *testing.T) {
	seeds, steps := storetest.ModelSeeds(t, 14, 400)
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			storetest.MatchesModel(t, newMemoryStore, seed, steps)
		})
	}
}

func newMemoryStore(t *testing.T) quota.Store { return quota.NewMemoryStore() }
