package storeurl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

func TestOpenReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "quota.db")
	missing := filepath.Join(t.TempDir(), "none.db")
	if _, err := OpenReadOnly(ctx, SQLiteURL(missing)); !errors.Is(err, quota.ErrNotFound) {
		t.Fatalf("OpenReadOnly of a missing file: %v; want ErrNotFound", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("OpenReadOnly created the file")
	}
	st, err := Open(ctx, SQLiteURL(path))
	if err != nil {
		t.Fatal(err)
	}
	charge(t, st, "k", 3)
	st.Close()
	ro, err := OpenReadOnly(ctx, SQLiteURL(path)+"?busy_timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.DefineBudgets(ctx, "api", []quota.Budget{{Name: "x", Limit: 1, Window: quota.Sliding(time.Hour)}}); !errors.Is(err, sqlitestore.ErrReadOnly) {
		t.Fatalf("DefineBudgets on a read-only store: %v; want ErrReadOnly", err)
	}
	if err := ro.DeleteBudget(ctx, "api", "units"); !errors.Is(err, sqlitestore.ErrReadOnly) {
		t.Fatalf("DeleteBudget on a read-only store: %v; want ErrReadOnly", err)
	}
	apis, err := ro.List(ctx)
	if err != nil || len(apis) != 1 || len(apis[0].Budgets) != 1 {
		t.Fatalf("List: %v, %v", apis, err)
	}
	m, err := OpenReadOnly(ctx, "memory:")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.(*quota.MemoryStore); !ok {
		t.Fatalf("OpenReadOnly(memory:) = %T", m)
	}
}

func TestDefaultPathCreatesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, err := defaultPath(func(string) string { return dir }, nil)
	if err != nil || p != filepath.Join(dir, "quotactl", "quota.db") {
		t.Fatalf("defaultPath = %q, %v", p, err)
	}
	if _, err := os.Stat(filepath.Dir(p)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("defaultPath created the directory")
	}
}
