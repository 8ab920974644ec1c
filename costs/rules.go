package costs

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

func cloneRules(rs []Rule) []Rule {
	if len(rs) == 0 {
		return nil
	}
	out := make([]Rule, len(rs))
	for i, r := range rs {
		out[i] = Rule{
			Status: r.Status, Reasons: cloneStrs(r.Reasons), Limits: cloneStrs(r.Limits), Exhaust: cloneStrs(r.Exhaust),
			Retry: r.Retry, Hold: cloneStrs(r.Hold), For: r.For, Source: r.Source,
			Headers: cloneHeaders(r.Headers), Messages: cloneStrs(r.Messages), ResetHeader: r.ResetHeader,
		}
	}
	return out
}

// cloneHeaders copies h with canonical header names, an empty map as nil.
func cloneHeaders(h map[string]string) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[http.CanonicalHeaderKey(k)] = strings.TrimSpace(v)
	}
	return out
}

// checkRule checks one response rule; field is "responses[i]".
func (t *Table) checkRule(field string, r Rule) error {
	if r.Status < 400 || r.Status > 599 {
		return specErrorf(field+".status", "status %d: want an HTTP error status, 400 to 599 (the Transport reads only error responses)", r.Status)
	}
	actions := 0
	for _, set := range []bool{len(r.Exhaust) > 0, r.Retry, len(r.Hold) > 0} {
		if set {
			actions++
		}
	}
	if actions != 1 {
		return specErrorf(field, "give exactly one of exhaust (budgets), retry: true and hold (methods, with for)")
	}
	for j, name := range r.Exhaust {
		if _, ok := t.budgets[name]; !ok && name != "*" {
			return specErrorf(fmt.Sprintf("%s.exhaust[%d]", field, j), "unknown budget %q (budgets: %s)", name, t.budgetNames())
		}
	}
	for j, name := range r.Hold {
		if m, ok := t.methods[name]; !ok || m.Free {
			return specErrorf(fmt.Sprintf("%s.hold[%d]", field, j), "%q is not a method of the table that costs units", name)
		}
	}
	switch {
	case len(r.Hold) > 0 && r.For <= 0:
		return specErrorf(field+".for", "hold needs for: how long the upstream refuses the credential, e.g. 24h")
	case len(r.Hold) == 0 && r.For != 0:
		return specErrorf(field+".for", "for applies to hold only")
	}
	if err := checkMatchers(field, r); err != nil {
		return err
	}
	for _, l := range [...]struct {
		name string
		v    []string
	}{{"reasons", r.Reasons}, {"limits", r.Limits}, {"messages", r.Messages}} {
		for j, s := range l.v {
			if strings.TrimSpace(s) == "" {
				return specErrorf(fmt.Sprintf("%s.%s[%d]", field, l.name, j), "empty %s", strings.TrimSuffix(l.name, "s"))
			}
		}
	}
	return nil
}

// checkMatchers checks a rule's headers and reset_header.
func checkMatchers(field string, r Rule) error {
	canon := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(r.Headers)) {
		if prev, dup := canon[http.CanonicalHeaderKey(name)]; dup {
			return specErrorf(field+".headers."+name, "header %q is also given as %q: header names ignore case", name, prev)
		}
		canon[http.CanonicalHeaderKey(name)] = name
		if !validHeaderName(name) {
			return specErrorf(field+".headers."+name, "%q is not a header field name", name)
		}
		if strings.TrimSpace(r.Headers[name]) == "" {
			return specErrorf(field+".headers."+name, "empty value: name the value the header must have, e.g. \"0\"")
		}
	}
	switch {
	case r.ResetHeader != "" && len(r.Exhaust) == 0:
		return specErrorf(field+".reset_header", "reset_header applies to exhaust only")
	case r.ResetHeader != "" && !validHeaderName(r.ResetHeader):
		return specErrorf(field+".reset_header", "%q is not a header field name", r.ResetHeader)
	}
	return nil
}

// validHeaderName reports whether s is an RFC 9110 field name (a token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
