package sqlitestore_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
	"github.com/quotactl/quotactl/quota/storetest"
)

// TestMatchesModel drives the SQLite store, on a real file, through
// storetest's random runs and requires the answers of its reference model
// (storetest.MatchesModel; $QUOTA_MODEL_SEEDS and $QUOTA_MODEL_STEPS size
// the run).
func TestMatchesModel(t *testing.T) {
	seeds, steps := storetest.ModelSeeds(t, 7, 250)
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			storetest.MatchesModel(t, newModelStore, seed, steps)
		})
	}
}

// newModelStore opens a store on a new file: shrinking a mismatch replays
// runs on fresh stores.
func newModelStore(t *testing.T) quota.Store {
	path := filepath.Join(t.TempDir(), "quota.db")
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return st
}
