package costs

import (
	"slices"
	"sort"
	"strings"

	"github.com/quotactl/quotactl/internal/rawquery"
)

// A route pattern is "VERB /path/segments[?cond&cond]":
//
//   - VERB is an HTTP method in upper case (GET, POST, PUT, DELETE, PATCH,
//     ...) or "*" for any method;
//   - the path starts with '/'; a segment "{name}" matches any one
//     non-empty segment, and a last segment "{name...}" matches the rest of
//     the path (one or more segments); every other segment is literal
//     (':' is an ordinary character, as in "/youtube/v3/videos:batchGetStats");
//   - each condition after '?' is "param" (the query parameter is present)
//     or "param=value" (it has that value).
//
// A trailing '/' on a request path is ignored. When several routes match,
// the most specific wins: routes with query conditions over routes without,
// then a literal path over a pattern, then more literal segments over fewer.

type seg struct {
	lit  string
	wild bool // {name}
	rest bool // {name...}
}

type cond struct {
	name, value string
	hasValue    bool
}

type route struct {
	verb    string
	text    string // the pattern as written, normalised
	shape   string // text with wildcard names erased, for duplicate checks
	segs    []seg
	conds   []cond
	literal bool
	lits    int
	m       *Method
}

// httpMethods are the request methods a route may name: those of RFC 9110
// and PATCH (RFC 5789). A client library never sends anything else, so a
// route naming another verb (FETCH, GETT) is a typo that would never match.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"}

// parseRoute parses one route pattern; the error message names what is wrong.
func parseRoute(s string) (*route, string) {
	s = strings.TrimSpace(s)
	verb, target, ok := strings.Cut(s, " ")
	if !ok {
		return nil, `want "VERB /path", e.g. "GET /youtube/v3/videos"`
	}
	target = strings.TrimSpace(target)
	if verb != "*" {
		if verb == "" {
			return nil, "empty HTTP method"
		}
		if !slices.Contains(httpMethods, verb) {
			return nil, "HTTP method " + quote(verb) + " is not one of " + strings.Join(httpMethods, ", ") + " (or * for any)"
		}
	}
	path, query, hasQuery := strings.Cut(target, "?")
	if hasQuery && query == "" {
		return nil, "empty query condition after '?'"
	}
	if !strings.HasPrefix(path, "/") {
		return nil, "path " + quote(path) + " must start with /"
	}
	if strings.ContainsAny(path, " \t\r\n#") {
		return nil, "path " + quote(path) + " contains a space or '#'"
	}
	path = trimSlash(path)
	r := &route{verb: verb, literal: true}
	var shape strings.Builder
	shape.WriteString(verb + " ")
	if msg := r.parsePath(path, &shape); msg != "" {
		return nil, msg
	}
	r.text = verb + " " + path
	if query != "" {
		names, msg := r.parseConds(query)
		if msg != "" {
			return nil, msg
		}
		r.text += "?" + names
		shape.WriteString("?" + names)
	}
	r.shape = shape.String()
	return r, ""
}

// parsePath sets the route's segments from path, and writes its shape
// (wildcards without their names) to shape.
func (r *route) parsePath(path string, shape *strings.Builder) string {
	if path == "/" {
		shape.WriteByte('/')
		return ""
	}
	parts := strings.Split(path[1:], "/")
	for i, p := range parts {
		shape.WriteByte('/')
		switch {
		case p == "":
			return "path " + quote(path) + " has an empty segment"
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "...}"):
			if i != len(parts)-1 {
				return "wildcard " + quote(p) + " must be the last segment"
			}
			if len(p) == 5 {
				return "wildcard " + quote(p) + " needs a name"
			}
			r.segs = append(r.segs, seg{rest: true})
			r.literal = false
			shape.WriteString("{...}")
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}"):
			name := p[1 : len(p)-1]
			if name == "" || strings.ContainsAny(name, "{}") {
				return "wildcard " + quote(p) + " needs a name, e.g. {id}"
			}
			r.segs = append(r.segs, seg{wild: true})
			r.literal = false
			shape.WriteString("{}")
		case strings.ContainsAny(p, "{}"):
			return "segment " + quote(p) + ": a wildcard must be a whole segment, {name} or {name...}"
		default:
			r.segs = append(r.segs, seg{lit: p})
			r.lits++
			shape.WriteString(p)
		}
	}
	return ""
}

// parseConds sets the route's query conditions from query, and returns
// them sorted, joined by '&'.
func (r *route) parseConds(query string) (string, string) {
	var names []string
	for _, c := range strings.Split(query, "&") {
		name, value, has := strings.Cut(c, "=")
		if name == "" {
			return "", "empty query condition in " + quote(query)
		}
		if strings.ContainsAny(name+value, " \t#?") {
			return "", "query condition " + quote(c) + " contains a space, '#' or '?'"
		}
		r.conds = append(r.conds, cond{name: name, value: value, hasValue: has})
		names = append(names, c)
	}
	sort.Strings(names)
	return strings.Join(names, "&"), ""
}

func quote(s string) string { return `"` + s + `"` }

// trimSlash drops one trailing '/' from a path other than "/".
func trimSlash(p string) string {
	if len(p) > 1 && p[len(p)-1] == '/' {
		return p[:len(p)-1]
	}
	return p
}

// matchPath reports whether path (normalised, starting with '/') matches
// the pattern. It does not allocate.
func (r *route) matchPath(path string) bool {
	rest := path[1:]
	if path == "/" {
		rest = ""
	}
	for i, s := range r.segs {
		if s.rest {
			return rest != ""
		}
		if rest == "" {
			return false
		}
		part, after, more := strings.Cut(rest, "/")
		if part == "" {
			return false
		}
		if !s.wild && part != s.lit {
			return false
		}
		if !more {
			return i == len(r.segs)-1
		}
		rest = after
	}
	return rest == "" && len(r.segs) == 0
}

func (r *route) condsOK(rawQuery string) bool {
	for _, c := range r.conds {
		v, ok := rawquery.Lookup(rawQuery, c.name)
		if !ok || c.hasValue && v != c.value {
			return false
		}
	}
	return true
}

// router finds the route for a request. Routes with query conditions are
// tried first, then the others; within each tier literal paths before
// patterns, and patterns most specific first.
type router struct {
	tiers [2]tier // [0]: routes with conditions, [1]: without
}

type tier struct {
	exact map[string]map[string][]*route // verb -> path -> routes, most conditions first
	pats  map[string][]*route            // verb -> pattern routes, most specific first
}

func newRouter(routes []*route) *router {
	rt := &router{}
	for i := range rt.tiers {
		rt.tiers[i] = tier{exact: map[string]map[string][]*route{}, pats: map[string][]*route{}}
	}
	for _, r := range routes {
		t := &rt.tiers[1]
		if len(r.conds) > 0 {
			t = &rt.tiers[0]
		}
		if r.literal {
			path := r.text[len(r.verb)+1:]
			path, _, _ = strings.Cut(path, "?")
			m := t.exact[r.verb]
			if m == nil {
				m = map[string][]*route{}
				t.exact[r.verb] = m
			}
			m[path] = append(m[path], r)
		} else {
			t.pats[r.verb] = append(t.pats[r.verb], r)
		}
	}
	less := func(a, b *route) bool {
		if len(a.conds) != len(b.conds) {
			return len(a.conds) > len(b.conds)
		}
		if a.lits != b.lits {
			return a.lits > b.lits
		}
		if len(a.segs) != len(b.segs) {
			return len(a.segs) > len(b.segs)
		}
		return a.text < b.text
	}
	for i := range rt.tiers {
		for _, m := range rt.tiers[i].exact {
			for _, rs := range m {
				sort.SliceStable(rs, func(i, j int) bool { return less(rs[i], rs[j]) })
			}
		}
		for _, rs := range rt.tiers[i].pats {
			sort.SliceStable(rs, func(i, j int) bool { return less(rs[i], rs[j]) })
		}
	}
	return rt
}

// match returns the route for verb, path and raw query, or nil. It does not
// allocate.
func (rt *router) match(verb, path, rawQuery string) *route {
	if path == "" || path[0] != '/' {
		return nil
	}
	path = trimSlash(path)
	for _, v := range [2]string{verb, "*"} {
		for i := range rt.tiers {
			if i == 0 && rawQuery == "" {
				continue // no query: no condition can hold
			}
			if r := rt.tiers[i].match(v, path, rawQuery); r != nil {
				return r
			}
		}
	}
	return nil
}

func (t *tier) match(verb, path, rawQuery string) *route {
	for _, r := range t.exact[verb][path] {
		if r.condsOK(rawQuery) {
			return r
		}
	}
	for _, r := range t.pats[verb] {
		if r.matchPath(path) && r.condsOK(rawQuery) {
			return r
		}
	}
	return nil
}
