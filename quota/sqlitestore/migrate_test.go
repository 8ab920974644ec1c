package sqlitestore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// testdata/v1-before-owners.db was written by the code before owners
// existed (schema version 1, legacy fingerprints: HMAC with the public
// LegacyFingerprintKey), at 2026-03-02 09:00 UTC:
//
//	youtube/units  daily America/Los_Angeles, limit 10000
//	youtube/search sliding 24h, limit 100
//	AIzaSy-fixture-key-1 labelled yt-key-1: 700 units, then search.list
//	                     (1 unit + 1 search)
//	AIzaSy-fixture-key-2, no label: 42 units; search marked spent for 2h
var (
	fixtureT0   = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	fixtureKey1 = quota.Credential{Secret: "AIzaSy-fixture-key-1", Label: "yt-key-1"}
	fixtureKey2 = quota.Credential{Secret: "AIzaSy-fixture-key-2"}
)

func openFixture(t *testing.T) (*sqlitestore.Store, string) {
	t.Helper()
	b, err := os.ReadFile("testdata/v1-before-owners.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "quota.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatalf("open a version 1 store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

// TestMigrationBeforeOwners: a store written before owners existed opens
// (migrated in place), lists its credentials as their own owners, and
// meters on from the usage it holds: for a process that still derives the
// legacy fingerprint (WithFingerprintKey(LegacyFingerprintKey)) and for
// one on the default, slow derivation, which takes the legacy record over.
func TestMigrationBeforeOwners(t *testing.T) {
	ctx := context.Background()
	st, path := openFixture(t)
	var version int
	if err := rawDB(t, path).QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != 4 {
		t.Fatalf("user_version after open = %d, %v; want 4", version, err)
	}
	legacy1 := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), fixtureKey1.Secret)
	legacy2 := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), fixtureKey2.Secret)
	apis, err := st.List(ctx)
	if err != nil || len(apis) != 1 || len(apis[0].Credentials) != 2 {
		t.Fatalf("List = %+v, %v", apis, err)
	}
	for _, c := range apis[0].Credentials {
		if c.Owner != c.ID || (c.ID == legacy1) != (c.Label == "yt-key-1") {
			t.Fatalf("migrated credential %+v: want its own owner, yt-key-1 on %s", c, legacy1)
		}
	}

	clock := fixtureT0.Add(time.Hour)
	now := func() time.Time { return clock }
	old, err := quota.Load(ctx, st, "youtube", quota.WithClock(now), quota.WithFingerprintKey([]byte(quota.LegacyFingerprintKey)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := old.Take(ctx, fixtureKey1, quota.Units("units", 9))
	if err != nil || r.Usage[0].Used != 710 || r.Owner != legacy1 {
		t.Fatalf("legacy-fingerprint take: %+v, %v; want used 710 on account %s", r, err, legacy1)
	}
	if _, err := old.Take(ctx, fixtureKey2, quota.Units("search", 1)); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("search for key 2: %v; want the mark written before owners to hold", err)
	}

	// The default derivation: a new fingerprint, which takes the legacy
	// record's label and account, so usage continues.
	l, err := quota.Load(ctx, st, "youtube", quota.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	r, err = l.Take(ctx, fixtureKey1, quota.Units("units", 1))
	if err != nil || r.Usage[0].Used != 711 || r.Owner != legacy1 || r.Credential == legacy1 {
		t.Fatalf("default-derivation take: %+v, %v; want used 711 on account %s under a new fingerprint", r, err, legacy1)
	}
	r, err = l.Take(ctx, fixtureKey2, quota.Units("units", 8))
	if err != nil || r.Usage[0].Used != 50 || r.Owner != legacy2 {
		t.Fatalf("unlabelled key: %+v, %v; want used 50 on account %s", r, err, legacy2)
	}
	apis, _ = st.List(ctx)
	byID := map[string]quota.CredentialInfo{}
	for _, c := range apis[0].Credentials {
		byID[c.ID] = c
	}
	slow := quota.DefaultFingerprint(fixtureKey1.Secret)
	if c := byID[slow]; c.Label != "yt-key-1" || c.Owner != legacy1 {
		t.Fatalf("new fingerprint record %+v: want label yt-key-1, owner %s", c, legacy1)
	}
	if c := byID[legacy1]; c.Label != "" || c.Owner != legacy1 {
		t.Fatalf("legacy record %+v: want no label, same owner", c)
	}
	// A label-only process (quotactl take --label) finds the account too.
	r, err = l.Take(ctx, quota.Credential{Label: "yt-key-1"}, quota.Units("units", 1))
	if err != nil || r.Usage[0].Used != 712 {
		t.Fatalf("label take: %+v, %v; want 712", r, err)
	}
}

// TestMigrationDuplicateLabels: a store written before labels were unique
// may hold one label on two fingerprints (the bug that made the label
// unusable). Each secret still meters its own usage under that label; a
// label-only take says how to fix it; relabel by fingerprint fixes it.
func TestMigrationDuplicateLabels(t *testing.T) {
	ctx := context.Background()
	st, path := openFixture(t)
	legacy1 := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), fixtureKey1.Secret)
	legacy2 := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), fixtureKey2.Secret)
	if _, err := rawDB(t, path).Exec(`UPDATE creds SET label = 'yt-key-1' WHERE fp = ?`, legacy2); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return fixtureT0.Add(time.Hour) }
	l, err := quota.Load(ctx, st, "youtube", quota.WithClock(now), quota.WithFingerprintKey([]byte(quota.LegacyFingerprintKey)))
	if err != nil {
		t.Fatal(err)
	}
	dup2 := quota.Credential{Secret: fixtureKey2.Secret, Label: "yt-key-1"}
	if r, err := l.Take(ctx, fixtureKey1, quota.Units("units", 1)); err != nil || r.Usage[0].Used != 702 {
		t.Fatalf("key 1: %+v, %v; want 702", r, err)
	}
	if r, err := l.Take(ctx, dup2, quota.Units("units", 1)); err != nil || r.Usage[0].Used != 43 {
		t.Fatalf("key 2 under the duplicated label: %+v, %v; want 43", r, err)
	}
	_, err = l.Take(ctx, quota.Credential{Label: "yt-key-1"}, quota.Units("units", 1))
	if !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), "relabel") {
		t.Fatalf("label-only take on a duplicated label: %v; want ErrInvalid naming relabel", err)
	}
	if _, err := l.Relabel(ctx, legacy1, "yt-key-1"); !errors.Is(err, quota.ErrLabelTaken) {
		t.Fatalf("relabel onto the duplicated label: %v; want ErrLabelTaken", err)
	}
	if _, err := l.Relabel(ctx, legacy2, "yt-key-2"); err != nil {
		t.Fatalf("relabel key 2 by fingerprint: %v", err)
	}
	if r, err := l.Take(ctx, quota.Credential{Label: "yt-key-1"}, quota.Units("units", 1)); err != nil || r.Usage[0].Used != 703 {
		t.Fatalf("label-only take after the fix: %+v, %v; want 703", r, err)
	}
}

// TestMigrationBeforeUnits: a file written before budgets had units (no
// unit column) reads, read-only, with every budget in the default unit;
// opened for writing it gains the column in place, keeps its budgets
// (default unit) and records the units defined afterwards; an older build
// that redefines a budget (writing no unit) keeps the recorded unit.
func TestMigrationBeforeUnits(t *testing.T) {
	ctx := context.Background()
	_, path := openFixture(t) // version 1, migrated to 4 with the unit column
	db := rawDB(t, path)
	if _, err := db.Exec(`ALTER TABLE budgets DROP COLUMN unit`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	ro, err := sqlitestore.Open(path, sqlitestore.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	apis, err := ro.List(ctx)
	if err != nil || len(apis) != 1 || len(apis[0].Budgets) != 2 {
		t.Fatalf("read-only List of a file without units = %+v, %v", apis, err)
	}
	for _, b := range apis[0].Budgets {
		if b.Unit != "" || b.UnitOf() != quota.DefaultUnit {
			t.Errorf("budget %s read with unit %q", b.Name, b.Unit)
		}
	}

	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatalf("open a file without the unit column: %v", err)
	}
	defer st.Close()
	if err := st.DefineBudgets(ctx, "openai", []quota.Budget{{Name: "tokens", Limit: 30000, Window: quota.Sliding(time.Minute), Unit: "tokens"}}); err != nil {
		t.Fatal(err)
	}
	// An older build redefines it: its statement names no unit.
	if _, err := rawDB(t, path).Exec(`INSERT INTO budgets (api, name, "limit", "window") VALUES ('openai', 'tokens', 40000, 'sliding:1m0s')
		ON CONFLICT (api, name) DO UPDATE SET "limit" = excluded."limit", "window" = excluded."window"`); err != nil {
		t.Fatal(err)
	}
	apis, err = st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]quota.Budget{}
	for _, a := range apis {
		for _, b := range a.Budgets {
			got[a.Name+"/"+b.Name] = b
		}
	}
	if b := got["openai/tokens"]; b.Unit != "tokens" || b.Limit != 40000 {
		t.Errorf("openai/tokens = %+v; want unit tokens kept, limit 40000", b)
	}
	if b := got["youtube/units"]; b.Unit != "" || b.Limit != 10000 {
		t.Errorf("youtube/units = %+v; want the recorded budget, no unit", b)
	}
}
