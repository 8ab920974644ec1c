package quota_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// TestReadsNeverMoveACredential: Status and Entries of a credential named
// by its label with an owner other than the one recorded read that owner's
// usage, as for a secret with an owner, and write nothing: the credential
// stays with its owner (a read used to re-register it under the owner
// named, on every writable store).
func TestReadsNeverMoveACredential(t *testing.T) {
	ctx := context.Background()
	st := quota.NewMemoryStore()
	b := []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}}
	l, err := quota.New(st, "api", b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx, quota.Credential{Secret: "s-one", Label: "k1", Owner: "proj"}, quota.Units("units", 4)); err != nil {
		t.Fatal(err)
	}
	reader, err := quota.New(st, "api", b) // another process: nothing cached
	if err != nil {
		t.Fatal(err)
	}
	named := quota.Credential{Label: "k1", Owner: "other"}
	us, err := reader.Status(ctx, named)
	if err != nil || us[0].Used != 0 {
		t.Fatalf("Status of k1 under owner other = %+v, %v; want owner other's usage, 0", us, err)
	}
	if _, err := reader.Entries(ctx, named, "units"); err != nil {
		t.Fatalf("Entries: %v", err)
	}
	apis, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range apis[0].Credentials {
		if c.Label == "k1" && c.Account() != "proj" {
			t.Fatalf("after reads naming owner other, k1 belongs to %q, want proj (a read moved it)", c.Account())
		}
	}
	if us, err := reader.Status(ctx, quota.Credential{Label: "k1"}); err != nil || us[0].Used != 4 {
		t.Fatalf("Status of k1 = %+v, %v; want its owner's 4 units", us, err)
	}
}
