// Package bearer checks the access token quotactl's servers (serve's
// dashboard, the metering proxy) require of clients beyond loopback: one
// comparison in constant time, one reading of a "Bearer TOKEN" header.
package bearer

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Equal compares two secrets in constant time, whatever their lengths.
func Equal(a, b string) bool {
	x, y := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(x[:], y[:]) == 1
}

// Check reports whether header (e.g. "Authorization") of h holds
// "Bearer TOKEN" with token, the scheme compared ignoring case and the
// token without surrounding spaces. An empty token never matches.
func Check(h http.Header, header, token string) bool {
	auth := h.Get(header)
	scheme, tok, ok := strings.Cut(auth, " ")
	return ok && token != "" && strings.EqualFold(scheme, "Bearer") && Equal(strings.TrimSpace(tok), token)
}

// KeyHeaders are the request headers upstreams read an API key from, as
// is (not "Bearer KEY"): Google's X-Goog-Api-Key, Anthropic's X-Api-Key,
// Shopify's X-Shopify-Access-Token. A quota.Transport meters the key one
// carries and strips them from a redirect to another host; the metering
// proxy refuses a foreign one.
var KeyHeaders = []string{"X-Goog-Api-Key", "X-Api-Key", "X-Shopify-Access-Token"}

// IsKeyHeader reports whether name is one of KeyHeaders, ignoring case (a
// header set by index is not canonical, and reaches the upstream all the
// same).
func IsKeyHeader(name string) bool {
	for _, h := range KeyHeaders {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}
