package storeurl

import (
	"fmt"
	"net/url"
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
