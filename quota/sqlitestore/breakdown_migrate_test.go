package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// TestOpenMigratesToBreakdown: a file of the schema version before
// Breakdown and MarkCrossing (made here by taking this version's file back:
// its two tables dropped, user_version one lower) is upgraded on open,
// keeping what it holds.
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
	makeDB(t, path, `DROP TABLE usage_hours`, `DROP TABLE crossings`, fmt.Sprintf(`PRAGMA user_version = %d`, version-1))
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
	rows, err := st.Breakdown(ctx, &quota.BreakdownRequest{API: "api", Owner: r.Owner, Since: now.Add(-time.Hour), Now: now})
	if err != nil || len(rows) != 1 || rows[0].Units != 2 || rows[0].Method != "videos.list" || !rows[0].Hour.Equal(now.Add(-30*time.Minute)) {
		t.Fatalf("Breakdown after migration = %+v, %v", rows, err)
	}
	if first, err := st.MarkCrossing(ctx, &quota.CrossingMark{API: "api", Owner: "o", Budget: "units", Percent: 50, Until: now.Add(time.Hour), Now: now}); err != nil || !first {
		t.Fatalf("MarkCrossing after migration = %v, %v", first, err)
	}
}
