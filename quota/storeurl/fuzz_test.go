package storeurl

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/quotactl/quotactl/quota"
)

// FuzzParse checks, for any input, that Parse does not panic; that an error
// is a one-line *Error wrapping quota.ErrInvalid that does not show the
// password; and that a parsed URL prints (String) without its password and
// reads back to the same spec. The seed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		pw := userinfoPassword(raw)
		s, err := Parse(raw)
		if err != nil {
			var ue *Error
			if !errors.As(err, &ue) || !errors.Is(err, quota.ErrInvalid) {
				t.Fatalf("Parse(%q): error %T %v is not an *Error wrapping ErrInvalid", raw, err, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("Parse(%q): error has several lines: %q", raw, err)
			}
			// (Unprintable bytes are quoted as \xNN escapes, whose hex
			// digits could spell a password made of digits by chance.)
			if secret(pw) && printable(raw) && strings.Contains(err.Error(), pw) {
				t.Fatalf("Parse(%q): error shows the password %q: %v", raw, pw, err)
			}
			return
		}
		shown := s.String()
		if secret(s.password) {
			public := *s
			public.password = ""
			if !strings.Contains(public.format(false), s.password) && strings.Contains(shown, s.password) {
				t.Fatalf("Parse(%q).String() = %q shows the password", raw, shown)
			}
		}
		if _, err := Parse(shown); err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", raw, shown, err)
		}
		full := s.format(false)
		again, err := Parse(full)
		if err != nil {
			t.Fatalf("Parse(%q) -> %q does not parse: %v", raw, full, err)
		}
		if got := again.format(false); got != full {
			t.Fatalf("Parse(%q): round trip %q -> %q", raw, full, got)
		}
		if again.Kind != s.Kind || again.Path != s.Path || again.DB != s.DB || again.Master != s.Master ||
			again.Username != s.Username || again.password != s.password || again.Prefix != s.Prefix ||
			strings.Join(again.Addrs, ",") != strings.Join(s.Addrs, ",") {
			t.Fatalf("Parse(%q): round trip changed the spec: %+v -> %+v", raw, *s, *again)
		}
	})
}

// userinfoPassword returns what a reader would take for the password in
// raw: between the first ":" after "//" and the last "@"; or, when raw has
// no "//" (redis:/:PASSWORD@HOST, redis:USER:PASSWORD@HOST), between the
// first ":" after the scheme's and the last "@".
func userinfoPassword(raw string) string {
	i := strings.Index(raw, "//")
	if i < 0 {
		scheme, rest, ok := strings.Cut(raw, ":")
		if !ok || !validScheme(scheme) {
			return ""
		}
		at := strings.LastIndexByte(rest, '@')
		if at < 0 {
			return ""
		}
		_, pw, _ := strings.Cut(rest[:at], ":")
		return pw
	}
	rest := raw[i+2:]
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(rest[:at], ":")
	return pw
}

// secret reports whether pw is worth checking for: long enough not to occur
// by chance, and not made of the redaction mark's letters.
func secret(pw string) bool {
	return len(pw) >= 6 && strings.Trim(pw, "x") != ""
}

func printable(s string) bool {
	return utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
}
