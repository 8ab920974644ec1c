package sqlitestore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/quotactl/quotactl/quota/sqlitestore"
	"github.com/quotactl/quotactl/quota/storetest"
)

// FuzzLimiterSQLite is quota's FuzzLimiter on the SQLite store: the
// program the input encodes (storetest.Program), charges of up to 12
// budgets of mixed windows included. A fuzzing process keeps one database
// file (a new one every storeRuns runs, so the file stays small), and
// gives each run an API of its own. The corpus is in
// testdata/fuzz/FuzzLimiterSQLite.
func FuzzLimiterSQLite(f *testing.F) {
	for _, seed := range storetest.ProgramSeeds {
		f.Add(seed)
	}
	const storeRuns = 2000
	dir := f.TempDir()
	var (
		st   *sqlitestore.Store
		path string
		runs int
	)
	f.Cleanup(func() {
		if st != nil {
			_ = st.Close()
		}
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		if st == nil || runs%storeRuns == 0 {
			if st != nil {
				_ = st.Close()
				for _, suffix := range []string{"", "-wal", "-shm"} {
					_ = os.Remove(path + suffix)
				}
			}
			path = filepath.Join(dir, fmt.Sprintf("quota-%d.db", runs))
			var err error
			if st, err = sqlitestore.Open(path); err != nil {
				t.Fatalf("Open(%s): %v", path, err)
			}
		}
		runs++
		storetest.Program(t, st, fmt.Sprintf("fuzz%d", runs), data)
	})
}
