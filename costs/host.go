package costs

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// host is one entry of a table's hosts, normalised: name in lower case,
// without a trailing dot (an IPv6 address without its brackets), port
// empty for the scheme's default.
type host struct {
	name, port string
}

func (h host) String() string {
	name := h.name
	if strings.Contains(name, ":") {
		name = "[" + name + "]"
	}
	if h.port != "" {
		return name + ":" + h.port
	}
	return name
}

// parseHost checks one entry of Spec.Hosts; the message says what is wrong.
func parseHost(s string) (host, string) {
	switch {
	case s == "":
		return host{}, "empty host: name one, e.g. www.googleapis.com"
	case strings.Contains(s, "://"):
		hint := ""
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			hint = fmt.Sprintf(", e.g. %q", u.Host)
		}
		return host{}, fmt.Sprintf("host %q is a URL: give the host alone%s", s, hint)
	case strings.ContainsAny(s, " \t\r\n"):
		return host{}, fmt.Sprintf("host %q contains a space", s)
	case strings.Contains(s, "*"):
		return host{}, fmt.Sprintf("host %q: wildcards are not supported: list each host", s)
	case strings.ContainsAny(s, "/?#@"):
		return host{}, fmt.Sprintf("host %q: a host name and an optional port only, without path, query or user", s)
	}
	name, port := s, ""
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		if !strings.HasPrefix(s, "[") || strings.Contains(s, "]:") {
			var err error
			if name, port, err = net.SplitHostPort(s); err != nil {
				msg := err.Error()
				if ae, ok := err.(*net.AddrError); ok {
					msg = ae.Err
				}
				return host{}, fmt.Sprintf("host %q: %s", s, msg)
			}
		} else if name = strings.TrimPrefix(s, "["); strings.HasSuffix(name, "]") {
			name = strings.TrimSuffix(name, "]")
		} else {
			return host{}, fmt.Sprintf("host %q: want [IPv6 address] or [IPv6 address]:port", s)
		}
		if strings.HasPrefix(s, "[") && net.ParseIP(name) == nil {
			return host{}, fmt.Sprintf("host %q: brackets hold an IPv6 address", s)
		}
	} else if strings.Contains(s, ":") {
		return host{}, fmt.Sprintf("host %q: an IPv6 address goes in brackets, e.g. [::1] or [::1]:8080", s)
	}
	if port != "" || strings.HasSuffix(s, ":") {
		n, err := strconv.Atoi(port)
		switch {
		case err != nil || n < 1 || n > 65535 || port[0] == '0':
			return host{}, fmt.Sprintf("host %q: port %q is not a number from 1 to 65535", s, port)
		case port == "80" || port == "443":
			return host{}, fmt.Sprintf("host %q: leave port %s out: a request to its scheme's default port (443 for https, 80 for http) matches the host alone", s, port)
		}
	}
	if !strings.Contains(name, ":") {
		name = strings.TrimSuffix(name, ".")
		if name == "" {
			return host{}, fmt.Sprintf("host %q: empty host name", s)
		}
		for _, label := range strings.Split(name, ".") {
			if label == "" {
				return host{}, fmt.Sprintf("host %q: empty label between dots", s)
			}
			for _, r := range label {
				if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
					return host{}, fmt.Sprintf("host %q: %q is not a letter, digit, '-' or '_' (write an internationalised name in its xn-- form)", s, r)
				}
			}
		}
	}
	return host{name: strings.ToLower(name), port: port}, ""
}

// defaultPort returns the port a URL of scheme has when it names none.
func defaultPort(scheme string) string {
	switch {
	case strings.EqualFold(scheme, "https"):
		return "443"
	case strings.EqualFold(scheme, "http"):
		return "80"
	}
	return ""
}

// splitHost splits a URL's host ("name", "name:port", "[v6]:port") without
// allocating; a host it cannot read comes back whole as the name.
func splitHost(hostport string) (name, port string) {
	if strings.HasPrefix(hostport, "[") {
		i := strings.IndexByte(hostport, ']')
		if i < 0 {
			return hostport, ""
		}
		name, rest := hostport[1:i], hostport[i+1:]
		if p, ok := strings.CutPrefix(rest, ":"); ok {
			return name, p
		}
		if rest != "" {
			return hostport, ""
		}
		return name, ""
	}
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 && strings.IndexByte(hostport, ':') == i {
		return hostport[:i], hostport[i+1:]
	}
	return hostport, ""
}

// requestHost returns the host req goes to: its URL's, or, for a request a
// server received (no host in its URL), its Host header.
func requestHost(req *http.Request) string {
	if req.URL != nil && req.URL.Host != "" {
		return req.URL.Host
	}
	return req.Host
}

// pricesHost reports whether the table prices requests to req's host: it
// names no hosts, or one of them is the request's host, compared ignoring
// case, a trailing dot and the scheme's default port. It does not allocate.
func (t *Table) pricesHost(req *http.Request) bool {
	if len(t.hosts) == 0 {
		return true
	}
	name, port := splitHost(requestHost(req))
	name = strings.TrimSuffix(name, ".")
	scheme := ""
	if req.URL != nil {
		scheme = req.URL.Scheme
	}
	if port == defaultPort(scheme) {
		port = ""
	}
	for _, h := range t.hosts {
		if h.port == port && strings.EqualFold(h.name, name) {
			return true
		}
	}
	return false
}

// Hosts returns the hosts the table prices requests to (Spec.Hosts,
// normalised), or nil when it prices requests to any host.
func (t *Table) Hosts() []string { return cloneStrs(t.spec.Hosts) }

// WithHosts returns a copy of t that prices requests to hosts instead of
// the table's own (Spec.Hosts): the API served elsewhere, by an emulator,
// a test server or a proxy, e.g. table.WithHosts("localhost:8080"). With no
// hosts, the copy prices requests to any host. A bad host is a *SpecError
// naming it. t is unchanged.
func (t *Table) WithHosts(hosts ...string) (*Table, error) {
	spec := t.Spec()
	spec.Hosts = hosts
	nt, err := New(spec)
	if err != nil {
		return nil, err
	}
	nt.spend, nt.prices = t.spend, t.prices
	return nt, nil
}
