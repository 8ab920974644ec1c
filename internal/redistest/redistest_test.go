package redistest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

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
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := s.Ping(ctx); err == nil {
		t.Fatal("a killed server answers")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if n := c.Exists(ctx, "k").Val(); n != 0 {
		t.Fatal("data survived a kill without persistence")
	}
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr = %q", s.Addr())
	}
}

// TestRequireRedis re-runs TestClient in a child whose PATH has no
// redis-server and no $REDIS_URL: it falls back to miniredis and says so,
// unless $QUOTA_REQUIRE_REDIS=1, which makes the fallback a failure.
func TestRequireRedis(t *testing.T) {
	for _, require := range []bool{false, true} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestClient$", "-test.v")
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
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		switch {
		case !require && (err != nil || !strings.Contains(out.String(), "using in-process miniredis")):
			t.Errorf("without %s: %v\n%s", redistest.EnvRequire, err, out.String())
		case require && (err == nil || !strings.Contains(out.String(), "QUOTA_REQUIRE_REDIS=1 but no real Redis")):
			t.Errorf("with %s=1: %v\n%s", redistest.EnvRequire, err, out.String())
		}
	}
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
