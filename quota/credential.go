package quota

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
)

// Credential is the upstream key or token a request is billed to. The
// Secret never leaves the process: stores see only its Fingerprint, and the
// Label the caller gives. String, GoString and LogValue print the label (or
// the fingerprint), never the secret, so a Credential is safe in logs.
//
// A Credential with an empty Secret and a Label refers to a credential the
// store already knows by that label (as the CLI's take --label does).
type Credential struct {
	Secret string // the raw API key or token; never stored, logged or returned in errors
	Label  string // optional human name, such as "yt-key-1"; stored as given
	// Owner names the upstream's unit of billing the credential belongs to
	// (a Google Cloud project for YouTube): budgets are kept per owner, so
	// every credential of one owner shares its quota. Empty: the credential
	// is its own owner. Owner names follow the rules of API names.
	Owner string
}

// String returns the label, or "credential" when there is none. It never
// contains the secret.
func (c Credential) String() string {
	if c.Label != "" {
		return c.Label
	}
	return "credential(unlabelled)"
}

// GoString implements fmt.GoStringer so %#v does not print the secret.
func (c Credential) GoString() string {
	return `quota.Credential{Secret: "<redacted>", Label: "` + c.Label + `", Owner: "` + c.Owner + `"}`
}

// LogValue implements slog.LogValuer so structured logs never hold the secret.
func (c Credential) LogValue() slog.Value { return slog.StringValue(c.String()) }

// MarshalText implements encoding.TextMarshaler with String, so a Credential
// inside a value encoded as JSON, YAML or XML (a config dump, a struct
// logged by slog's JSON handler, which does not call LogValue on nested
// fields) holds its label, never the secret. There is no UnmarshalText:
// decoding fills Secret and Label as fields.
func (c Credential) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// LegacyFingerprintKey is the HMAC key of the legacy fingerprint
// derivation (Fingerprint with this public key), used before quotactl
// derived fingerprints slowly. A limiter without WithFingerprintKey uses
// DefaultFingerprint, and migrates a credential recorded under its legacy
// fingerprint on first sight.
const LegacyFingerprintKey = "quotactl/fingerprint/v1"

// DefaultFingerprintKey is LegacyFingerprintKey's former name.
//
// Deprecated: use LegacyFingerprintKey; the default derivation is
// DefaultFingerprint, which takes no key.
const DefaultFingerprintKey = LegacyFingerprintKey

// FingerprintLen is the length in hex digits of a credential fingerprint.
const FingerprintLen = 24

// Fingerprint returns the stored identity of secret: HMAC-SHA256 keyed with
// key, truncated to 96 bits, in hex. It cannot be reversed to the secret, and
// with a private key it cannot be confirmed by guessing either. It is fast:
// with a public key a short token falls to guessing, which is why a limiter
// without a private key (WithFingerprintKey) uses DefaultFingerprint.
func Fingerprint(key []byte, secret string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(secret))
	var sum [sha256.Size]byte
	return hex.EncodeToString(m.Sum(sum[:0])[:FingerprintLen/2])
}

// FingerprintHashBytes is how many bytes DefaultFingerprint hashes per
// secret: 16 MiB, 262,144 SHA-256 compressions, so that confirming one guess
// against a stored fingerprint costs that much (about 30 ms of one core; a
// million-token search takes hours instead of one second).
const FingerprintHashBytes = 1 << 24

// fingerprintSalt is DefaultFingerprint's salt. It is public and fixed, so
// that every process sharing a store derives the same fingerprints with no
// configuration.
const fingerprintSalt = "quotactl/fingerprint/v2\x00"

// DefaultFingerprint returns the stored identity of secret when no key is
// configured: a deliberately slow salted hash (OpenPGP iterated S2K over
// SHA-256 of FingerprintHashBytes bytes, 96 bits in hex), cached per process.
// For short or patterned tokens, give every process a private key with
// WithFingerprintKey.
func DefaultFingerprint(secret string) string {
	slowMu.Lock()
	fp, ok := slowCache[secret]
	slowMu.Unlock()
	if ok {
		return fp
	}
	sum := s2k(fingerprintSalt+secret, FingerprintHashBytes)
	fp = hex.EncodeToString(sum[:FingerprintLen/2])
	slowMu.Lock()
	if len(slowCache) >= slowCacheMax {
		clear(slowCache)
	}
	slowCache[secret] = fp
	slowMu.Unlock()
	return fp
}

// s2k hashes unit repeated to count bytes (all of unit when it is longer),
// as OpenPGP's iterated-and-salted S2K does.
func s2k(unit string, count int) [sha256.Size]byte {
	h := sha256.New()
	count = max(count, len(unit))
	per := max(1, (64<<10)/len(unit))
	chunk := []byte(strings.Repeat(unit, per))
	for count >= len(chunk) {
		h.Write(chunk)
		count -= len(chunk)
	}
	h.Write(chunk[:count])
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

const slowCacheMax = 4096

var (
	slowMu    sync.Mutex
	slowCache = make(map[string]string)
)
