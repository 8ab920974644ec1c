package bearer

import (
	"net/http"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		v, token string
		want     bool
	}{
		{"Bearer s3cret", "s3cret", true},
		{"bearer   s3cret  ", "s3cret", true},
		{"Bearer s3cre", "s3cret", false},
		{"Basic s3cret", "s3cret", false},
		{"Bearer", "s3cret", false},
		{"", "s3cret", false},
		{"Bearer ", "", false},
	} {
		h := http.Header{}
		if c.v != "" {
			h.Set("Proxy-Authorization", c.v)
		}
		if got := Check(h, "Proxy-Authorization", c.token); got != c.want {
			t.Errorf("Check(%q, %q) = %v, want %v", c.v, c.token, got, c.want)
		}
	}
	if !Equal("a", "a") || Equal("a", "ab") {
		t.Error("Equal")
	}
}
