package sqlitestore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/sqlitestore"
	"github.com/quotactl/quotactl/quota/storetest"
)

// TestChangesOnOlderFile: a file made before the changes table existed
// (same schema version 3, and the version 1 fixture) gets the table when
// opened for writing, keeps its state, and Adjust and Exhaust bump the
// owner's ChangeVersion there. A read-only open of a file without the table
// reads version 0 and writes nothing.
func TestChangesOnOlderFile(t *testing.T) {
	ctx := context.Background()
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	t.Run("v3", func(t *testing.T) {
		st, path := openTemp(t)
		if _, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: "o", Nonce: "n1", Debits: []backend.Debit{{Budget: b, Cost: 7}}}); err != nil {
			t.Fatal(err)
		}
		st.Close()
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`DROP TABLE changes`); err != nil {
			t.Fatal(err)
		}
		db.Close()

		ro, err := sqlitestore.Open(path, sqlitestore.WithReadOnly())
		if err != nil {
			t.Fatal(err)
		}
		if v, err := ro.ChangeVersion(ctx, "api", "o"); err != nil || v != 0 {
			t.Fatalf("read-only ChangeVersion without the table = %d, %v; want 0", v, err)
		}
		ro.Close()
		var n int
		if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'changes'`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("a read-only open created the changes table: %d, %v", n, err)
		}

		st, err = sqlitestore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		us, err := st.Usage(ctx, &backend.UsageRequest{API: "api", Owner: "o", Budgets: []quota.Budget{b}})
		if err != nil || us[0].Used != 7 {
			t.Fatalf("usage kept across the migration: %+v, %v; want 7", us, err)
		}
		checkBumps(t, st, b)
	})
	t.Run("v1", func(t *testing.T) {
		st, _ := openFixture(t)
		checkBumps(t, st, b)
	})
}

func checkBumps(t *testing.T, st *sqlitestore.Store, b quota.Budget) {
	t.Helper()
	ctx := context.Background()
	v0, err := st.ChangeVersion(ctx, "api", "o")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Adjust(ctx, &backend.AdjustRequest{API: "api", Owner: "o", Budget: b, Used: 3, Nonce: "a"}); err != nil {
		t.Fatal(err)
	}
	v1, err := st.ChangeVersion(ctx, "api", "o")
	if err != nil || v1 == v0 {
		t.Fatalf("ChangeVersion after Adjust = %d, %v; it was %d", v1, err, v0)
	}
	if err := st.Exhaust(ctx, &backend.ExhaustRequest{API: "api", Owner: "o", Budget: b, Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if v2, err := st.ChangeVersion(ctx, "api", "o"); err != nil || v2 == v1 || v2 == v0 {
		t.Fatalf("ChangeVersion after Exhaust = %d, %v; it was %d, then %d", v2, err, v0, v1)
	}
}

// TestLeasesSeeChanges: an Adjust or Exhaust made through another Store on
// the same file (what another process has) reaches an open lease within
// CheckEvery.
func TestLeasesSeeChanges(t *testing.T) {
	a, path := openTemp(t)
	b, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	storetest.LeasesSeeChanges(t, a, b)
}
