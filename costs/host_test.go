package costs_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/quota"
)

// A table that names its hosts prices requests to them, whatever the case,
// a trailing dot or the scheme's default port, and no other: a request to
// another host, even on one of the API's paths, is no call of the API.
func TestPriceHosts(t *testing.T) {
	s := spec()
	s.Hosts = []string{"API.Example.com", "localhost:8080", "[::1]:9000", "10.0.0.7"}
	s.Default = map[string]int64{"units": 1} // even the default does not price another host
	tb := mustNew(t, s)
	if got, want := tb.Hosts(), []string{"api.example.com", "localhost:8080", "[::1]:9000", "10.0.0.7"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Hosts() = %q, want %q", got, want)
	}
	for _, c := range []struct {
		url    string
		priced bool
	}{
		{"https://api.example.com/v1/items", true},
		{"https://API.EXAMPLE.COM/v1/items", true},
		{"https://api.example.com.:443/v1/items", true},
		{"https://api.example.com:443/v1/items", true},
		{"http://api.example.com:80/v1/items", true},
		{"http://api.example.com/v1/items", true},
		{"https://api.example.com:80/v1/items", false}, // not https's default port: another service
		{"https://api.example.com:8443/v1/items", false},
		{"https://evil.example/v1/items", false},
		{"https://api.example.com.evil.example/v1/items", false},
		{"https://example.com/v1/items", false},
		{"http://localhost:8080/v1/items", true},
		{"http://LOCALHOST:8080/v1/items", true},
		{"http://localhost/v1/items", false},
		{"http://localhost:8081/v1/items", false},
		{"http://[::1]:9000/v1/items", true},
		{"http://[::1]/v1/items", false},
		{"https://10.0.0.7/v1/items", true},
		{"https://10.0.0.7:443/v1/items", true},
	} {
		req, err := http.NewRequest("GET", c.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := tb.Price(req)
		switch {
		case c.priced && (err != nil || ch.Method != "items.list"):
			t.Errorf("Price(%s) = %+v, %v; want items.list", c.url, ch, err)
		case !c.priced && (!errors.Is(err, quota.ErrForeignHost) || len(ch.Units) != 0):
			t.Errorf("Price(%s) = %+v, %v; want ErrForeignHost and no charge", c.url, ch, err)
		case !c.priced && !strings.Contains(err.Error(), "table demo prices requests to api.example.com, localhost:8080"):
			t.Errorf("Price(%s): error %q does not name the table's hosts", c.url, err)
		}
	}
	// A request a server received names its host in the Host header.
	in, _ := http.NewRequest("GET", "/v1/items", nil)
	in.Host = "api.example.com"
	if ch, err := tb.Price(in); err != nil || ch.Method != "items.list" {
		t.Fatalf("server-side request: %+v, %v", ch, err)
	}
	in.Host = "other.example"
	if _, err := tb.Price(in); !errors.Is(err, quota.ErrForeignHost) || !strings.HasSuffix(err.Error(), ", not to other.example") {
		t.Fatalf("server-side request to another host: %v", err)
	}
	in.Host = ""
	if _, err := tb.Price(in); !errors.Is(err, quota.ErrForeignHost) || !strings.HasSuffix(err.Error(), ", not a request naming no host") {
		t.Fatalf("a request naming no host: %v", err)
	}
}

// A table without hosts prices requests to any host, as tables did before
// hosts existed: existing files keep working.
func TestPriceNoHostsIsHostAgnostic(t *testing.T) {
	tb := mustNew(t, spec())
	if tb.Hosts() != nil {
		t.Fatalf("Hosts() = %q, want nil", tb.Hosts())
	}
	for _, u := range []string{"https://api.example.com/v1/items", "http://127.0.0.1:1234/v1/items", "https://evil.example/v1/items"} {
		req, _ := http.NewRequest("GET", u, nil)
		if ch, err := tb.Price(req); err != nil || ch.Method != "items.list" {
			t.Errorf("Price(%s) = %+v, %v", u, ch, err)
		}
	}
}

// Classify reads only responses of the table's hosts: a 429 from another
// host says nothing about the API's budgets.
func TestClassifyForeignHost(t *testing.T) {
	s := spec()
	s.Hosts = []string{"api.example.com"}
	s.Responses = []costs.Rule{{Status: 429, Exhaust: []string{"*"}}}
	tb := mustNew(t, s)
	req, _ := http.NewRequest("GET", "https://api.example.com/v1/items", nil)
	if v := tb.Classify(req, &http.Response{StatusCode: 429}, nil); len(v.Exhausted) != 1 {
		t.Fatalf("own host: %+v", v)
	}
	req, _ = http.NewRequest("GET", "https://cdn.example.com/v1/items", nil)
	if v := tb.Classify(req, &http.Response{StatusCode: 429}, nil); !reflect.DeepEqual(v, quota.Verdict{}) {
		t.Fatalf("another host: %+v, want the zero Verdict", v)
	}
}

func TestNewRejectsHosts(t *testing.T) {
	for _, c := range []struct {
		hosts []string
		field string
		msg   string
	}{
		{[]string{""}, "hosts[0]", "empty host"},
		{[]string{"https://www.googleapis.com/youtube/v3"}, "hosts[0]", `is a URL: give the host alone, e.g. "www.googleapis.com"`},
		{[]string{"www.googleapis.com/youtube"}, "hosts[0]", "without path"},
		{[]string{"user@www.googleapis.com"}, "hosts[0]", "without path, query or user"},
		{[]string{"*.googleapis.com"}, "hosts[0]", "wildcards are not supported"},
		{[]string{"www.googleapis.com "}, "hosts[0]", "contains a space"},
		{[]string{"www..googleapis.com"}, "hosts[0]", "empty label"},
		{[]string{"www.googleapis.com:https"}, "hosts[0]", `port "https" is not a number`},
		{[]string{"www.googleapis.com:0"}, "hosts[0]", "not a number from 1 to 65535"},
		{[]string{"www.googleapis.com:70000"}, "hosts[0]", "not a number from 1 to 65535"},
		{[]string{"www.googleapis.com:"}, "hosts[0]", `port "" is not a number`},
		{[]string{"www.googleapis.com:443"}, "hosts[0]", "leave port 443 out"},
		{[]string{"www.googleapis.com:80"}, "hosts[0]", "leave port 80 out"},
		{[]string{"::1"}, "hosts[0]", "IPv6 address goes in brackets"},
		{[]string{"[example.com]"}, "hosts[0]", "brackets hold an IPv6 address"},
		{[]string{"[::1"}, "hosts[0]", "want [IPv6 address]"},
		{[]string{"wwẃ.example"}, "hosts[0]", "xn-- form"},
		{[]string{"www.googleapis.com", "WWW.googleapis.com."}, "hosts[1]", `duplicate host "WWW.googleapis.com." (hosts[0] is "www.googleapis.com")`},
	} {
		s := spec()
		s.Hosts = c.hosts
		_, err := costs.New(s)
		var se *costs.SpecError
		if !errors.As(err, &se) || !errors.Is(err, quota.ErrInvalid) || se.Field != c.field || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("hosts %q: err = %v, want field %s and %q", c.hosts, err, c.field, c.msg)
		}
	}
}

// hosts in a file: a list, or one host as a string; mistakes name the line
// and the entry; the Spec round-trips through JSON.
func TestParseHosts(t *testing.T) {
	yaml := strings.Replace(goodYAML, "source: tests\n", "source: tests\nhosts: [api.example.com, \"localhost:8080\"]\n", 1)
	tb := parse(t, "t.yaml", yaml)
	if got := tb.Hosts(); !reflect.DeepEqual(got, []string{"api.example.com", "localhost:8080"}) {
		t.Fatalf("Hosts() = %q", got)
	}
	one := parse(t, "t.yaml", strings.Replace(goodYAML, "source: tests\n", "source: tests\nhosts: api.example.com\n", 1))
	if got := one.Hosts(); !reflect.DeepEqual(got, []string{"api.example.com"}) {
		t.Fatalf("one host: Hosts() = %q", got)
	}
	js := strings.Replace(goodJSON, `"source": "tests",`, `"source": "tests", "hosts": ["API.example.com"],`, 1)
	if got := parse(t, "t.json", js).Hosts(); !reflect.DeepEqual(got, []string{"api.example.com"}) {
		t.Fatalf("JSON: Hosts() = %q", got)
	}
	data, err := json.Marshal(tb.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if back := parse(t, "spec.json", string(data)); !reflect.DeepEqual(back.Spec(), tb.Spec()) {
		t.Fatalf("round trip differs:\n%+v\n%+v", back.Spec(), tb.Spec())
	}

	for _, c := range []struct {
		hosts string
		line  int
		field string
		msg   string
	}{
		{"hosts: []\n", 4, "hosts", "empty list: leave hosts out to price requests to any host"},
		{"hosts: {www: x}\n", 4, "hosts", "want a list of strings"},
		{"hosts:\n  - www.googleapis.com\n  - https://youtube.googleapis.com\n", 6, "hosts[1]", `host "https://youtube.googleapis.com" is a URL`},
		{"hosts:\n  - www.googleapis.com\n  - [a, b]\n", 6, "hosts[1]", "want a string"},
	} {
		_, err := costs.Parse("t.yaml", []byte(strings.Replace(goodYAML, "source: tests\n", "source: tests\n"+c.hosts, 1)))
		var se *costs.SpecError
		if !errors.As(err, &se) || se.Line != c.line || se.Field != c.field || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%q: err = %v, want line %d field %s %q", c.hosts, err, c.line, c.field, c.msg)
		}
	}
}

// WithHosts prices the same API at other hosts, leaving the table alone.
func TestWithHosts(t *testing.T) {
	s := spec()
	s.Hosts = []string{"api.example.com"}
	tb := mustNew(t, s)
	local, err := tb.WithHosts("127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	price := func(tb *costs.Table, u string) error {
		req, _ := http.NewRequest("GET", u, nil)
		_, err := tb.Price(req)
		return err
	}
	if err := price(local, "http://127.0.0.1:8080/v1/items"); err != nil {
		t.Fatalf("the new host: %v", err)
	}
	if err := price(local, "https://api.example.com/v1/items"); !errors.Is(err, quota.ErrForeignHost) {
		t.Fatalf("the old host: %v, want ErrForeignHost", err)
	}
	if err := price(tb, "https://api.example.com/v1/items"); err != nil || !reflect.DeepEqual(tb.Hosts(), []string{"api.example.com"}) {
		t.Fatalf("the table changed: %v, %q", err, tb.Hosts())
	}
	sp, lsp := tb.Spec(), local.Spec()
	lsp.Hosts = sp.Hosts
	if !reflect.DeepEqual(sp, lsp) {
		t.Fatalf("WithHosts changed more than the hosts:\n%+v\n%+v", sp, lsp)
	}
	anyHost, err := tb.WithHosts()
	if err != nil || anyHost.Hosts() != nil || price(anyHost, "http://anywhere.example/v1/items") != nil {
		t.Fatalf("WithHosts(): %v, %q", err, anyHost.Hosts())
	}
	var se *costs.SpecError
	if _, err := tb.WithHosts("http://127.0.0.1:8080"); !errors.As(err, &se) || se.Field != "hosts[0]" {
		t.Fatalf("bad host: %v", err)
	}
}
