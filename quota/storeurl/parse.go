package storeurl

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
)

// Spec is a parsed store URL: what Open opens. Parse makes one; change
// nothing in it before calling Open.
type Spec struct {
	// Kind is the kind of store: Memory, SQLite, Redis, Sentinel or Cluster.
	Kind Kind
	// TLS is set by the rediss forms.
	TLS bool
	// Path is the SQLite database file, as given (relative paths are
	// relative to the working directory).
	Path string
	// Addrs are the Redis forms' host:port addresses: the server, the
	// Sentinels, or the cluster seed nodes, in the order given.
	Addrs []string
	// Master is the Sentinel form's master name.
	Master string
	// DB is the Redis database number (Redis and Sentinel forms).
	DB int
	// Username is the Redis ACL user, if the URL names one.
	Username string
	// Prefix is the Redis key prefix from ?prefix=; empty means
	// redisstore's default.
	Prefix string
	// AllowEviction is ?allow_eviction=true: accept a server whose
	// maxmemory-policy may evict the limiter's keys
	// (redisstore.WithAllowEviction).
	AllowEviction bool
	// Replicas and ReplicaTimeout are ?replicas=N&replica_timeout=D: wait
	// for N replicas to acknowledge each decision, at most D (default 1s)
	// (redisstore.WithReplicas).
	Replicas       int
	ReplicaTimeout time.Duration
	// Pipelining is ?pipelining=N: at most N pipelines in flight for the
	// decisions concurrent callers make at once (redisstore.WithPipelining);
	// 0, the default, is the store's default (redisstore.DefaultLanes);
	// -1, written ?pipelining=0, sends each decision alone
	// (redisstore.WithoutPipelining).
	Pipelining int
	// OpenTimeout is ?open_timeout=D: how long Open waits for the server
	// (and the Sentinels) to answer its checks; 0 means
	// DefaultOpenTimeout.
	OpenTimeout time.Duration

	scheme           string // as written, lower-cased
	password         string
	hasPassword      bool
	sentinelUser     string
	sentinelPassword string
	options          [][2]string // go-redis connection options, in order given
	busyTimeout      *time.Duration

	simple   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
}

// schemes maps each accepted scheme to its kind and TLS flag.
var schemes = map[string]struct {
	kind Kind
	tls  bool
}{
	"memory":          {Memory, false},
	"sqlite":          {SQLite, false},
	"redis":           {Redis, false},
	"rediss":          {Redis, true},
	"redis+sentinel":  {Sentinel, false},
	"rediss+sentinel": {Sentinel, true},
	"redis+cluster":   {Cluster, false},
	"rediss+cluster":  {Cluster, true},
}

const wantForms = "want memory:, sqlite:PATH, redis://HOST:PORT/DB, rediss://..., redis+sentinel://HOST:PORT,.../MASTER or redis+cluster://HOST:PORT,..."

// Error is a malformed store URL. errors.Is(err, quota.ErrInvalid) matches
// it. Its URL is redacted: it never holds a password.
type Error struct {
	URL    string // the URL as given, redacted
	Reason string // what is wrong with it
}

// Error returns "storeurl: bad store URL "URL": REASON".
func (e *Error) Error() string { return fmt.Sprintf("storeurl: bad store URL %q: %s", e.URL, e.Reason) }

// Unwrap returns quota.ErrInvalid.
func (e *Error) Unwrap() error { return quota.ErrInvalid }

// Parse reads a store URL (see the package doc) without opening anything.
// Every Redis option is checked as go-redis reads it. A malformed URL gives
// an *Error (wrapping quota.ErrInvalid) naming what is wrong.
func Parse(rawURL string) (*Spec, error) {
	p := parser{raw: rawURL}
	s, err := p.parse()
	if err != nil {
		return nil, p.fail(err.Error())
	}
	return s, nil
}

type parser struct {
	raw string
	// tangled is set when an "@" follows the authority, so that a password
	// holding an unescaped "/", "?" or "#" may have been read as host or
	// path: errors then quote no part of the URL.
	tangled bool
	secrets []string
}

type reason string

func (r reason) Error() string { return string(r) }

func reasonf(format string, args ...any) error { return reason(fmt.Sprintf(format, args...)) }

// fail builds the *Error for msg, making sure no secret is in it.
func (p *parser) fail(msg string) error {
	if p.tangled {
		msg = `cannot read the host list; if the password holds "/", "?" or "#", percent-encode them (%2F, %3F, %23)`
	}
	msg = scrub(msg, append(p.secrets, secretsOf(p.raw)...))
	// One line, whatever a quoted piece held.
	msg = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, msg)
	return &Error{URL: Redact(p.raw), Reason: msg}
}

func (p *parser) parse() (*Spec, error) {
	raw := p.raw
	if strings.TrimSpace(raw) == "" {
		return nil, reason("empty URL; " + wantForms)
	}
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok || !validScheme(scheme) {
		if strings.ContainsAny(raw, `/\`) || strings.HasSuffix(raw, ".db") {
			return nil, reasonf("missing scheme; for a database file write %q", "sqlite:"+raw)
		}
		return nil, reason("missing scheme; " + wantForms)
	}
	scheme = strings.ToLower(scheme)
	k, ok := schemes[scheme]
	if !ok {
		return nil, reasonf("unknown scheme %q; %s", scheme, wantForms)
	}
	s := &Spec{Kind: k.kind, TLS: k.tls, scheme: scheme}
	var err error
	switch k.kind {
	case Memory:
		if rest != "" && rest != "//" {
			return nil, reason("memory: takes nothing after the colon")
		}
	case SQLite:
		err = p.parseSQLite(s, rest)
	default:
		err = p.parseRedis(s, rest)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !alpha && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

func (p *parser) parseSQLite(s *Spec, rest string) error {
	rest, query, hasQuery := strings.Cut(rest, "?")
	if strings.Contains(rest, "#") {
		return reason(`unexpected "#" in path; write it as %23`)
	}
	if strings.HasPrefix(rest, "//") {
		host, path, _ := strings.Cut(rest[2:], "/")
		if host != "" && host != "localhost" {
			return reasonf("a database file has no host (%q); write sqlite:PATH for a relative path or sqlite:///ABS/PATH", host)
		}
		rest = "/" + path
		if path == "" {
			rest = ""
		}
	}
	if rest == "" {
		return reason("missing path; want sqlite:PATH or sqlite:///ABS/PATH")
	}
	path, err := url.PathUnescape(rest)
	if err != nil {
		return reason("bad percent-escape in path; write % as %25")
	}
	if strings.ContainsRune(path, 0) {
		return reason("path holds a NUL byte")
	}
	s.Path = path
	if hasQuery {
		opts, err := splitQuery(query)
		if err != nil {
			return err
		}
		for _, kv := range opts {
			switch k, v := kv[0], kv[1]; k {
			case "busy_timeout":
				d, err := time.ParseDuration(v)
				if err != nil || d < 0 {
					return reasonf("bad busy_timeout %q: want a duration such as 5s", v)
				}
				if s.busyTimeout != nil {
					return reasonf("option %q given twice", k)
				}
				s.busyTimeout = &d
			default:
				return reasonf("unknown option %q for sqlite: (it takes busy_timeout)", k)
			}
		}
	}
	return nil
}

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

func (p *parser) parseOptions(s *Spec, query string) error {
	for _, kv := range strings.Split(query, "&") {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "sentinel_password") || strings.HasPrefix(k, "password") {
			p.secrets = append(p.secrets, v)
			if d, err := url.QueryUnescape(v); err == nil {
				p.secrets = append(p.secrets, d)
			}
		}
	}
	opts, err := splitQuery(query)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, kv := range opts {
		k, v := kv[0], kv[1]
		if seen[k] {
			return reasonf("option %q given twice", k)
		}
		seen[k] = true
		if why, ok := elsewhere[k]; ok {
			return reasonf("option %q not allowed: %s", k, why)
		}
		switch k {
		case "prefix":
			if v == "" {
				return reason("empty prefix")
			}
			if strings.ContainsAny(v, "{}") {
				return reason(`prefix holds "{" or "}", which would make it the Redis Cluster hash tag of every key`)
			}
			s.Prefix = v
		case "allow_eviction":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return reasonf("allow_eviction=%q: want true or false", v)
			}
			s.AllowEviction = b
		case "replicas":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return reasonf("replicas=%q: want a number of replicas >= 0", v)
			}
			s.Replicas = n
		case "replica_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return reasonf("replica_timeout=%q: want a positive duration such as 500ms", v)
			}
			s.ReplicaTimeout = d
		case "pipelining":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return reasonf("pipelining=%q: want a number of pipelines in flight >= 1 (0: off)", v)
			}
			s.Pipelining = n
			if n == 0 {
				s.Pipelining = -1
			}
		case "open_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return reasonf("open_timeout=%q: want a positive duration such as 5s", v)
			}
			s.OpenTimeout = d
		case "sentinel_username", "sentinel_password":
			if s.Kind != Sentinel {
				return reasonf("option %q applies to redis+sentinel:// only", k)
			}
			if k == "sentinel_username" {
				s.sentinelUser = v
			} else {
				s.sentinelPassword = v
			}
		default:
			s.options = append(s.options, [2]string{k, v})
		}
	}
	return nil
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

// String returns the URL in its canonical form with any password replaced
// by "xxxxx". Parse reads it back to the same Spec, less the password.
func (s *Spec) String() string { return s.format(true) }

func (s *Spec) format(redact bool) string {
	switch s.Kind {
	case Memory:
		return "memory:"
	case SQLite:
		u := SQLiteURL(s.Path)
		if s.busyTimeout != nil {
			u += "?busy_timeout=" + s.busyTimeout.String()
		}
		return u
	}
	var b strings.Builder
	b.WriteString(s.scheme)
	b.WriteString("://")
	if s.Username != "" || s.hasPassword {
		pass := s.password
		if redact {
			pass = "xxxxx"
		}
		u := url.User(s.Username)
		if s.hasPassword {
			u = url.UserPassword(s.Username, pass)
		}
		b.WriteString(u.String())
		b.WriteByte('@')
	}
	b.WriteString(strings.Join(s.Addrs, ","))
	switch {
	case s.Kind == Sentinel:
		b.WriteString("/" + url.PathEscape(s.Master))
		if s.DB != 0 {
			b.WriteString("/" + strconv.Itoa(s.DB))
		}
	case s.Kind == Redis && s.DB != 0:
		b.WriteString("/" + strconv.Itoa(s.DB))
	}
	q := url.Values{}
	for _, kv := range s.options {
		q.Add(kv[0], kv[1])
	}
	if s.Prefix != "" {
		q.Set("prefix", s.Prefix)
	}
	if s.AllowEviction {
		q.Set("allow_eviction", "true")
	}
	if s.Replicas > 0 {
		q.Set("replicas", strconv.Itoa(s.Replicas))
	}
	if s.ReplicaTimeout > 0 {
		q.Set("replica_timeout", s.ReplicaTimeout.String())
	}
	if s.Pipelining != 0 {
		q.Set("pipelining", strconv.Itoa(max(s.Pipelining, 0)))
	}
	if s.OpenTimeout > 0 {
		q.Set("open_timeout", s.OpenTimeout.String())
	}
	if s.sentinelUser != "" {
		q.Set("sentinel_username", s.sentinelUser)
	}
	if s.sentinelPassword != "" {
		if redact {
			q.Set("sentinel_password", "xxxxx")
		} else {
			q.Set("sentinel_password", s.sentinelPassword)
		}
	}
	if len(q) > 0 {
		b.WriteByte('?')
		b.WriteString(q.Encode())
	}
	return b.String()
}

// Redact returns rawURL with anything that may be a password replaced by
// "xxxxx": the userinfo's password (up to the URL's last "@", so an
// unescaped "/" or "?" in it is still hidden) and the values of password
// options. It works on malformed URLs too: use it to print a URL a user gave.
// A URL missing its "//" (redis:/:PASSWORD@HOST, redis:PASSWORD@HOST) still
// has what comes before its last "@" hidden; see passwordSpan.
func Redact(rawURL string) string {
	out := rawURL
	if i, j, ok := passwordSpan(out); ok {
		out = out[:i] + "xxxxx" + out[j:]
	}
	for _, key := range []string{"sentinel_password=", "password="} {
		var b strings.Builder
		s := out
		for {
			j := strings.Index(s, key)
			if j < 0 {
				b.WriteString(s)
				break
			}
			b.WriteString(s[:j+len(key)])
			s = s[j+len(key):]
			end := strings.IndexAny(s, "&#")
			if end < 0 {
				end = len(s)
			}
			if s[:end] != "xxxxx" && end > 0 {
				b.WriteString("xxxxx")
			} else {
				b.WriteString(s[:end])
			}
			s = s[end:]
		}
		out = b.String()
	}
	// The same secret anywhere else in the URL (pasted into an option, say).
	return scrub(out, secretsOf(rawURL))
}

// secretsOf returns what Redact hides in rawURL, raw and percent-decoded.
func secretsOf(rawURL string) []string {
	var out []string
	add := func(s string) {
		out = append(out, s)
		if d, err := url.PathUnescape(s); err == nil {
			out = append(out, d)
		}
		if d, err := url.QueryUnescape(s); err == nil {
			out = append(out, d)
		}
	}
	if i, j, ok := passwordSpan(rawURL); ok {
		add(rawURL[i:j])
	}
	for _, key := range []string{"sentinel_password=", "password="} {
		s := rawURL
		for {
			j := strings.Index(s, key)
			if j < 0 {
				break
			}
			s = s[j+len(key):]
			end := strings.IndexAny(s, "&#")
			if end < 0 {
				end = len(s)
			}
			add(s[:end])
			s = s[end:]
		}
	}
	return out
}

// passwordSpan returns where rawURL's password is, rawURL[i:j], if it may
// hold one: the userinfo ends at the last "@" (a password may hold "@", "/"
// or "?" unescaped), and what rawURL is otherwise does not matter, so that a
// malformed URL is redacted as well as a good one.
//
//   - SCHEME://USER:PASSWORD@...: the password is between the userinfo's
//     first ":" and the "@". SCHEME://USER@... holds no password.
//   - SCHEME:[/ or \ ...]USER:PASSWORD@... (the "//" missing or mistyped):
//     the same. Without a ":" after the scheme's, as in SCHEME:PASSWORD@...,
//     the scheme's ":" may have been meant as the separator, so all of it up
//     to the "@" is hidden; except after sqlite:, whose PATH may hold an "@".
//   - No scheme: USER:PASSWORD@... as above; NAME@... holds no password.
func passwordSpan(rawURL string) (i, j int, ok bool) {
	at := strings.LastIndexByte(rawURL, '@')
	if at < 0 {
		return 0, 0, false
	}
	head := rawURL[:at]
	start, afterScheme := 0, false
	if scheme, rest, found := strings.Cut(head, ":"); found && validScheme(scheme) {
		start = len(scheme) + 1
		if strings.HasPrefix(rest, "//") {
			start += 2
		} else {
			for start < len(head) && (head[start] == '/' || head[start] == '\\') {
				start++
			}
			afterScheme = !strings.EqualFold(scheme, "sqlite")
		}
	}
	if c := strings.IndexByte(head[start:], ':'); c >= 0 {
		return start + c + 1, at, true
	}
	if afterScheme && start < at {
		return start, at, true
	}
	return 0, 0, false
}

// scrub replaces every secret in msg by "xxxxx", longest first.
func scrub(msg string, secrets []string) string {
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		// Shorter strings would mangle the message; no message quotes a
		// password anyway: this is a second line of defence.
		if len(s) >= 3 && s != "xxxxx" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return msg
}
