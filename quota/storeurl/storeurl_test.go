package storeurl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

func TestParseValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url  string
		want Spec // compared on exported fields
		// canonical is String()'s form when it differs from url.
		canonical string
	}{
		{url: "memory:", want: Spec{Kind: Memory}},
		{url: "MEMORY://", want: Spec{Kind: Memory}, canonical: "memory:"},
		{url: "sqlite:quota.db", want: Spec{Kind: SQLite, Path: "quota.db"}},
		{url: "sqlite:/var/lib/q/quota.db", want: Spec{Kind: SQLite, Path: "/var/lib/q/quota.db"}},
		{url: "sqlite:///var/lib/q/quota.db", want: Spec{Kind: SQLite, Path: "/var/lib/q/quota.db"}, canonical: "sqlite:/var/lib/q/quota.db"},
		{url: "sqlite://localhost/abs.db", want: Spec{Kind: SQLite, Path: "/abs.db"}, canonical: "sqlite:/abs.db"},
		{url: "sqlite:dir/my%20file%3F.db", want: Spec{Kind: SQLite, Path: "dir/my file?.db"}, canonical: "sqlite:dir/my file%3F.db"},
		{url: "sqlite:100%25.db", want: Spec{Kind: SQLite, Path: "100%.db"}},
		{url: "sqlite:q.db?busy_timeout=10s", want: Spec{Kind: SQLite, Path: "q.db"}, canonical: "sqlite:q.db?busy_timeout=10s"},
		{url: "redis://localhost:6379", want: Spec{Kind: Redis, Addrs: []string{"localhost:6379"}}},
		{url: "redis://127.0.0.1", want: Spec{Kind: Redis, Addrs: []string{"127.0.0.1:6379"}}, canonical: "redis://127.0.0.1:6379"},
		{url: "redis://127.0.0.1:6380/3", want: Spec{Kind: Redis, Addrs: []string{"127.0.0.1:6380"}, DB: 3}},
		{url: "redis://127.0.0.1:6380/0", want: Spec{Kind: Redis, Addrs: []string{"127.0.0.1:6380"}}, canonical: "redis://127.0.0.1:6380"},
		{url: "redis://[::1]:7000/", want: Spec{Kind: Redis, Addrs: []string{"[::1]:7000"}}, canonical: "redis://[::1]:7000"},
		{url: "redis://[::1]", want: Spec{Kind: Redis, Addrs: []string{"[::1]:6379"}}, canonical: "redis://[::1]:6379"},
		{
			url:       "redis://alice:s3cr%2Ft@cache.internal:6379/2?prefix=ingest:&dial_timeout=2s",
			want:      Spec{Kind: Redis, Addrs: []string{"cache.internal:6379"}, DB: 2, Username: "alice", Prefix: "ingest:"},
			canonical: "redis://alice:xxxxx@cache.internal:6379/2?dial_timeout=2s&prefix=ingest%3A",
		},
		{
			url:       "redis://:p@ss:word@h:1",
			want:      Spec{Kind: Redis, Addrs: []string{"h:1"}},
			canonical: "redis://:xxxxx@h:1",
		},
		{url: "rediss://user@h.example:6380", want: Spec{Kind: Redis, TLS: true, Addrs: []string{"h.example:6380"}, Username: "user"}},
		{
			url:       "redis+sentinel://:pw@s1:26379,s2,[::1]:26380/mymaster/4?sentinel_password=sp",
			want:      Spec{Kind: Sentinel, Addrs: []string{"s1:26379", "s2:26379", "[::1]:26380"}, Master: "mymaster", DB: 4},
			canonical: "redis+sentinel://:xxxxx@s1:26379,s2:26379,[::1]:26380/mymaster/4?sentinel_password=xxxxx",
		},
		{url: "rediss+sentinel://s1:1/m", want: Spec{Kind: Sentinel, TLS: true, Addrs: []string{"s1:1"}, Master: "m"}},
		{url: "redis+cluster://n1:7000,n2:7001,n3:7002", want: Spec{Kind: Cluster, Addrs: []string{"n1:7000", "n2:7001", "n3:7002"}}},
		{url: "redis+cluster://n1", want: Spec{Kind: Cluster, Addrs: []string{"n1:6379"}}, canonical: "redis+cluster://n1:6379"},
		{
			url:       "rediss+cluster://u:p@n1:7000/?prefix=q&read_timeout=1s",
			want:      Spec{Kind: Cluster, TLS: true, Addrs: []string{"n1:7000"}, Username: "u", Prefix: "q"},
			canonical: "rediss+cluster://u:xxxxx@n1:7000?prefix=q&read_timeout=1s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			s, err := Parse(tt.url)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if s.Kind != tt.want.Kind || s.TLS != tt.want.TLS || s.Path != tt.want.Path ||
				!slices.Equal(s.Addrs, tt.want.Addrs) || s.Master != tt.want.Master || s.DB != tt.want.DB ||
				s.Username != tt.want.Username || s.Prefix != tt.want.Prefix {
				t.Errorf("Parse = %+v\nwant   %+v", *s, tt.want)
			}
			canon := tt.canonical
			if canon == "" {
				canon = tt.url
			}
			if got := s.String(); got != canon {
				t.Errorf("String() = %q, want %q", got, canon)
			}
			// The unredacted form reads back to the same spec.
			again, err := Parse(s.format(false))
			if err != nil {
				t.Fatalf("Parse(%q): %v", s.format(false), err)
			}
			if again.format(false) != s.format(false) {
				t.Errorf("round trip: %q != %q", again.format(false), s.format(false))
			}
		})
	}
}

func TestParseRedisOptions(t *testing.T) {
	t.Parallel()
	s, err := Parse("redis://bob:hunter22@h:6379/5?dial_timeout=2s&pool_size=7&protocol=2")
	if err != nil {
		t.Fatal(err)
	}
	o := s.simple
	if o.Addr != "h:6379" || o.DB != 5 || o.Username != "bob" || o.Password != "hunter22" ||
		o.DialTimeout != 2*time.Second || o.PoolSize != 7 || o.Protocol != 2 || o.TLSConfig != nil {
		t.Errorf("options = %+v", o)
	}

	s, err = Parse("rediss+sentinel://u:pw@s1:26379,s2:26380/main/1?sentinel_username=su&sentinel_password=sp&read_timeout=3s")
	if err != nil {
		t.Fatal(err)
	}
	f := s.failover
	if f.MasterName != "main" || !slices.Equal(f.SentinelAddrs, []string{"s1:26379", "s2:26380"}) || f.DB != 1 ||
		f.Username != "u" || f.Password != "pw" || f.SentinelUsername != "su" || f.SentinelPassword != "sp" ||
		f.ReadTimeout != 3*time.Second || f.TLSConfig == nil {
		t.Errorf("failover options = %+v", f)
	}

	s, err = Parse("redis+cluster://:pw@n1:7000,n2:7001?max_redirects=2")
	if err != nil {
		t.Fatal(err)
	}
	c := s.cluster
	if !slices.Equal(c.Addrs, []string{"n1:7000", "n2:7001"}) || c.Password != "pw" || c.MaxRedirects != 2 || c.TLSConfig != nil {
		t.Errorf("cluster options = %+v", c)
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url    string
		reason string // a part of the error that names the problem
	}{
		{"", "empty URL"},
		{"   ", "empty URL"},
		{"/var/lib/quota.db", `missing scheme; for a database file write "sqlite:/var/lib/quota.db"`},
		{"quota", "missing scheme"},
		{"postgres://h/db", `unknown scheme "postgres"`},
		{"http://h", `unknown scheme "http"`},
		{"memory:x", "memory: takes nothing"},
		{"memory:?a=b", "memory: takes nothing"},
		{"sqlite:", "missing path"},
		{"sqlite://", "missing path"},
		{"sqlite:///", "missing path"},
		{"sqlite://host/x.db", `has no host ("host")`},
		{"sqlite://quota.db", `has no host ("quota.db")`},
		{"sqlite:a%zz.db", "bad percent-escape in path"},
		{"sqlite:a#b.db", `unexpected "#"`},
		{"sqlite:a.db?busy=1", `unknown option "busy" for sqlite:`},
		{"sqlite:a.db?busy_timeout=soon", `bad busy_timeout "soon"`},
		{"sqlite:a.db?busy_timeout=-1s", `bad busy_timeout "-1s"`},
		{"sqlite:a.db?busy_timeout=1s&busy_timeout=2s", `option "busy_timeout" given twice`},
		{"redis://h:1?prefix=a{b}", `prefix holds "{" or "}"`},
		{"sqlite:a%00.db", "NUL"},
		{"redis:", "missing // after redis:"},
		{"redis:h:1", "missing // after redis:"},
		{"redis://", "missing host"},
		{"redis:///0", "missing host"},
		{"redis://u:pw@", "missing host"},
		{"redis://h:0", `port "0" is not a number from 1 to 65535`},
		{"redis://h:65536", `port "65536"`},
		{"redis://h:", `port ""`},
		{"redis://h:x", `port "x"`},
		{"redis://h:+1", `port "+1"`},
		{"redis://h:06379", `port "06379"`},
		{"redis://h1:1,h2:2", "bad host list: redis:// takes one host"},
		{"redis://::1", "put an IPv6 address in brackets"},
		{"redis://[::1", "missing ]"},
		{"redis://[::1]x", "junk after ]"},
		{"redis://[1.2.3.4]:1", "not an IPv6 address"},
		{"redis://h%41:1", `bad character '%' in host name`},
		{"redis://h:1/x", `bad database number "x"`},
		{"redis://h:1/-1", `bad database number "-1"`},
		{"redis://h:1/1/2", `unexpected path "/1/2"`},
		{"redis://h:1//", `unexpected path "//"`},
		{"redis://h:1/#f", `unexpected "#"`},
		{"redis://h:1?db=2", `option "db" not allowed: give the database number as the path`},
		{"redis://h:1?addr=h2:2", `option "addr" not allowed`},
		{"redis://h:1?password=pw", `option "password" not allowed`},
		{"redis://h:1?username=u", `option "username" not allowed`},
		{"redis://h:1?prefix=", "empty prefix"},
		{"redis://h:1?prefix=a&prefix=b", `option "prefix" given twice`},
		{"redis://h:1?bogus=1", "bad option: redis: unexpected option: bogus"},
		{"redis://h:1?dial_timeout=soon", "bad option: redis: invalid dial_timeout duration"},
		{"redis://h:1?%zz=1", "bad percent-escape in an option name"},
		{"redis://h:1?a=%zz", `bad percent-escape in option "a"`},
		{"redis://h:1?=1", "option with an empty name"},
		{"redis://h:1?sentinel_password=x", `option "sentinel_password" applies to redis+sentinel:// only`},
		{"redis://u%zz:pw@h:1", "bad percent-escape in the user name"},
		{"redis+sentinel://s1:1", "missing master name"},
		{"redis+sentinel://s1:1/", "missing master name"},
		{"redis+sentinel://s1:1,/m", "bad host list: empty host"},
		{"redis+sentinel://s1:1,s1:1/m", "bad host list: s1:1 listed twice"},
		{"redis+sentinel://s1/m/x", `bad database number "x"`},
		{"redis+sentinel://s1/m/1/2", `unexpected path "/m/1/2"`},
		{"redis+sentinel://s1/m?master_name=n", `option "master_name" not allowed`},
		{"redis+cluster://", "missing host"},
		{"redis+cluster://n1:1,,n2:2", "bad host list: empty host"},
		{"redis+cluster://n1:1,n2:x", `bad host list: host "n2:x": port "x"`},
		{"redis+cluster://n1:1/0", "a cluster has no database number"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			_, err := Parse(tt.url)
			if err == nil {
				t.Fatalf("Parse(%q) = nil error, want one naming %q", tt.url, tt.reason)
			}
			if !errors.Is(err, quota.ErrInvalid) {
				t.Errorf("error %v does not wrap quota.ErrInvalid", err)
			}
			var ue *Error
			if !errors.As(err, &ue) {
				t.Fatalf("error %T is not *Error", err)
			}
			if !strings.Contains(ue.Reason, tt.reason) {
				t.Errorf("error %q does not name %q", err, tt.reason)
			}
			if !strings.HasPrefix(err.Error(), "storeurl: bad store URL ") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line starting with the package", err)
			}
		})
	}
}

// TestNoPasswordInErrors checks that a password never shows in an error or
// in String, whatever else is wrong with the URL.
func TestNoPasswordInErrors(t *testing.T) {
	t.Parallel()
	const pw = "Tr0ub4dor"
	urls := []string{
		"redis://u:" + pw + "@h:99999",
		"redis://u:" + pw + "@h:1/zz",
		"redis://u:" + pw + "@h:1?bogus=" + pw,
		"redis://u:" + pw + "@h1,h2",
		"redis://:" + pw + "@",
		"redis://u:" + pw + "/x@h:1",       // unescaped "/" in the password
		"redis://u:" + pw + "?x@h:1",       // unescaped "?"
		"redis://u:" + pw + "#x@h:1",       // unescaped "#"
		"redis://u:" + pw + ":" + pw + "@", // ":" in the password
		"rediss+sentinel://u:" + pw + "@s1/m?sentinel_password=" + pw + "&x=1",
		"redis+sentinel://s1/m?sentinel_password=" + pw + "&sentinel_password=" + pw,
		"redis+cluster://:" + pw + "@n1:1/0",
		"redis://h:1?password=" + pw,
		"foo://u:" + pw + "@h",
		"redis://u:" + strings.ReplaceAll(pw, "4", "%34") + "@h:bad",
		"redis://u:%zz" + pw + "@h:1",
	}
	for _, u := range urls {
		_, err := Parse(u)
		if err == nil {
			t.Errorf("Parse(%q): no error", u)
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("Parse(%q) error shows the password: %v", u, err)
		}
		if r := Redact(u); strings.Contains(r, pw) {
			t.Errorf("Redact(%q) = %q", u, r)
		}
	}
	s, err := Parse("redis+sentinel://u:" + pw + "@s1/m?sentinel_password=" + pw)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.String(), pw) || !strings.Contains(s.format(false), pw) {
		t.Errorf("String() = %q, format(false) = %q", s.String(), s.format(false))
	}
}

// TestNoPasswordInMalformedURLs: a URL that does not parse far enough to
// find its userinfo (the "//" missing or mistyped, an unknown scheme) still
// shows no password in Parse's error, in Open's and OpenReadOnly's, or in
// Redact; and the error still says what is wrong.
func TestNoPasswordInMalformedURLs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url, secret string
		redacted    string // Redact(url)
		reason      string // a part of the error that names the problem
	}{
		{"redis:/:s3cretLEAK11@127.0.0.1:7412/0", "s3cretLEAK11", "redis:/:xxxxx@127.0.0.1:7412/0", "missing // after redis:"},
		{"redis:pw-LEAK@host", "pw-LEAK", "redis:xxxxx@host", "missing // after redis:"},
		{"rediss:/user:pw-LEAK@h:1/0", "pw-LEAK", "rediss:/user:xxxxx@h:1/0", "missing // after rediss:"},
		{"redis:user:pw-LEAK@h", "pw-LEAK", "redis:user:xxxxx@h", "missing // after redis:"},
		{"REDIS:/:pw-LEAK@h", "pw-LEAK", "REDIS:/:xxxxx@h", "missing // after redis:"},
		{`redis:\\:pw-LEAK@h`, "pw-LEAK", `redis:\\:xxxxx@h`, "missing // after redis:"},
		{"redis:/:pw/LEAK?x@h:1", "pw/LEAK?x", "redis:/:xxxxx@h:1", "missing // after redis:"},
		{"redis:/:pw@LEAK@h:1", "pw@LEAK", "redis:/:xxxxx@h:1", "missing // after redis:"},
		{"redis:/:pw%2DLEAK@h:1", "pw-LEAK", "redis:/:xxxxx@h:1", "missing // after redis:"},
		{"redis+sentinel:/:pw-LEAK@s1/m", "pw-LEAK", "redis+sentinel:/:xxxxx@s1/m", "missing // after redis+sentinel:"},
		{"rediss+cluster:pw-LEAK@n1:7000", "pw-LEAK", "rediss+cluster:xxxxx@n1:7000", "missing // after rediss+cluster:"},
		{"redis:/u:pw-LEAK@h:1?password=pw2-LEAK", "pw2-LEAK", "redis:/u:xxxxx@h:1?password=xxxxx", "missing // after redis:"},
		{"foo:pw-LEAK@h", "pw-LEAK", "foo:xxxxx@h", `unknown scheme "foo"`},
		{"user:pw-LEAK@h:1", "pw-LEAK", "user:xxxxx@h:1", `unknown scheme "user"`},
		{"memory:pw-LEAK@h", "pw-LEAK", "memory:xxxxx@h", "memory: takes nothing"},
		{"/u:pw-LEAK@h", "pw-LEAK", "/u:xxxxx@h", "missing scheme"},
		{" redis://:pw-LEAK@h", "pw-LEAK", " redis:xxxxx@h", "missing scheme"},
		{"sqlite://u:pw-LEAK@h/q.db", "pw-LEAK", "sqlite://u:xxxxx@h/q.db", "a database file has no host"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			if got := Redact(tt.url); got != tt.redacted {
				t.Errorf("Redact(%q) = %q, want %q", tt.url, got, tt.redacted)
			}
			_, err := Parse(tt.url)
			if err == nil {
				t.Fatalf("Parse(%q): no error", tt.url)
			}
			if strings.Contains(err.Error(), tt.secret) {
				t.Errorf("Parse(%q) error shows the password: %v", tt.url, err)
			}
			if !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("Parse(%q) = %v, want ErrInvalid naming %q", tt.url, err, tt.reason)
			}
			for name, open := range map[string]func(context.Context, string) (quota.Store, error){"Open": Open, "OpenReadOnly": OpenReadOnly} {
				st, err := open(context.Background(), tt.url)
				if err == nil {
					st.Close()
					t.Fatalf("%s(%q): no error", name, tt.redacted)
				}
				if strings.Contains(err.Error(), tt.secret) {
					t.Errorf("%s(%q) error shows the password: %v", name, tt.redacted, err)
				}
			}
		})
	}
}

// TestRedactKeepsPaths: what cannot be a password stays as written, so
// errors still show the file or user meant.
func TestRedactKeepsPaths(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"sqlite:/var/lib/q@2024.db",
		"sqlite:backups/q@2024.db",
		"/var/lib/q@2024.db",
		"redis://user@h:1",
		"redis:/h:1/0",
	} {
		if got := Redact(u); got != u {
			t.Errorf("Redact(%q) = %q, want it unchanged", u, got)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"redis://u:pw@h:1/2", "redis://u:xxxxx@h:1/2"},
		{"redis://:pw@h", "redis://:xxxxx@h"},
		{"redis://user@h", "redis://user@h"},
		{"redis://h:1", "redis://h:1"},
		{"sqlite:/a/b.db", "sqlite:/a/b.db"},
		{"redis://u:a/b?c@h", "redis://u:xxxxx@h"},
		{"redis+sentinel://s/m?sentinel_password=sp&x=1", "redis+sentinel://s/m?sentinel_password=xxxxx&x=1"},
		{"nonsense password=pw", "nonsense password=xxxxx"},
	}
	for _, tt := range tests {
		if got := Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDefault(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	state := filepath.Join(t.TempDir(), "state dir?")
	homeFn := func() (string, error) { return home, nil }
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "XDG_STATE_HOME" {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name, xdg string
		wantPath  string
	}{
		{"xdg", state, filepath.Join(state, "quotactl", "quota.db")},
		{"unset", "", filepath.Join(home, ".local", "state", "quotactl", "quota.db")},
		{"relative xdg ignored", "rel/state", filepath.Join(home, ".local", "state", "quotactl", "quota.db")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := defaultURL(env(tt.xdg), homeFn)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Parse(u)
			if err != nil {
				t.Fatalf("Parse(Default() = %q): %v", u, err)
			}
			if s.Kind != SQLite || s.Path != tt.wantPath {
				t.Errorf("Default() = %q -> %s %q, want sqlite %q", u, s.Kind, s.Path, tt.wantPath)
			}
			fi, err := os.Stat(filepath.Dir(tt.wantPath))
			if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Errorf("state directory: %v, %v", fi, err)
			}
		})
	}
	_, err := defaultURL(env(""), func() (string, error) { return "", errors.New("no home") })
	if err == nil || !strings.Contains(err.Error(), "no state directory") {
		t.Errorf("no home: err = %v", err)
	}
}

func TestDefaultFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", dir)
	u, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if want := "sqlite:" + filepath.Join(dir, "quotactl", "quota.db"); u != want {
		t.Errorf("Default() = %q, want %q", u, want)
	}
}

func TestOpenMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := Open(ctx, "memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok := st.(*quota.MemoryStore); !ok {
		t.Fatalf("Open(memory:) = %T", st)
	}
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 3, Window: quota.Sliding(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx, quota.Credential{Secret: "k"}, quota.Units("units", 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx, quota.Credential{Secret: "k"}, quota.Units("units", 1)); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("second take: %v, want ErrExhausted", err)
	}
}

func TestOpenUnreachableRedis(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, u := range []string{
		"redis://:Sekr1tPass@127.0.0.1:1/0?max_retries=0",
		"redis+cluster://:Sekr1tPass@127.0.0.1:1?max_retries=0",
	} {
		st, err := Open(ctx, u)
		if err == nil {
			st.Close()
			t.Fatalf("Open(%q) = nil error", u)
		}
		if !errors.Is(err, quota.ErrStoreUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("Open(%q) = %v, want ErrStoreUnavailable naming the address", Redact(u), err)
		}
		if strings.Contains(err.Error(), "Sekr1tPass") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	for _, u := range []string{"sqlite:/var/lib/quotactl/quota.db", "redis+sentinel://:pw@s1:26379,s2:26379/main/2?prefix=q:&dial_timeout=2s"} {
		b.Run(strings.SplitN(u, ":", 2)[0], func(b *testing.B) {
			for b.Loop() {
				if _, err := Parse(u); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
