package sqlitestore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// TestLeasesOnOlderFile: a file made before the leases table existed (same
// schema version) gets the table when opened, and keeps its state.
func TestLeasesOnOlderFile(t *testing.T) {
	st, path := openTemp(t)
	ctx := context.Background()
	if err := st.SaveState(ctx, "jobs/checkpoint/x", []byte("c1")); err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DROP TABLE leases`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	st, err = sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := st.AcquireLease(ctx, &backend.StateLeaseRequest{Key: "jobs/checkpoint/x", Holder: "h:1", TTL: time.Minute})
	if err != nil || l.Token != 1 {
		t.Fatalf("AcquireLease on a file made before leases: %+v, %v", l, err)
	}
	if err := st.SaveStateFenced(ctx, "jobs/checkpoint/x", []byte("c2"), l.Token); err != nil {
		t.Fatal(err)
	}
	if v, err := st.LoadState(ctx, "jobs/checkpoint/x"); err != nil || string(v) != "c2" {
		t.Errorf("state %q, %v", v, err)
	}
}
