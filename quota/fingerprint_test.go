package quota_test

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// TestDefaultFingerprintIsSlowDerivation: the default fingerprint is
// PBKDF2-HMAC-SHA256 over FingerprintIterations (so confirming one guess
// costs that many HMACs), not the fast legacy HMAC, and is the same in every
// process (no per-process state).
func TestDefaultFingerprintIsSlowDerivation(t *testing.T) {
	const secret = "tok-731904"
	k, err := pbkdf2.Key(sha256.New, secret, []byte("quotactl/fingerprint/v2"), quota.FingerprintIterations, quota.FingerprintLen/2)
	if err != nil {
		t.Fatal(err)
	}
	fp := quota.DefaultFingerprint(secret)
	if fp != hex.EncodeToString(k) || len(fp) != quota.FingerprintLen {
		t.Fatalf("DefaultFingerprint = %s, want the PBKDF2 derivation %x", fp, k)
	}
	if fp == quota.Fingerprint([]byte(quota.DefaultFingerprintKey), secret) {
		t.Fatal("the default fingerprint is the fast legacy one")
	}
	if quota.FingerprintIterations < 100_000 {
		t.Fatalf("FingerprintIterations = %d: too cheap to guess against", quota.FingerprintIterations)
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
// fingerprint (an older quotactl, or WithFingerprintKey(DefaultFingerprintKey))
// keeps its usage when a limiter on the default derivation first sees it:
// the new fingerprint takes the legacy record's label and account.
func TestLegacyFingerprintMigration(t *testing.T) {
	ctx := context.Background()
	st := quota.NewMemoryStore()
	b := []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}}
	key := quota.Credential{Secret: "tok-731904", Label: "yt-key-1"}
	legacy, _ := quota.New(st, "api", b, quota.WithFingerprintKey([]byte(quota.DefaultFingerprintKey)))
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
		key := []byte(quota.DefaultFingerprintKey)
		i := 0
		for b.Loop() {
			i++
			_ = quota.Fingerprint(key, "tok-"+strconv.Itoa(i))
		}
	})
}

func errorsIsExhausted(err error) bool { return errors.Is(err, quota.ErrExhausted) }
