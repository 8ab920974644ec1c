package costs

import (
	"slices"
	"strings"
)

// The refusal shapes a table may declare (Spec.Refusal).
const (
	RefusalProblem = "problem" // 429, Retry-After and an RFC 9457 problem document
	RefusalGoogle  = "google"  // Google APIs' 403 {"error":{... "reason":"quotaExceeded"}}
	RefusalGitHub  = "github"  // GitHub's 403 with x-ratelimit-remaining: 0
)

// The ways a credential may travel to an upstream (Spec.Credential).
const (
	CredentialBearer    = "bearer"                 // Authorization: Bearer SECRET
	CredentialKey       = "key"                    // the "key" query parameter
	CredentialGoogleKey = "x-goog-api-key"         // the X-Goog-Api-Key header
	CredentialAPIKey    = "x-api-key"              // the X-Api-Key header (Anthropic)
	CredentialShopify   = "x-shopify-access-token" // the X-Shopify-Access-Token header
)

// Refusals and CredentialForms list the values Spec.Refusal and
// Spec.Credential take, the default first.
var (
	Refusals        = []string{RefusalProblem, RefusalGoogle, RefusalGitHub}
	CredentialForms = []string{CredentialBearer, CredentialKey, CredentialGoogleKey, CredentialAPIKey, CredentialShopify}
)

// Refusal returns the shape a metering proxy answers a refused call in
// (Spec.Refusal): RefusalProblem unless the table names another.
func (t *Table) Refusal() string {
	if t.spec.Refusal == "" {
		return RefusalProblem
	}
	return t.spec.Refusal
}

// Credential returns how the upstream expects a credential (Spec.Credential):
// CredentialBearer unless the table names another.
func (t *Table) Credential() string {
	if t.spec.Credential == "" {
		return CredentialBearer
	}
	return t.spec.Credential
}

// checkEnum checks that v, when set, is one of values.
func checkEnum(field, v string, values []string) error {
	if v == "" || slices.Contains(values, v) {
		return nil
	}
	return specErrorf(field, "%q is not one of %s", v, strings.Join(values, ", "))
}
