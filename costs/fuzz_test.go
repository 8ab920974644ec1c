package costs_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/quota"
)

// FuzzResolve feeds the route resolver arbitrary methods and targets. It
// must not panic; a match must agree with Price, be stable under a trailing
// slash, and name a method of the table whose routes share the verb.
func FuzzResolve(f *testing.F) {
	for _, r := range youtubeRoutes {
		f.Add(r.verb, r.target)
	}
	for _, s := range [][2]string{
		{"GET", ""}, {"GET", "/"}, {"GET", "//"}, {"", "/youtube/v3/videos"}, {"*", "/youtube/v3/videos"},
		{"PUT", "/upload/youtube/v3/?upload_id"}, {"PUT", "/upload/youtube/v3/a/b/c?upload_id=%zz"},
		{"GET", "/youtube/v3/captions/%2F"}, {"GET", "/youtube/v3/videos?key=a&key=b"},
	} {
		f.Add(s[0], s[1])
	}
	tb, err := costs.Builtin("youtube")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, verb, target string) {
		name, ok := tb.Resolve(verb, target)
		if !ok {
			if name != "" {
				t.Fatalf("no match but name %q", name)
			}
			return
		}
		m, found := tb.Method(name)
		if !found {
			t.Fatalf("resolved to unknown method %q", name)
		}
		verbOK := false
		for _, r := range m.Routes {
			v, _, _ := strings.Cut(r, " ")
			verbOK = verbOK || v == verb || v == "*"
		}
		if !verbOK {
			t.Fatalf("%s %q resolved to %s, whose routes %v take other methods", verb, target, name, m.Routes)
		}
		path, query, hasQ := strings.Cut(target, "?")
		if !strings.HasSuffix(path, "/") && path != "" {
			slashed := path + "/"
			if hasQ {
				slashed += "?" + query
			}
			if again, _ := tb.Resolve(verb, slashed); again != name {
				t.Fatalf("%q -> %s but %q -> %s", target, name, slashed, again)
			}
		}
		// Price agrees when the target is a valid request URL.
		u := &url.URL{Scheme: "https", Host: "www.googleapis.com", Path: path, RawQuery: query}
		if !hasQ {
			u.RawQuery = ""
		}
		req := &http.Request{Method: verb, URL: u, Header: http.Header{}}
		ch, err := tb.Price(req)
		if m.Deprecated != "" {
			if !errors.Is(err, costs.ErrDeprecated) {
				t.Fatalf("Price(%s %s) = %+v, %v; want ErrDeprecated for %s", verb, target, ch, err, name)
			}
			return
		}
		if err != nil || ch.Method != name {
			t.Fatalf("Price(%s %s) = %+v, %v; Resolve said %s", verb, target, ch, err, name)
		}
	})
}

// FuzzParse feeds the table loader arbitrary files, as JSON and as YAML. It
// must not panic; it returns a table or a *SpecError, and a table survives a
// round trip through its JSON form.
func FuzzParse(f *testing.F) {
	f.Add([]byte(goodYAML), false)
	f.Add([]byte(goodJSON), true)
	f.Add([]byte("api: x\nbudgets: [{name: u, limit: 1, window: 1h}]\nmethods: {m: {routes: GET /, cost: {u: 1}}}\n"), false)
	f.Add([]byte(`{"api":"x","budgets":[{"name":"u","limit":1,"window":"1h"}],"methods":[{"name":"m","routes":["* /{p...}"],"cost":{"u":1}}]}`), true)
	f.Add([]byte("api: x\nhosts: [A.Example., \"[::1]:8080\", \"10.0.0.1:81\"]\nbudgets: [{name: u, limit: 1, window: 1h}]\nmethods: {m: {routes: GET /, cost: {u: 1}}}\n"), false)
	f.Add([]byte("api: x\nbudgets: [{name: u, limit: 1, window: 1h}]\nmethods: {m: {routes: GET /, cost: {u: 1}}}\nresponses: [{status: 403, headers: {x-a: 0}, messages: [slow], exhaust: [u], reset_header: x-r}]\n"), false)
	f.Add([]byte("api: [\n"), false)
	f.Add([]byte(`{"api": "x", "budgets": [`), true)
	f.Add([]byte("a: &a [*a]\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		name := "fuzz.yaml"
		if asJSON {
			name = "fuzz.json"
		}
		tb, err := costs.Parse(name, data)
		if err != nil {
			var se *costs.SpecError
			if !errors.As(err, &se) || !errors.Is(err, quota.ErrInvalid) {
				t.Fatalf("error %v is not a *SpecError", err)
			}
			if se.File != name {
				t.Fatalf("error %v does not name the file", err)
			}
			return
		}
		out, err := json.Marshal(tb.Spec())
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := costs.Parse("back.json", out)
		if err != nil {
			t.Fatalf("round trip: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back.Spec(), tb.Spec()) {
			t.Fatalf("round trip differs:\n%+v\n%+v", back.Spec(), tb.Spec())
		}
	})
}
