package report

import (
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// IETF reads the RateLimit and RateLimit-Policy fields of
// draft-ietf-httpapi-ratelimit-headers-11
// (https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/,
// read 2026-11-28): both are Structured Field Lists (RFC 9651) of policy
// names with parameters; a policy gives q (quota), w (window, seconds), qu
// (quota unit) and pk (partition key); RateLimit gives r (remaining), t
// (seconds until the window resets) and pk. A RateLimit item is joined with
// the policy of its name for the limit and window. Without the new fields
// it reads the older RateLimit-Limit, -Remaining and -Reset (delta
// seconds) as one policy, "default".
func IETF(h http.Header, now time.Time) ([]Reading, []string) {
	var problems []string
	policies := map[string]Reading{}
	var order []string
	if vs := h.Values("RateLimit-Policy"); len(vs) > 0 {
		list, err := httpsfv.UnmarshalList(vs)
		if err != nil {
			problems = append(problems, problem("RateLimit-Policy", strings.Join(vs, ", "), "not a Structured Field List"))
		}
		for _, m := range list {
			name, params, ok := policyItem(m)
			if !ok {
				problems = append(problems, "RateLimit-Policy: a member is not a policy name with parameters")
				continue
			}
			r := newReading(name)
			if q, ok := intParam(params, "q"); ok {
				r.Limit = q
			} else {
				problems = append(problems, "RateLimit-Policy: policy "+clip(name)+": q is missing or not a count")
				continue
			}
			if w, ok := intParam(params, "w"); ok && w > 0 && time.Duration(w)*time.Second <= maxWait {
				r.Window = time.Duration(w) * time.Second
			}
			r.Partition = pkParam(params)
			if _, seen := policies[name]; !seen {
				order = append(order, name)
			}
			policies[name] = r
		}
	}
	var out []Reading
	if vs := h.Values("RateLimit"); len(vs) > 0 {
		list, err := httpsfv.UnmarshalList(vs)
		if err != nil {
			problems = append(problems, problem("RateLimit", strings.Join(vs, ", "), "not a Structured Field List"))
		}
		for _, m := range list {
			name, params, ok := policyItem(m)
			if !ok {
				problems = append(problems, "RateLimit: a member is not a policy name with parameters")
				continue
			}
			r, known := policies[name]
			if !known {
				r = newReading(name)
			}
			if rem, ok := intParam(params, "r"); ok {
				r.Remaining = rem
			} else {
				problems = append(problems, "RateLimit: policy "+clip(name)+": r is missing or not a count")
				continue
			}
			if t, ok := intParam(params, "t"); ok && time.Duration(t)*time.Second <= maxWait {
				r.Reset = now.Add(time.Duration(t) * time.Second)
			}
			if pk := pkParam(params); pk != "" {
				r.Partition = pk
			}
			out = append(out, r)
			delete(policies, name)
		}
	}
	for _, name := range order { // policies without a current standing: their limits
		if r, ok := policies[name]; ok {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return legacy(h, now, problems)
	}
	return out, problems
}

// legacy reads the RateLimit-Limit, -Remaining and -Reset trio.
func legacy(h http.Header, now time.Time, problems []string) ([]Reading, []string) {
	r := newReading("default")
	if v, ok := header(h, "RateLimit-Limit", &problems); ok {
		// the older drafts allow "100, 100;w=60": the first number is the limit
		first, _, _ := strings.Cut(v, ",")
		first, _, _ = strings.Cut(first, ";")
		if n, ok := count(first); ok {
			r.Limit = n
		} else {
			problems = append(problems, problem("RateLimit-Limit", v, "not a count"))
		}
	}
	if v, ok := header(h, "RateLimit-Remaining", &problems); ok {
		if n, ok := count(v); ok {
			r.Remaining = n
		} else {
			problems = append(problems, problem("RateLimit-Remaining", v, "not a count"))
		}
	}
	if v, ok := header(h, "RateLimit-Reset", &problems); ok {
		if d, ok := seconds(v); ok {
			r.Reset = now.Add(d)
		} else {
			problems = append(problems, problem("RateLimit-Reset", v, "not seconds"))
		}
	}
	if !r.said() {
		return nil, problems
	}
	return []Reading{r}, problems
}

// policyItem returns a list member's policy name (a String or a Token) and
// parameters.
func policyItem(m httpsfv.Member) (string, *httpsfv.Params, bool) {
	it, ok := m.(httpsfv.Item)
	if !ok || it.Params == nil {
		return "", nil, false
	}
	switch v := it.Value.(type) {
	case string:
		return v, it.Params, true
	case httpsfv.Token:
		return string(v), it.Params, true
	}
	return "", nil, false
}

// intParam returns a non-negative Integer parameter.
func intParam(p *httpsfv.Params, key string) (int64, bool) {
	v, ok := p.Get(key)
	if !ok {
		return 0, false
	}
	n, ok := v.(int64)
	if !ok || n < 0 || n > maxCount {
		return 0, false
	}
	return n, true
}

// pkParam returns the partition key, base64 (it is opaque bytes).
func pkParam(p *httpsfv.Params) string {
	v, ok := p.Get("pk")
	if !ok {
		return ""
	}
	b, ok := v.([]byte)
	if !ok {
		return ""
	}
	return base64.StdEncoding.EncodeToString(b)
}
