package quota

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/quotactl/quotactl/internal/bearer"
	"github.com/quotactl/quotactl/internal/rawquery"
	"github.com/quotactl/quotactl/quota/backend"
)

// foreign sends a request to a host the Pricer does not price (cause wraps
// ErrForeignHost): no call of the API, so nothing is taken; but only when
// it carries no credential this Transport meters, which must not reach a
// host the cost table does not name.
func (t *Transport) foreign(req *http.Request, cause error) (*http.Response, error) {
	if what := t.carried(req); what != "" {
		closeBody(req)
		err := fmt.Errorf("quota: transport: %s %s%s: not sent: it carries %s, a credential this transport meters for API %s, to a host the pricer does not price: %w",
			req.Method, req.URL.Host, req.URL.EscapedPath(), what, t.limiter.api, cause)
		if t.cred != nil {
			err = scrubbed(err, t.cred.Secret)
		}
		return nil, err
	}
	return t.base.RoundTrip(req)
}

// carried names the credential req carries that this Transport meters, as
// credentialOf reads it (every value of the headers, not only the first),
// or the WithCredential secret anywhere in its URL or headers; "" when it
// carries none.
func (t *Transport) carried(req *http.Request) string {
	// Every key parameter, its name escaped or not (?key=&key=K and
	// ?%6Bey=K reach an upstream as a key all the same); and the headers
	// by name ignoring case (one set by index is not canonical).
	if rawquery.HasValue(req.URL.RawQuery, "key") {
		return "a key parameter"
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			switch {
			case v == "":
			case bearer.IsKeyHeader(k):
				return "an " + http.CanonicalHeaderKey(k) + " header"
			case strings.EqualFold(k, "Authorization") && len(v) > 7 && strings.EqualFold(v[:7], "bearer ") && strings.TrimSpace(v[7:]) != "":
				return "a Bearer token"
			}
		}
	}
	if t.cred != nil && t.cred.Secret != "" {
		if t.holdsSecret(req.URL.String()) {
			return "the WithCredential secret in its URL"
		}
		for _, vs := range req.Header {
			for _, v := range vs {
				if t.holdsSecret(v) {
					return "the WithCredential secret in a header"
				}
			}
		}
	}
	return ""
}

// holdsSecret reports whether s holds the WithCredential secret, as is or
// escaped for a query or a path; false with no such secret.
func (t *Transport) holdsSecret(s string) bool {
	if t.cred == nil || t.cred.Secret == "" {
		return false
	}
	secret := t.cred.Secret
	return strings.Contains(s, secret) || strings.Contains(s, url.QueryEscape(secret)) || strings.Contains(s, url.PathEscape(secret))
}

// redirect sends a request http.Client made to follow a redirect: part of a
// logical call whose first request was charged, so it is not charged again.
// When it leaves the first request's host, or when that host cannot be
// found, it carries no credential.
func (t *Transport) redirect(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		return t.base.RoundTrip(req) // nothing to send to: the base says so
	}
	if first := origin(req); first != nil && strings.EqualFold(first.Host, req.URL.Host) && first.Scheme == req.URL.Scheme {
		return t.base.RoundTrip(req)
	}
	out := req.Clone(req.Context())
	for k, vs := range out.Header {
		// Header keys compared ignoring case: a header set by index
		// (req.Header["x-goog-api-key"]) is not canonical, and http.Client
		// copies it to every hop as it is; the upstream reads it all the same.
		if bearer.IsKeyHeader(k) || strings.EqualFold(k, "Authorization") {
			delete(out.Header, k)
			continue
		}
		// The WithCredential secret, whatever header carries it (one the
		// caller chose, a cookie): carried would refuse it to this host.
		for _, v := range vs {
			if t.holdsSecret(v) {
				delete(out.Header, k)
				break
			}
		}
	}
	if _, ok := rawquery.Lookup(out.URL.RawQuery, "key"); ok {
		q := out.URL.Query()
		q.Del("key")
		out.URL.RawQuery = q.Encode()
	}
	if t.holdsSecret(out.URL.String()) {
		closeBody(out)
		return nil, fmt.Errorf("quota: transport: redirect to %s: not sent: its URL carries the WithCredential secret, to a host the request did not name: %w",
			out.URL.Host, ErrForeignHost)
	}
	return t.base.RoundTrip(out)
}

// maxRedirectHops bounds the walk back along a redirect chain (http.Client
// stops after 10 redirects unless CheckRedirect says otherwise).
const maxRedirectHops = 1000

// origin returns the URL of the first request of the redirect chain req
// belongs to: the request whose response led, hop by hop, to req. It is
// nil when the chain is broken (a Response without its Request, which a
// RoundTripper wrapping this Transport may return), so that the caller
// fails safe and strips the credential.
func origin(req *http.Request) *url.URL {
	r := req
	for hops := 0; r.Response != nil; hops++ {
		if r.Response.Request == nil || hops >= maxRedirectHops {
			return nil
		}
		r = r.Response.Request
	}
	return r.URL
}

// credential finds the credential req is billed to and names its owner.
func (t *Transport) credential(req *http.Request) (Credential, error) {
	c, err := t.credentialOf(req)
	if err != nil {
		return c, err
	}
	if t.ownerFn != nil {
		if o := t.ownerFn(req); o != "" {
			if err := backend.CheckName("owner", o); err != nil {
				return Credential{}, fmt.Errorf("quota: transport: WithOwnerFunc for %s %s: %w", req.Method, req.URL.Path, err)
			}
			c.Owner = o
		}
	}
	// A credential named by nothing here keeps the owner the store records
	// for it (quotactl --owner, another process, its own account); one the
	// store does not record is registered under the unnamed owner, in the
	// registration's own atomic step (see context), never by naming the
	// unnamed owner here, which would replace an owner recorded meanwhile.
	return c, nil
}

// credentialOf finds the credential req is billed to, before owners.
func (t *Transport) credentialOf(req *http.Request) (Credential, error) {
	if t.cred != nil {
		return *t.cred, nil
	}
	label := t.label
	if t.labelFn != nil {
		if l := t.labelFn(req); l != "" {
			label = l
		}
	}
	if v, ok := rawquery.Lookup(req.URL.RawQuery, "key"); ok && v != "" {
		return Credential{Secret: v, Label: label}, nil
	}
	for _, h := range bearer.KeyHeaders {
		if v := req.Header.Get(h); v != "" {
			return Credential{Secret: v, Label: label}, nil
		}
	}
	if v := req.Header.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		if tok := strings.TrimSpace(v[7:]); tok != "" {
			return Credential{Secret: tok, Label: label}, nil
		}
	}
	return Credential{}, fmt.Errorf("%w: quota: transport: %s %s carries no credential (a key parameter, an X-Goog-Api-Key, X-Api-Key or X-Shopify-Access-Token header, or a Bearer token); give one with WithCredential",
		ErrInvalid, req.Method, req.URL.Path)
}
