package quota

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
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
	return `quota.Credential{Secret: "<redacted>", Label: "` + c.Label + `"}`
}

// LogValue implements slog.LogValuer so structured logs never hold the secret.
func (c Credential) LogValue() slog.Value { return slog.StringValue(c.String()) }

// MarshalText implements encoding.TextMarshaler with String, so a Credential
// inside a value encoded as JSON, YAML or XML (a config dump, a struct
// logged by slog's JSON handler, which does not call LogValue on nested
// fields) holds its label, never the secret. There is no UnmarshalText:
// decoding fills Secret and Label as fields.
func (c Credential) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// DefaultFingerprintKey is the HMAC key Fingerprint uses unless the limiter is
// given WithFingerprintKey. Every process that shares a store must use the
// same key to see the same credentials.
const DefaultFingerprintKey = "quotactl/fingerprint/v1"

// FingerprintLen is the length in hex digits of a credential fingerprint.
const FingerprintLen = 24

// Fingerprint returns the stored identity of secret: HMAC-SHA256 keyed with
// key, truncated to 96 bits, in hex. It cannot be reversed to the secret, and
// with a private key it cannot be confirmed by guessing either.
func Fingerprint(key []byte, secret string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(secret))
	var sum [sha256.Size]byte
	return hex.EncodeToString(m.Sum(sum[:0])[:FingerprintLen/2])
}
