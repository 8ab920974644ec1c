package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// TestOpenMigratesToBreakdown: a file of the schema version before
// Breakdown and MarkCrossing (made here by taking this version's file back
// to version 2: its two tables and entries.held dropped) is upgraded on
// open, keeping what it holds.
func TestOpenMigratesToBreakdown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveState(context.Background(), "checkpoint", []byte("*")); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var version int
	if err := rawDB(t, path).QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	makeDB(t, path, `DROP TABLE usage_hours`, `DROP TABLE crossings`, `ALTER TABLE entries DROP COLUMN held`, `PRAGMA user_version = 2`)
	if st, err = sqlitestore.Open(path); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got int
	if err := rawDB(t, path).QueryRow(`PRAGMA user_version`).Scan(&got); err != nil || got != version {
		t.Fatalf("user_version = %d, %v; want %d", got, err, version)
	}
	ctx := context.Background()
	if v, err := st.LoadState(ctx, "checkpoint"); err != nil || string(v) != "*" {
		t.Fatalf("state after migration = %q, %v", v, err)
	}
	now := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Daily(time.UTC)}}, quota.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "k"}
	r, err := l.Take(ctx, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 2}})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.Breakdown(ctx, &backend.BreakdownRequest{API: "api", Owner: r.Owner, Since: now.Add(-time.Hour), Now: now})
	if err != nil || len(rows) != 1 || rows[0].Units != 2 || rows[0].Method != "videos.list" || !rows[0].Hour.Equal(now.Add(-30*time.Minute)) {
		t.Fatalf("Breakdown after migration = %+v, %v", rows, err)
	}
	if first, err := st.MarkCrossing(ctx, &backend.CrossingMark{API: "api", Owner: "o", Budget: "units", Percent: 50, Until: now.Add(time.Hour), Now: now}); err != nil || !first {
		t.Fatalf("MarkCrossing after migration = %v, %v", first, err)
	}
}

// TestOpenMigratesToHeldEntries: a version 3 file (before entries.held;
// made here by taking this version's file back) opens read-only as it is,
// and read-write is upgraded: the entries stamped past now, the blocks of
// leases still open under the old rule, are marked held, so an Adjust
// keeps them and replaces the rest.
func TestOpenMigratesToHeldEntries(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v3.db")
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	now := time.Now() // the host clock: the migration reads it
	for _, req := range []*backend.TakeRequest{
		{API: "api", Owner: "o", Nonce: "lease", Now: now, Hold: time.Minute, Debits: []backend.Debit{{Budget: b, Cost: 40}}},
		{API: "api", Owner: "o", Nonce: "plain", Now: now.Add(-time.Minute), Debits: []backend.Debit{{Budget: b, Cost: 5}}},
	} {
		if res, err := st.Take(ctx, req); err != nil || !res.OK {
			t.Fatalf("Take %s = %+v, %v", req.Nonce, res, err)
		}
	}
	st.Close()
	makeDB(t, path, `ALTER TABLE entries DROP COLUMN held`, `PRAGMA user_version = 3`)

	ro, err := sqlitestore.Open(path, sqlitestore.WithReadOnly())
	if err != nil {
		t.Fatalf("open a version 3 file read-only: %v", err)
	}
	us, err := ro.Usage(ctx, &backend.UsageRequest{API: "api", Owner: "o", Budgets: []quota.Budget{b}, Now: now})
	ro.Close()
	if err != nil || us[0].Used != 45 {
		t.Fatalf("read-only usage of a version 3 file = %+v, %v; want 45", us, err)
	}

	if st, err = sqlitestore.Open(path); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var version int
	if err := rawDB(t, path).QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != 4 {
		t.Fatalf("user_version = %d, %v; want 4", version, err)
	}
	if err := st.Adjust(ctx, &backend.AdjustRequest{API: "api", Owner: "o", Budget: b, Used: 7, Nonce: "adj", Now: now}); err != nil {
		t.Fatal(err)
	}
	es, err := st.Entries(ctx, &backend.EntriesRequest{API: "api", Owner: "o", Budget: b, Now: now})
	if err != nil || len(es) != 2 || es[0].Nonce != "adj" || es[0].Cost != 7 || es[1].Nonce != "lease" || es[1].Cost != 40 {
		t.Fatalf("entries after the adjust = %+v, %v; want adj (7) and the held lease block (40)", es, err)
	}
}
