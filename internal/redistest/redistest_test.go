package redistest_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestPrefix(t *testing.T) {
	a, b := redistest.Prefix(t), redistest.Prefix(t)
	if a == b || !strings.HasPrefix(a, "qt:TestPrefix:") || strings.ContainsAny(a, "{} ") {
		t.Fatalf("prefixes %q and %q: want unique, named after the test, without braces", a, b)
	}
	t.Run("sub test{x}", func(t *testing.T) {
		if p := redistest.Prefix(t); !strings.HasPrefix(p, "qt:TestPrefix/sub_test_x_:") {
			t.Fatalf("subtest prefix %q", p)
		}
	})
}

func TestClient(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	key := redistest.Prefix(t) + "k"
	if err := c.Set(ctx, key, "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, key).Result(); err != nil || v != "v" {
		t.Fatalf("GET = %q, %v", v, err)
	}
	kind, addr := redistest.Shared(t)
	if addr == "" || (kind == redistest.KindMini) == redistest.IsReal(t) {
		t.Fatalf("Shared = %s %q, IsReal %v", kind, addr, redistest.IsReal(t))
	}
}

func TestServerKillRestart(t *testing.T) {
	ctx := context.Background()
	s := redistest.Server(t)
	t.Logf("Server kind: %s", s.Kind())
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptLoad(ctx, "return 7").Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := s.Ping(ctx); err == nil {
		t.Fatal("a killed server answers")
	}
	if err := c.Get(ctx, "k").Err(); err == nil {
		t.Fatal("a client's pooled connection still gets answers after Kill")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS after restart = %d, %v: data survived a kill without persistence", n, err)
	}
	sha := redisScriptSHA("return 7")
	if ok, err := c.ScriptExists(ctx, sha).Result(); err != nil || ok[0] {
		t.Fatalf("SCRIPT EXISTS after restart = %v, %v: scripts survived a kill", ok, err)
	}
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || s.IsReal() != (s.Kind() == redistest.KindServer) {
		t.Fatalf("Addr = %q, Kind %s, IsReal %v", s.Addr(), s.Kind(), s.IsReal())
	}
}

// TestServerPause: a paused server keeps connections open and answers
// nothing until Resume, then answers what it was sent.
func TestServerPause(t *testing.T) {
	ctx := context.Background()
	s := redistest.Server(t)
	// Only the context can end a call: the socket timeouts are an hour.
	hanging := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, ReadTimeout: time.Hour, WriteTimeout: time.Hour, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c := hanging()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	// A call on a pooled connection and one on a new connection both hang
	// until their deadline.
	for _, cl := range []*redis.Client{c, hanging()} {
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := cl.Get(dctx, "k").Err()
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
			t.Fatalf("GET on a paused server = %v, want a timeout", err)
		}
	}
	// A call sent while paused is answered after Resume.
	got := make(chan error, 1)
	fresh := s.Client(t)
	go func() { got <- fresh.Set(ctx, "k2", "v2", 0).Err() }()
	select {
	case err := <-got:
		t.Fatalf("SET answered while paused: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("SET sent while paused, after Resume: %v", err)
	}
	if v, err := fresh.Get(ctx, "k2").Result(); err != nil || v != "v2" {
		t.Fatalf("GET k2 = %q, %v", v, err)
	}
	// Kill ends a pause; Restart brings the server back unpaused.
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Ping(pctx); err != nil {
		t.Fatalf("after Pause, Kill, Restart: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

func redisScriptSHA(src string) string {
	h := sha1.Sum([]byte(src))
	return hex.EncodeToString(h[:])
}

// TestServerPassword: --requirepass works in both modes.
func TestServerPassword(t *testing.T) {
	ctx := context.Background()
	s := redistest.Server(t, "--requirepass", "pw-1")
	anon := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = anon.Close() })
	if err := anon.Set(ctx, "k", "v", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("SET without the password = %v, want NOAUTH", err)
	}
	if err := s.Client(t).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("Instance.Client: %v", err)
	}
}

// TestCluster: keys land on the node serving their slot, the nodes agree
// with Slot, and a client routes by slot.
func TestCluster(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t)
	cc := cl.Client(t)
	t.Logf("cluster real: %v", cl.Real)
	seen := map[string]bool{}
	for i := range 60 {
		key := fmt.Sprintf("k%d", i)
		if err := cc.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		owner := cl.NodeFor(redistest.Slot(key))
		seen[owner.Addr()] = true
		for _, n := range cl.Nodes {
			c := n.Client(t)
			if slot, err := c.ClusterKeySlot(ctx, key).Result(); err != nil || int(slot) != redistest.Slot(key) {
				t.Fatalf("CLUSTER KEYSLOT %s on %s = %d, %v; Slot says %d", key, n.Addr(), slot, err, redistest.Slot(key))
			}
			if got := c.Exists(ctx, key).Val() == 1; got != (n == owner) {
				t.Fatalf("key %s (slot %d) on %s: %v; its owner is %s", key, redistest.Slot(key), n.Addr(), got, owner.Addr())
			}
		}
	}
	if len(seen) != 3 {
		t.Fatalf("60 keys on %d nodes", len(seen))
	}
	// A client that learns the layout from the nodes agrees.
	plain := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { _ = plain.Close() })
	ss, err := plain.ClusterSlots(ctx).Result()
	if err != nil || len(ss) != 3 {
		t.Fatalf("CLUSTER SLOTS = %v, %v", ss, err)
	}
	for i := range 60 {
		if v, err := plain.Get(ctx, fmt.Sprintf("k%d", i)).Result(); err != nil || v != "v" {
			t.Fatalf("GET k%d through a discovering client = %q, %v", i, v, err)
		}
	}
}

// TestSlot: known slots from the Redis Cluster specification.
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{"123456789": 12739, "foo": 12182, "{user1000}.following": redistest.Slot("user1000"), "{}x": redistest.Slot("{}x"), "a": 15495, "b": 3300} {
		if got := redistest.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if redistest.Slot("{user1000}.following") != redistest.Slot("{user1000}.followers") {
		t.Error("keys with one hash tag in different slots")
	}
}

// TestSentinel: a failover client finds the master through the Sentinel.
func TestSentinel(t *testing.T) {
	ctx := context.Background()
	s := redistest.NewSentinel(t)
	t.Logf("sentinel real: %v", s.Real)
	c := s.Client(t)
	if err := c.Set(ctx, "k", "via-sentinel", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Master.Client(t).Get(ctx, "k").Result(); err != nil || v != "via-sentinel" {
		t.Fatalf("GET on the master = %q, %v", v, err)
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel.Addr()})
	t.Cleanup(func() { _ = sc.Close() })
	addr, err := sc.GetMasterAddrByName(ctx, s.Name).Result()
	if err != nil || len(addr) != 2 || addr[1] != fmt.Sprint(s.Master.Port()) {
		t.Fatalf("SENTINEL get-master-addr-by-name = %v, %v; want port %d", addr, err, s.Master.Port())
	}
	if err := sc.Process(ctx, redis.NewStringCmd(ctx, "GET", "k")); err == nil {
		t.Fatal("the Sentinel answers GET")
	}
}

// TestFallback re-runs this package's Server, Cluster and Sentinel tests in
// a child whose PATH has no redis-server: they pass on the miniredis
// fallback and say so, and none is skipped; with $QUOTA_REQUIRE_REDIS=1
// they fail instead, naming the missing redis-server.
func TestFallback(t *testing.T) {
	for _, require := range []bool{false, true} {
		text, err := rerunWithoutRedis(t, require, "-test.run=^(TestServer|TestCluster|TestSentinel)", "-test.v", "-test.count=1")
		switch {
		case strings.Contains(text, "--- SKIP"):
			t.Errorf("require=%v: a test skipped:\n%s", require, text)
		case !require && (err != nil || strings.Count(text, "--- PASS") != 5 || !strings.Contains(text, "FALLBACK")):
			t.Errorf("without %s: %v\n%s", redistest.EnvRequire, err, text)
		case require && (err == nil || !strings.Contains(text, "QUOTA_REQUIRE_REDIS=1 but no redis-server on PATH") || strings.Contains(text, "--- PASS: TestServerKillRestart")):
			t.Errorf("with %s=1: %v\n%s", redistest.EnvRequire, err, text)
		}
	}
}

// TestRequireRedis re-runs TestClient in a child whose PATH has no
// redis-server and no $REDIS_URL: it falls back to miniredis and says so,
// unless $QUOTA_REQUIRE_REDIS=1, which makes the fallback a failure.
func TestRequireRedis(t *testing.T) {
	for _, require := range []bool{false, true} {
		out, err := rerunWithoutRedis(t, require, "-test.run=^TestClient$", "-test.v")
		switch {
		case !require && (err != nil || !strings.Contains(out, "using in-process miniredis")):
			t.Errorf("without %s: %v\n%s", redistest.EnvRequire, err, out)
		case require && (err == nil || !strings.Contains(out, "QUOTA_REQUIRE_REDIS=1 but no real Redis")):
			t.Errorf("with %s=1: %v\n%s", redistest.EnvRequire, err, out)
		}
	}
}

// rerunWithoutRedis runs this test binary again with args (which tests to
// run, and how) in a child that finds no Redis: no redis-server on its PATH
// and no $REDIS_URL; with $QUOTA_REQUIRE_REDIS=1 when require. It returns
// the child's output and how it ended. Unlike testkit.Child, the child runs
// this package's own tests: what is tested is how they behave there.
func rerunWithoutRedis(t *testing.T, require bool, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	env := []string{"PATH=" + t.TempDir()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, redistest.EnvURL+"=") && !strings.HasPrefix(kv, redistest.EnvRequire+"=") {
			env = append(env, kv)
		}
	}
	if require {
		env = append(env, redistest.EnvRequire+"=1")
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPrefixSwept: keys under a test's prefix are deleted from the shared
// server when the test ends; other keys stay.
func TestPrefixSwept(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	var prefix string
	t.Run("writer", func(t *testing.T) {
		prefix = redistest.Prefix(t)
		for _, k := range []string{"a", "b", "{tag}c"} {
			if err := c.Set(ctx, prefix+k, "v", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	other := redistest.Prefix(t) + "kept"
	if err := c.Set(ctx, other, "v", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("after the subtest: keys %q, %v; want none", keys, err)
	}
	if c.Exists(ctx, other).Val() != 1 {
		t.Fatal("another test's key was swept")
	}
}
