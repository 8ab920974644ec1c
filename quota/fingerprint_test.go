package quota_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// TestDefaultFingerprintIsSlowDerivation: the default fingerprint is the
// iterated-and-salted S2K over SHA-256 (RFC 4880 3.7.1.3): salt||secret
// repeated to FingerprintHashBytes bytes, hashed whole, so confirming one
// guess costs that much hashing; not the fast legacy HMAC; the same in every
// process (no per-process state).
func TestDefaultFingerprintIsSlowDerivation(t *testing.T) {
	const secret = "tok-731904"
	unit := "quotactl/fingerprint/v2\x00" + secret
	all := bytes.Repeat([]byte(unit), quota.FingerprintHashBytes/len(unit)+1)[:quota.FingerprintHashBytes]
	want := sha256.Sum256(all)
	fp := quota.DefaultFingerprint(secret)
	if fp != hex.EncodeToString(want[:quota.FingerprintLen/2]) || len(fp) != quota.FingerprintLen {
		t.Fatalf("DefaultFingerprint = %s, want the S2K derivation %x", fp, want[:quota.FingerprintLen/2])
	}
	if fp == quota.Fingerprint([]byte(quota.LegacyFingerprintKey), secret) {
		t.Fatal("the default fingerprint is the fast legacy one")
	}
	if quota.FingerprintHashBytes < 1<<24 {
		t.Fatalf("FingerprintHashBytes = %d: too cheap to guess against", quota.FingerprintHashBytes)
	}
	// Secrets that differ only at the end differ.
	long := strings.Repeat("k", 100)
	if quota.DefaultFingerprint(long) == quota.DefaultFingerprint(long+"x") {
		t.Fatal("secrets differing at the end share a fingerprint")
	}
	// A limiter without a key stores the slow fingerprint; with a key, the
	// fast keyed one.
	ctx := context.Background()
	b := []quota.Budget{{Name: "units", Limit: 5, Window: quota.Sliding(time.Hour)}}
	l, _ := quota.New(quota.NewMemoryStore(), "api", b)
	if r, err := l.Take(ctx, quota.Credential{Secret: secret}, quota.Units("units", 1)); err != nil || r.Credential != fp {
		t.Fatalf("default limiter stored %v, %v; want %s", r, err, fp)
	}
	lk, _ := quota.New(quota.NewMemoryStore(), "api", b, quota.WithFingerprintKey([]byte("private")))
	if r, err := lk.Take(ctx, quota.Credential{Secret: secret}, quota.Units("units", 1)); err != nil || r.Credential != quota.Fingerprint([]byte("private"), secret) {
		t.Fatalf("keyed limiter stored %v, %v", r, err)
	}
}

// TestLegacyFingerprintMigration: a credential metered under its legacy
// fingerprint (an older quotactl, or WithFingerprintKey(LegacyFingerprintKey))
// keeps its usage when a limiter on the default derivation first sees it:
// the new fingerprint takes the legacy record's label and account.
func TestLegacyFingerprintMigration(t *testing.T) {
	ctx := context.Background()
	st := quota.NewMemoryStore()
	b := []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}}
	key := quota.Credential{Secret: "tok-731904", Label: "yt-key-1"}
	legacy, _ := quota.New(st, "api", b, quota.WithFingerprintKey([]byte(quota.LegacyFingerprintKey)))
	r, err := legacy.Take(ctx, key, quota.Units("units", 7))
	if err != nil {
		t.Fatal(err)
	}
	oldFP := r.Credential
	l, _ := quota.New(st, "api", b)
	r, err = l.Take(ctx, key, quota.Units("units", 2))
	if err != nil || r.Usage[0].Used != 9 || r.Owner != oldFP || r.Credential != quota.DefaultFingerprint(key.Secret) {
		t.Fatalf("after the switch: %+v, %v; want used 9 on account %s", r, err, oldFP)
	}
	// Unlabelled credentials migrate too.
	anon := quota.Credential{Secret: "tok-000001"}
	if _, err := legacy.Take(ctx, anon, quota.Units("units", 3)); err != nil {
		t.Fatal(err)
	}
	if r, err := l.Take(ctx, anon, quota.Units("units", 1)); err != nil || r.Usage[0].Used != 4 {
		t.Fatalf("unlabelled: %+v, %v; want used 4", r, err)
	}
	// Both processes keep metering one account.
	if _, err := legacy.Take(ctx, key, quota.Units("units", 2)); !errorsIsExhausted(err) {
		t.Fatalf("legacy process over the shared account: %v, want exhausted (used 9 + 2 > 10)", err)
	}
}

// BenchmarkGuessFingerprint is the cost of confirming one guess against a
// stored fingerprint: the default derivation against the legacy fast HMAC
// with the public key. Each iteration derives a secret not seen before, so
// the per-process cache never answers.
//
//	go test ./quota -run '^$' -bench GuessFingerprint -benchtime 20x
func BenchmarkGuessFingerprint(b *testing.B) {
	b.Run("default", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			_ = quota.DefaultFingerprint("tok-" + strconv.Itoa(i)) // a new secret: never cached
		}
	})
	b.Run("legacy-public-key", func(b *testing.B) {
		key := []byte(quota.LegacyFingerprintKey)
		i := 0
		for b.Loop() {
			i++
			_ = quota.Fingerprint(key, "tok-"+strconv.Itoa(i))
		}
	})
}

func errorsIsExhausted(err error) bool { return errors.Is(err, quota.ErrExhausted) }

// TestLegacyMigrationWithOwner: naming an owner while upgrading does not
// collide with the legacy record's label: the new fingerprint takes the
// label under the named owner.
func TestLegacyMigrationWithOwner(t *testing.T) {
	ctx := context.Background()
	st := quota.NewMemoryStore()
	b := []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}}
	key := quota.Credential{Secret: "tok-424242", Label: "yt-key-1"}
	legacy, _ := quota.New(st, "api", b, quota.WithFingerprintKey([]byte(quota.LegacyFingerprintKey)))
	if _, err := legacy.Take(ctx, key, quota.Units("units", 3)); err != nil {
		t.Fatal(err)
	}
	l, _ := quota.New(st, "api", b, quota.WithOwner("my-project"))
	r, err := l.Take(ctx, key, quota.Units("units", 1))
	if err != nil || r.Owner != "my-project" || r.Usage[0].Used != 1 {
		t.Fatalf("take with an owner after the upgrade: %+v, %v; want used 1 on my-project", r, err)
	}
	if r, err := l.Take(ctx, quota.Credential{Label: "yt-key-1"}, quota.Units("units", 1)); err != nil || r.Owner != "my-project" {
		t.Fatalf("the label now names the new fingerprint under my-project: %+v, %v", r, err)
	}
}
