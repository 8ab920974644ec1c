package storeurl

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

func (p *parser) parseRedis(s *Spec, rest string) error {
	if !strings.HasPrefix(rest, "//") {
		return reasonf("missing // after %s:; want %s://HOST:PORT", s.scheme, s.scheme)
	}
	rest = rest[2:]
	// The authority ends at the first "/", "?" or "#"; the userinfo in it at
	// its last "@", so a password may hold "@" and ":" as they are.
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	if strings.Contains(tail, "@") && strings.Contains(rest, ":") {
		p.tangled = true
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo := authority[:at]
		authority = authority[at+1:]
		user, pass, hasPass := strings.Cut(userinfo, ":")
		p.secrets = append(p.secrets, pass)
		var err error
		if s.Username, err = url.PathUnescape(user); err != nil {
			return reason("bad percent-escape in the user name")
		}
		if s.password, err = url.PathUnescape(pass); err != nil {
			return reason("bad percent-escape in the password")
		}
		p.secrets = append(p.secrets, s.password)
		s.hasPassword = hasPass
	}
	path, query, hasQuery := strings.Cut(tail, "?")
	if strings.Contains(path, "#") || strings.Contains(query, "#") {
		return reason(`unexpected "#"; percent-encode it as %23`)
	}
	if err := p.parseHosts(s, authority); err != nil {
		return err
	}
	if err := parseRedisPath(s, path); err != nil {
		return err
	}
	if hasQuery {
		if err := p.parseOptions(s, query); err != nil {
			return err
		}
	}
	p.tangled = false // the URL made sense after all
	return s.redisOptions()
}

func (p *parser) parseHosts(s *Spec, list string) error {
	if list == "" {
		return reasonf("missing host; want %s://HOST:PORT", s.scheme)
	}
	defPort := "6379"
	if s.Kind == Sentinel {
		defPort = "26379"
	}
	hosts := strings.Split(list, ",")
	if s.Kind == Redis && len(hosts) > 1 {
		return reasonf("bad host list: %s:// takes one host; for several use redis+cluster:// or redis+sentinel://", s.scheme)
	}
	for _, h := range hosts {
		a, err := hostPort(h, defPort)
		if err != nil {
			return reasonf("bad host list: %v", err)
		}
		if slices.Contains(s.Addrs, a) {
			return reasonf("bad host list: %s listed twice", a)
		}
		s.Addrs = append(s.Addrs, a)
	}
	return nil
}

// hostPort checks one HOST[:PORT] (HOST may be a bracketed IPv6 literal)
// and returns host:port.
func hostPort(h, defPort string) (string, error) {
	if h == "" {
		return "", reason("empty host")
	}
	var host, port string
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", reasonf("host %q: missing ]", h)
		}
		host = h[1:end]
		switch rest := h[end+1:]; {
		case rest == "":
			port = defPort
		case rest[0] == ':':
			port = rest[1:]
		default:
			return "", reasonf("host %q: junk after ]", h)
		}
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil && !strings.Contains(host, ":") {
			return "", reasonf("host %q: not an IPv6 address in brackets", h)
		}
	} else {
		switch strings.Count(h, ":") {
		case 0:
			host, port = h, defPort
		case 1:
			host, port, _ = strings.Cut(h, ":")
		default:
			return "", reasonf("host %q: put an IPv6 address in brackets, like [::1]:6379", h)
		}
		if host == "" {
			return "", reasonf("host %q: empty host name", h)
		}
		for i := 0; i < len(host); i++ {
			c := host[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
				return "", reasonf("host %q: bad character %q in host name", h, c)
			}
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || port[0] == '+' || port[0] == '0' {
		return "", reasonf("host %q: port %q is not a number from 1 to 65535", h, port)
	}
	return net.JoinHostPort(host, port), nil
}

func parseRedisPath(s *Spec, path string) error {
	var segs []string
	for seg := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
		if seg != "" {
			segs = append(segs, seg)
		}
	}
	if strings.Contains(path, "//") || len(segs) > 0 && strings.HasSuffix(path, "/") {
		return reasonf("unexpected path %q", path)
	}
	var db string
	switch s.Kind {
	case Redis:
		if len(segs) > 1 {
			return reasonf("unexpected path %q; want /DB, a database number", path)
		}
		if len(segs) == 1 {
			db = segs[0]
		}
	case Sentinel:
		if len(segs) == 0 {
			return reasonf("missing master name; want %s://HOST:PORT,.../MASTER[/DB]", s.scheme)
		}
		if len(segs) > 2 {
			return reasonf("unexpected path %q; want /MASTER or /MASTER/DB", path)
		}
		m, err := url.PathUnescape(segs[0])
		if err != nil || strings.TrimSpace(m) != m || m == "" {
			return reasonf("bad master name %q", segs[0])
		}
		s.Master = m
		if len(segs) == 2 {
			db = segs[1]
		}
	case Cluster:
		if len(segs) > 0 {
			return reasonf("unexpected path %q: a cluster has no database number", path)
		}
	}
	if db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 || db[0] == '+' || db[0] == '-' {
			return reasonf("bad database number %q", db)
		}
		s.DB = n
	}
	return nil
}

// splitQuery splits a query into decoded key, value pairs, in order.
func splitQuery(query string) ([][2]string, error) {
	var out [][2]string
	for kv := range strings.SplitSeq(query, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, reason("bad percent-escape in an option name")
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return nil, reasonf("bad percent-escape in option %q", key)
		}
		if key == "" {
			return nil, reason("option with an empty name")
		}
		for i := 0; i < len(key); i++ {
			if c := key[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
				return nil, reasonf("bad option name %q", key)
			}
		}
		out = append(out, [2]string{key, val})
	}
	return out, nil
}

// elsewhere names the options a URL gives in another place.
var elsewhere = map[string]string{
	"addr":        "list the hosts before the path, separated by commas",
	"db":          "give the database number as the path (/DB)",
	"master_name": "give the master name as the path (/MASTER)",
	"username":    "give it before the host (USER:PASSWORD@HOST)",
	"password":    "give it before the host (USER:PASSWORD@HOST)",
}

// redisOptions has go-redis read the connection options, from a URL that
// holds no credentials, and then sets the credentials.
func (s *Spec) redisOptions() error {
	scheme := "redis"
	if s.TLS {
		scheme = "rediss"
	}
	q := url.Values{}
	for _, kv := range s.options {
		q.Add(kv[0], kv[1])
	}
	u := url.URL{Scheme: scheme, Host: s.Addrs[0]}
	var err error
	switch s.Kind {
	case Redis:
		u.Path = "/" + strconv.Itoa(s.DB)
		u.RawQuery = q.Encode()
		s.simple, err = redis.ParseURL(u.String())
		if err == nil {
			s.simple.Username, s.simple.Password = s.Username, s.password
		}
	case Sentinel:
		u.Path = "/" + strconv.Itoa(s.DB)
		q.Set("master_name", s.Master)
		for _, a := range s.Addrs[1:] {
			q.Add("addr", a)
		}
		u.RawQuery = q.Encode()
		s.failover, err = redis.ParseFailoverURL(u.String())
		if err == nil {
			s.failover.Username, s.failover.Password = s.Username, s.password
			s.failover.SentinelUsername, s.failover.SentinelPassword = s.sentinelUser, s.sentinelPassword
		}
	case Cluster:
		for _, a := range s.Addrs[1:] {
			q.Add("addr", a)
		}
		u.RawQuery = q.Encode()
		s.cluster, err = redis.ParseClusterURL(u.String())
		if err == nil {
			s.cluster.Username, s.cluster.Password = s.Username, s.password
		}
	}
	if err != nil {
		return reasonf("bad option: %v", err)
	}
	return nil
}
