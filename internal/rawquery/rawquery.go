// Package rawquery reads the parameters of a raw URL query without parsing
// all of it, naming them as net/url.ParseQuery does: an escaped name or
// value ("%6Bey", "a+b") is unescaped before it is compared or returned, so
// every reader of a request's query (pricing, the credential it carries,
// what a redirect must drop) sees the parameters the upstream sees.
package rawquery

import (
	"net/url"
	"strings"
)

// Lookup returns the first value of name in the raw query raw, unescaped,
// and whether name is there at all.
func Lookup(raw, name string) (string, bool) {
	for k, v := range pairs(raw) {
		if k == name {
			return v, true
		}
	}
	return "", false
}

// HasValue reports whether name has a non-empty value anywhere in raw
// (?key=&key=K has one).
func HasValue(raw, name string) bool {
	for k, v := range pairs(raw) {
		if k == name && v != "" {
			return true
		}
	}
	return false
}

// pairs yields each name and value of raw, unescaped; one that does not
// unescape is yielded as it is.
func pairs(raw string) func(yield func(k, v string) bool) {
	return func(yield func(k, v string) bool) {
		for raw != "" {
			var kv string
			kv, raw, _ = strings.Cut(raw, "&")
			k, v, _ := strings.Cut(kv, "=")
			if !yield(unescape(k), unescape(v)) {
				return
			}
		}
	}
}

func unescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}
