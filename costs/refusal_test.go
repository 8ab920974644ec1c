package costs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/costs"
)

func TestRefusalAndCredentialFields(t *testing.T) {
	const base = "api: demo\nbudgets: [{name: units, limit: 10, window: daily:UTC}]\nmethods: {a: {routes: [GET /a], cost: {units: 1}}}\n"
	tb, err := costs.Parse("t.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if tb.Refusal() != costs.RefusalProblem || tb.Credential() != costs.CredentialBearer {
		t.Fatalf("defaults: refusal %q credential %q", tb.Refusal(), tb.Credential())
	}
	tb, err = costs.Parse("t.yaml", []byte("refusal: github\ncredential: x-goog-api-key\n"+base))
	if err != nil {
		t.Fatal(err)
	}
	if tb.Refusal() != costs.RefusalGitHub || tb.Credential() != costs.CredentialGoogleKey {
		t.Fatalf("refusal %q credential %q", tb.Refusal(), tb.Credential())
	}
	// WithHosts keeps them (the proxy rebinds the table to its upstream).
	moved, err := tb.WithHosts("127.0.0.1:9")
	if err != nil || moved.Refusal() != costs.RefusalGitHub || moved.Credential() != costs.CredentialGoogleKey {
		t.Fatalf("WithHosts: %v %q %q", err, moved.Refusal(), moved.Credential())
	}
	for _, c := range []struct{ head, want string }{
		{"refusal: teapot\n", `t.yaml:1: refusal: "teapot" is not one of problem, google, github`},
		{"credential: cookie\n", `t.yaml:1: credential: "cookie" is not one of bearer, key, x-goog-api-key`},
		{"refusal: [google]\n", "want a string"},
	} {
		_, err := costs.Parse("t.yaml", []byte(c.head+base))
		var se *costs.SpecError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want a SpecError containing %q", c.head, err, c.want)
		}
	}
	for _, name := range costs.Builtins() {
		yt, err := costs.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		refusal, cred := costs.RefusalProblem, costs.CredentialBearer
		switch {
		case strings.HasPrefix(name, "youtube"):
			refusal, cred = costs.RefusalGoogle, costs.CredentialKey
		case name == "github":
			refusal = costs.RefusalGitHub
		case name == "anthropic":
			cred = costs.CredentialAPIKey
		case name == "shopify-admin":
			cred = costs.CredentialShopify
		}
		if yt.Refusal() != refusal || yt.Credential() != cred {
			t.Errorf("%s: refusal %q credential %q, want %q and %q", name, yt.Refusal(), yt.Credential(), refusal, cred)
		}
	}
}
