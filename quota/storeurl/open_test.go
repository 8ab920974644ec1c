package storeurl

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

func TestMain(m *testing.M) { redistest.Main(m) }

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// charge takes cost units of "units" for secret through a limiter on st at
// t0, and returns the units left.
func charge(t *testing.T, st quota.Store, secret string, cost int64) int64 {
	t.Helper()
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Take(context.Background(), quota.Credential{Secret: secret, Label: "key"}, quota.Units("units", cost))
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return res.Remaining("units")
}

func TestOpenSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a dir", "quota?.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	for i, u := range []string{SQLiteURL(path), SQLiteURL(path) + "?busy_timeout=2s", "sqlite://" + SQLiteURL(path)[len("sqlite:"):]} {
		st, err := Open(ctx, u)
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		if _, ok := st.(*sqlitestore.Store); !ok {
			t.Errorf("Open(%q) = %T", u, st)
		}
		// The file keeps what each opening recorded.
		if left := charge(t, st, "k", 3); left != int64(10-3*(i+1)) {
			t.Errorf("opening %d: %d left", i, left)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database file: %v", err)
	}
}

func TestOpenNotADatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "notes.txt")
	content := bytes.Repeat([]byte("these are my notes, not a database\n"), 200)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := Open(context.Background(), "sqlite:"+path)
	if err == nil {
		st.Close()
		t.Fatal("Open on a text file: no error")
	}
	if !errors.Is(err, sqlitestore.ErrNotDatabase) || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want ErrNotDatabase naming %s", err, path)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, content) {
		t.Error("the file was modified")
	}
}

func TestOpenSQLiteMissingDirectory(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "q.db")
	st, err := Open(context.Background(), "sqlite:"+path)
	if err == nil {
		st.Close()
		t.Fatal("no error for a missing directory")
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want it to name %s", err, path)
	}
}

// sharedRedisURL returns a URL of the shared test Redis.
func sharedRedisURL(t *testing.T) string {
	if u := os.Getenv(redistest.EnvURL); u != "" {
		return u
	}
	_, addr := redistest.Shared(t)
	return "redis://" + addr
}

func withPrefix(u, prefix string) string {
	if strings.Contains(u, "?") {
		return u + "&prefix=" + prefix
	}
	return u + "?prefix=" + prefix
}

// keysUnder returns the keys under prefix.
func keysUnder(t *testing.T, c redis.UniversalClient, prefix string) []string {
	t.Helper()
	var keys []string
	ctx := context.Background()
	if cc, ok := c.(*redis.ClusterClient); ok {
		var mu sync.Mutex // ForEachMaster calls fn concurrently
		err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			ks, err := n.Keys(ctx, prefix+"*").Result()
			mu.Lock()
			keys = append(keys, ks...)
			mu.Unlock()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// checkRedis opens u, charges through it, checks the keys landed under the
// prefix (seen through check), and that Close closes the store's client.
func checkRedis(t *testing.T, u string, check redis.UniversalClient, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := Open(ctx, u)
	if err != nil {
		t.Fatalf("Open(%q): %v", Redact(u), err)
	}
	rs, ok := st.(*redisStore)
	if !ok {
		t.Fatalf("Open(%q) = %T", Redact(u), st)
	}
	if _, ok := st.(quota.StateStore); !ok {
		t.Error("the store is not a quota.StateStore")
	}
	if left := charge(t, st, "secret-"+prefix, 4); left != 6 {
		t.Errorf("%d left after charging 4 of 10", left)
	}
	if keys := keysUnder(t, check, prefix); len(keys) == 0 {
		t.Errorf("no keys under %q", prefix)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := rs.client.Ping(ctx).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("client after Close: Ping = %v, want redis.ErrClosed", err)
	}
}

func TestOpenRedis(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	checkRedis(t, withPrefix(sharedRedisURL(t), prefix), redistest.Client(t), prefix)
}

func TestOpenRedisSentinel(t *testing.T) {
	t.Parallel()
	s := redistest.NewSentinel(t)
	prefix := redistest.Prefix(t)
	u := "redis+sentinel://" + s.Sentinel.Addr() + "/" + s.Name + "?prefix=" + prefix + "&dial_timeout=5s"
	checkRedis(t, u, s.Master.Client(t), prefix)
}

// deadAddr returns a loopback address nothing listens on: a Sentinel that
// is down.
func deadAddr(t *testing.T) string {
	t.Helper()
	srv := redistest.Server(t)
	srv.Kill()
	return srv.Addr()
}

// TestOpenSentinelUnknownMaster: a master name no Sentinel monitors is said
// as such, naming the master, what each Sentinel that answered monitors,
// and the Sentinels that did not answer (before: "all sentinels specified
// in configuration are unreachable: redis: nil", which sent the operator to
// the network).
func TestOpenSentinelUnknownMaster(t *testing.T) {
	t.Parallel()
	s := redistest.NewSentinel(t)
	dead := deadAddr(t)
	u := "redis+sentinel://:Sekr1tPass@" + s.Sentinel.Addr() + "," + dead + "/nosuchmaster?sentinel_password=Sent1nelPass"
	st, err := Open(context.Background(), u)
	if err == nil {
		st.Close()
		t.Fatalf("Open(%s): no error", Redact(u))
	}
	t.Logf("Open(%s): %v", Redact(u), err)
	if !errors.Is(err, ErrUnknownMaster) || !errors.Is(err, quota.ErrStoreUnavailable) {
		t.Fatalf("Open with an unknown master = %v; want ErrUnknownMaster and ErrStoreUnavailable", err)
	}
	msg := err.Error()
	for _, want := range []string{`unknown master "nosuchmaster"`, s.Sentinel.Addr() + ` monitors "` + s.Name + `"`, dead + ": dial tcp"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	for _, bad := range []string{"unreachable", "Sekr1tPass", "Sent1nelPass"} {
		if strings.Contains(msg, bad) {
			t.Errorf("error says %q: %v", bad, err)
		}
	}
	// the same Sentinels with the right name open
	st, err = Open(context.Background(), "redis+sentinel://"+s.Sentinel.Addr()+","+dead+"/"+s.Name+"?prefix="+redistest.Prefix(t))
	if err != nil {
		t.Fatalf("Open with the master's name, one Sentinel down: %v", err)
	}
	st.Close()
}

// TestOpenSentinelUnreachable: Sentinels that are down, or hang, fail Open
// with an error naming each and why, within open_timeout, instead of the
// client's retries of retries (before: about 37 s for one Sentinel down,
// with go-redis's own log lines). The time it takes is not asserted: the
// error says which bound ran out.
func TestOpenSentinelUnreachable(t *testing.T) {
	t.Parallel()
	s := redistest.NewSentinel(t)
	hung := redistest.NewSentinel(t)
	if err := hung.Sentinel.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hung.Sentinel.Resume() })
	dead := deadAddr(t)
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"redis+sentinel://" + dead + "/" + s.Name, []string{`cannot ask the Sentinels for master "mymaster": ` + dead + ": dial tcp"}},
		{"redis+sentinel://" + dead + "," + hung.Sentinel.Addr() + "/" + s.Name + "?open_timeout=1s",
			[]string{dead + ": dial tcp", hung.Sentinel.Addr() + ": no answer within 1s (open_timeout)"}},
		// the Sentinel answers, the master it names does not
		{"redis+sentinel://" + s.Sentinel.Addr() + "/" + s.Name + "?open_timeout=1s", []string{`master "mymaster" at ` + s.Master.Addr()}},
	} {
		if strings.Contains(tc.url, s.Sentinel.Addr()) {
			s.Master.Kill()
		}
		st, err := Open(context.Background(), tc.url)
		if err == nil {
			st.Close()
			t.Fatalf("Open(%s): no error", tc.url)
		}
		t.Logf("Open(%s): %v", tc.url, err)
		if !errors.Is(err, quota.ErrStoreUnavailable) || errors.Is(err, ErrUnknownMaster) {
			t.Errorf("Open(%s) = %v; want ErrStoreUnavailable, not ErrUnknownMaster", tc.url, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Open(%s) = %v; want it to say %q", tc.url, err, w)
			}
		}
		if strings.Contains(err.Error(), "unreachable") {
			t.Errorf("Open(%s) = %v: go-redis's wording", tc.url, err)
		}
	}
}

// TestOpenTimeout: a server that accepts connections and answers nothing
// fails Open at open_timeout, saying so (before: the client's dial and read
// timeouts, retried: 102 s for a redis:// URL).
func TestOpenTimeout(t *testing.T) {
	t.Parallel()
	srv := redistest.Server(t)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Resume() })
	u := "redis://:Sekr1tPass@" + srv.Addr() + "?open_timeout=500ms"
	st, err := Open(context.Background(), u)
	if err == nil {
		st.Close()
		t.Fatal("Open of a hung server: no error")
	}
	if !errors.Is(err, quota.ErrStoreUnavailable) || !strings.Contains(err.Error(), "no answer within 500ms (open_timeout)") ||
		strings.Contains(err.Error(), "Sekr1tPass") {
		t.Fatalf("Open of a hung server = %v; want ErrStoreUnavailable, no answer within open_timeout", err)
	}
}

func TestOpenRedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t)
	prefix := redistest.Prefix(t)
	u := "redis+cluster://" + strings.Join(c.Addrs(), ",") + "?prefix=" + prefix
	checkRedis(t, u, c.Client(t), prefix)
}

func TestOpenRedisWrongPassword(t *testing.T) {
	t.Parallel()
	srv := redistest.Server(t, "--requirepass", "right-password")
	ctx := context.Background()
	u := "redis://:Wr0ngPassw0rd@" + srv.Addr() + "?max_retries=0"
	st, err := Open(ctx, u)
	if err == nil {
		st.Close()
		t.Fatal("Open with a wrong password: no error")
	}
	if !errors.Is(err, quota.ErrStoreUnavailable) || strings.Contains(err.Error(), "Wr0ngPassw0rd") {
		t.Errorf("err = %v", err)
	}
	st, err = Open(ctx, "redis://:right-password@"+srv.Addr())
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	if left := charge(t, st, "k", 1); left != 9 {
		t.Errorf("%d left", left)
	}
	st.Close()
}

// TestOpenRedisPipelining: the store pipelines the decisions concurrent
// callers make at once, DefaultLanes in flight (redisstore.WithPipelining),
// ?pipelining=N sets the lanes, and ?pipelining=0 sends every decision
// alone: seen on the client's side, none leaves in a pipeline however
// many callers decide at once.
func TestOpenRedisPipelining(t *testing.T) {
	t.Parallel()
	srv := redistest.Server(t)
	prefix := redistest.Prefix(t)
	for i, tt := range []struct {
		query string
		lanes int
	}{{"", redisstore.DefaultLanes}, {"&pipelining=2", 2}, {"&pipelining=0", 0}} {
		p := prefix + strconv.Itoa(i) + ":"
		st, err := Open(context.Background(), "redis://"+srv.Addr()+"?prefix="+p+tt.query)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.(*redisStore).Lanes(); got != tt.lanes {
			t.Errorf("?%s: %d lanes, want %d", tt.query, got, tt.lanes)
		}
		h := &pipedScripts{}
		st.(*redisStore).client.AddHook(redistest.Hook{Pipeline: h.pipeline})
		l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 1 << 20, Window: quota.Sliding(time.Hour)}},
			quota.WithClock(func() time.Time { return t0 }))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 20 {
					if _, err := l.Take(context.Background(), quota.Credential{Secret: "secret-" + p}, quota.Units("units", 1)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		st.Close()
		if n := h.n.Load(); tt.lanes == 0 && n > 0 {
			t.Errorf("?%s: %d decisions sent in pipelines, want none", tt.query, n)
		}
	}
}

// pipedScripts counts the script calls sent in pipelines.
type pipedScripts struct{ n atomic.Int64 }

func (h *pipedScripts) pipeline(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
	for _, c := range cmds {
		if c.Name() == "evalsha" {
			h.n.Add(1)
		}
	}
	return next(ctx, cmds)
}
