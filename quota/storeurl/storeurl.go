// Package storeurl opens a quota.Store from a URL, so programs and the
// quotactl CLI can name their store in one string (a flag, an environment
// variable such as QUOTA_STORE, a config file).
//
// The forms, by scheme (schemes are case-insensitive):
//
//	memory:
//	    A new, empty quota.MemoryStore: one process, nothing kept.
//
//	sqlite:PATH
//	sqlite:///ABS/PATH
//	    An SQLite database file (quota/sqlitestore), created on first use.
//	    A relative PATH is relative to the working directory. PATH is
//	    percent-decoded: write "?" as %3F, "#" as %23 and "%" as %25.
//	    sqlite://HOST/... is an error: a database file has no host. One
//	    option: ?busy_timeout=10s, how long a write waits for another
//	    process's lock (sqlitestore.WithBusyTimeout; default 5s). A file
//	    that is not an SQLite database is an error and is left untouched.
//
//	redis://[USER:PASSWORD@]HOST[:PORT][/DB]
//	rediss://[USER:PASSWORD@]HOST[:PORT][/DB]
//	    One Redis server (quota/redisstore); rediss uses TLS. PORT defaults
//	    to 6379, DB to 0.
//
//	redis+sentinel://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]
//	rediss+sentinel://...
//	    The master named MASTER, found through the listed Sentinels (a
//	    failover client). PORT defaults to 26379. USER and PASSWORD
//	    authenticate to the master and its replicas; if the Sentinels need
//	    a password of their own, give it as ?sentinel_password= (and
//	    ?sentinel_username=).
//
//	redis+cluster://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]
//	rediss+cluster://...
//	    A Redis Cluster, from one or more seed nodes. PORT defaults to
//	    6379; a cluster has no database number, so there is no path.
//
// The Redis forms take query options: prefix= sets the key prefix
// (redisstore.WithPrefix; default "quota:"; no "{" or "}");
// allow_eviction=true accepts a server whose maxmemory-policy may evict the
// limiter's keys, which Open otherwise refuses (redisstore.Open,
// redisstore.ErrUnsafeConfig); replicas=N with replica_timeout=D (default
// 1s) waits for N replicas to acknowledge each decision
// (redisstore.WithReplicas); pipelining=N keeps at most N pipelines in
// flight for the decisions of concurrent callers (redisstore.WithPipelining;
// default redisstore.DefaultLanes; pipelining=0 sends each decision alone);
// open_timeout=D (default 5s,
// DefaultOpenTimeout) bounds how long Open waits for its checks; and
// go-redis's
// connection options by their snake_case names (dial_timeout=2s,
// read_timeout=1s, pool_size=20, max_retries=1, protocol=2, skip_verify=true
// for rediss, ...), as go-redis's ParseURL documents. Options that the URL
// already says elsewhere (addr, db, master_name, username, password) are
// errors, so every setting has exactly one spelling. An unknown option is an
// error naming it.
//
// Percent-encode reserved characters in a user name or password ("@" may
// stay as is: the userinfo ends at the last "@" before the query).
// Passwords never appear in errors or in Spec.String; use Redact to print a
// URL a user gave.
//
// Open, for a Redis form, makes a client that the returned store owns:
// closing the store closes the client. It checks the server answers (PING)
// before returning, so a wrong address fails at once, with an error
// wrapping quota.ErrStoreUnavailable, and that its eviction policy cannot
// drop the limiter's keys (an error wrapping redisstore.ErrUnsafeConfig
// that names maxmemory-policy, unless allow_eviction=true). These checks
// take at most open_timeout (default 5s): a server that does not answer
// fails Open then, saying so, where the client's own retries of dial
// attempts could take minutes. For a Sentinel form, Open first asks every
// Sentinel for the master's address itself (one connection attempt each,
// no retries): a master name that no Sentinel that answered monitors gives
// an error wrapping ErrUnknownMaster (and quota.ErrStoreUnavailable) that
// names the master and what each Sentinel monitors; Sentinels that cannot
// be asked are named with why. Every malformed URL gives an error
// wrapping quota.ErrInvalid that names what is wrong (unknown scheme, missing
// path, bad host list, ...).
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/quotactl/quotactl/quota"
)

// Kind is the kind of store a URL names.
type Kind string

// The kinds of store.
const (
	Memory   Kind = "memory"   // memory:
	SQLite   Kind = "sqlite"   // sqlite:PATH
	Redis    Kind = "redis"    // redis:// and rediss://
	Sentinel Kind = "sentinel" // redis+sentinel:// and rediss+sentinel://
	Cluster  Kind = "cluster"  // redis+cluster:// and rediss+cluster://
)

// Open opens the store rawURL names (see the package doc for the forms).
// The caller closes it. A malformed URL gives an error wrapping
// quota.ErrInvalid; a store that cannot be opened or reached gives one
// wrapping quota.ErrStoreUnavailable (or the backend's own error, such as
// sqlitestore's for a file that is not an SQLite database). Errors never
// contain a password.
func Open(ctx context.Context, rawURL string) (quota.Store, error) {
	s, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return s.Open(ctx)
}

// OpenReadOnly opens the store rawURL names for inspection only, as
// quotactl's status, list, history, jobs and costs estimate do. An SQLite
// file is opened read-only (sqlitestore.WithReadOnly): nothing is written
// or created, so a user who may only read the file can inspect it, and a
// missing file is an error wrapping quota.ErrNotFound instead of a new
// database. memory: is a new, empty store, as with Open. The Redis forms
// open as with Open: Redis has no read-only mode for the store's scripts,
// whose reads also drop expired entries (housekeeping that changes no
// count).
func OpenReadOnly(ctx context.Context, rawURL string) (quota.Store, error) {
	s, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return s.OpenReadOnly(ctx)
}

// Default returns the store URL to use when none is given:
// "sqlite:" + $XDG_STATE_HOME/quotactl/quota.db, or, when XDG_STATE_HOME is
// unset or not an absolute path, ~/.local/state/quotactl/quota.db. It
// creates the quotactl directory (mode 0700) if it does not exist yet.
func Default() (string, error) {
	return defaultURL(os.Getenv, os.UserHomeDir)
}

// DefaultPath returns the SQLite file Default names, without creating
// anything: for a command that only reads, to say that no store exists yet.
func DefaultPath() (string, error) {
	return defaultPath(os.Getenv, os.UserHomeDir)
}

func defaultPath(getenv func(string) string, home func() (string, error)) (string, error) {
	dir := getenv("XDG_STATE_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		h, err := home()
		if err != nil {
			return "", fmt.Errorf("storeurl: default store: no state directory: %w", err)
		}
		if h == "" {
			return "", errors.New("storeurl: default store: no state directory: home directory unknown")
		}
		dir = filepath.Join(h, ".local", "state")
	}
	return filepath.Join(dir, "quotactl", "quota.db"), nil
}

func defaultURL(getenv func(string) string, home func() (string, error)) (string, error) {
	path, err := defaultPath(getenv, home)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("storeurl: default store: %w", err)
	}
	return SQLiteURL(path), nil
}

// SQLiteURL returns the sqlite: URL of the database file at path, escaping
// the characters the URL form would otherwise read as syntax.
func SQLiteURL(path string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23")
	if strings.HasPrefix(path, "//") {
		// sqlite://... would read as a host: give an empty one.
		return "sqlite://" + r.Replace(path)
	}
	return "sqlite:" + r.Replace(path)
}
