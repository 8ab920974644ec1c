package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
	"github.com/quotactl/quotactl/quota/storetest"
)

// openTemp opens a fresh store on a real file in t.TempDir and closes it at
// the end of the test.
func openTemp(t testing.TB, opts ...sqlitestore.Option) (*sqlitestore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "quota.db")
	st, err := sqlitestore.Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, path
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) quota.Store {
		st, _ := openTemp(t)
		return st
	})
}

// TestConcurrentOverrides: operator overrides set and removed at once
// through two stores on one file, as two processes would, all take effect.
func TestConcurrentOverrides(t *testing.T) {
	a, path := openTemp(t)
	b, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	storetest.ConcurrentOverrides(t, []quota.Store{a, b})
}

// TestSharedOwnerLimits: limits per owner recorded through one store on a
// file decide through a limiter on another store on the same file, as in
// another process (storetest.SharedOwnerLimits).
func TestSharedOwnerLimits(t *testing.T) {
	a, path := openTemp(t)
	b, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	storetest.SharedOwnerLimits(t, a, b)
}
