// Package redistest gives tests a Redis to talk to, the same way in every
// package of the module.
//
// Client returns a client of a shared server: $REDIS_URL when set, else a
// redis-server found on PATH started once per test binary on a free loopback
// port, else an in-process miniredis. With $QUOTA_REQUIRE_REDIS=1 (CI sets
// it) the miniredis fallback is a test failure instead. Prefix returns a key
// prefix unique to the test, so tests never need FLUSHALL.
//
// Server always starts a redis-server of the test's own, which the test may
// Kill and Restart (fault tests). Mini returns a miniredis, whose clock the
// test moves with SetTime and FastForward.
//
// A package whose tests use Client should call Main from its TestMain so the
// shared redis-server is stopped when the tests end; without it the server
// is still killed when the test binary exits (Linux) or idles out.
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Kind names the server a shared Client talks to.
type Kind string

const (
	// KindURL is the server named by $REDIS_URL.
	KindURL Kind = "REDIS_URL"
	// KindServer is a redis-server started from PATH for this test binary.
	KindServer Kind = "redis-server"
	// KindMini is an in-process miniredis.
	KindMini Kind = "miniredis"
)

// EnvURL and EnvRequire are the environment variables Client reads.
const (
	EnvURL     = "REDIS_URL"
	EnvRequire = "QUOTA_REQUIRE_REDIS"
)

var shared struct {
	once  sync.Once
	ready atomic.Bool // setup has run and opts is set
	kind  Kind
	opts  *redis.Options
	srv   *Instance
	mini  *miniredis.Miniredis
	note  string // why the fallback was taken
	err   error
}

// Main runs a package's tests and then stops the shared redis-server, if
// Client started one. Call it from TestMain:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.stop()
		_ = os.RemoveAll(shared.srv.dir)
	}
	if shared.mini != nil {
		shared.mini.Close()
	}
	os.Exit(code)
}

func setup() {
	if u := os.Getenv(EnvURL); u != "" {
		opts, err := redis.ParseURL(u)
		if err != nil {
			shared.err = fmt.Errorf("redistest: $%s=%q: %v", EnvURL, u, err)
			return
		}
		shared.kind, shared.opts = KindURL, opts
		return
	}
	if _, err := exec.LookPath("redis-server"); err == nil {
		srv, err := start(0, "shared")
		if err == nil {
			shared.kind, shared.srv = KindServer, srv
			shared.opts = &redis.Options{Addr: srv.Addr()}
			return
		}
		shared.note = "redis-server on PATH did not start: " + err.Error()
	} else {
		shared.note = "no redis-server on PATH and no $" + EnvURL
	}
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		shared.err = fmt.Errorf("redistest: start miniredis: %v", err)
		return
	}
	shared.kind, shared.mini = KindMini, m
	shared.opts = &redis.Options{Addr: m.Addr()}
}

// Shared returns the kind and address of the shared server Client uses,
// starting it if needed, with the same rules as Client. Tests that re-exec
// the test binary pass the address to their children.
func Shared(t testing.TB) (Kind, string) {
	t.Helper()
	shared.once.Do(func() {
		setup()
		shared.ready.Store(shared.err == nil)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	if shared.kind == KindMini && os.Getenv(EnvRequire) == "1" {
		t.Fatalf("redistest: $%s=1 but no real Redis: %s; install redis-server or set $%s", EnvRequire, shared.note, EnvURL)
	}
	return shared.kind, shared.opts.Addr
}

// Client returns a new client of the shared server (see the package doc),
// closed when the test ends. It logs which server it uses.
func Client(t testing.TB) redis.UniversalClient {
	t.Helper()
	kind, addr := Shared(t)
	if kind == KindMini {
		t.Logf("redistest: using in-process miniredis at %s (%s)", addr, shared.note)
	} else {
		t.Logf("redistest: using %s at %s", kind, addr)
	}
	opts := *shared.opts
	c := redis.NewClient(&opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// IsReal reports whether the shared server is a real Redis (not miniredis).
func IsReal(t testing.TB) bool {
	t.Helper()
	kind, _ := Shared(t)
	return kind != KindMini
}

// Prefix returns a key prefix unique to this test (and this run), such as
// "qt:TestTake_daily:3f9a1c2e:". It holds no '{' or '}', so it never
// becomes a Redis Cluster hash tag. When the test ends, the keys under the
// prefix in the shared server (if the test binary uses one) are deleted, so
// a long-lived $REDIS_URL server does not collect them.
func Prefix(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("qt:")
	for _, r := range t.Name() {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '/') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	b.WriteByte(':')
	b.WriteString(hex.EncodeToString(rnd[:]))
	b.WriteByte(':')
	p := b.String()
	t.Cleanup(func() { sweep(p) })
	return p
}

// sweep deletes the keys under prefix in the shared server, if one is in
// use. Errors are ignored: the server may be gone already.
func sweep(prefix string) {
	if !shared.ready.Load() {
		return
	}
	opts := *shared.opts
	opts.MaxRetries = -1
	c := redis.NewClient(&opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, escapeGlob(prefix)+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 500 {
			_ = c.Unlink(ctx, batch...).Err()
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		_ = c.Unlink(ctx, batch...).Err()
	}
}

// escapeGlob escapes the characters SCAN MATCH treats specially.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Mini returns an in-process miniredis, closed when the test ends. Move its
// clock with SetTime (what Lua's redis.call('TIME') returns) and expire keys
// with FastForward.
func Mini(t testing.TB) *miniredis.Miniredis {
	t.Helper()
	return miniredis.RunT(t)
}

// MiniClient returns a client of m, closed when the test ends.
func MiniClient(t testing.TB, m *miniredis.Miniredis) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Instance is a redis-server process of one test's own, on a loopback port,
// with no persistence. Kill and Restart it to test faults. It is stopped
// when the test ends.
type Instance struct {
	mu    sync.Mutex
	port  int
	dir   string
	args  []string // extra arguments, after the defaults
	conf  string   // a config file to start with (Sentinel), or ""
	ready string   // the log line that says the server is ready
	cmd   *exec.Cmd
	done  chan struct{} // closed when cmd exits
}

// Server starts a redis-server of the test's own on a free loopback port.
// extra arguments go to redis-server (e.g. "--maxmemory", "1mb"). A fault
// test needs a real server that it can kill, which miniredis is not: without
// redis-server on PATH the test is skipped with a loud message, or fails
// when $QUOTA_REQUIRE_REDIS=1 (CI).
func Server(t testing.TB, extra ...string) *Instance {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		// Go alone runs `go test ./...` green: a fault test needs a real
		// server it can kill, which miniredis cannot stand in for, so it is
		// skipped out loud. CI sets $QUOTA_REQUIRE_REDIS=1, and there the
		// missing server is a failure.
		msg := "redistest: SKIPPED, NOT RUN: this test kills, restarts or clusters a redis-server of its own, and none is on PATH (apt-get install redis-server): " + err.Error()
		if os.Getenv(EnvRequire) == "1" {
			t.Fatal(msg + " ($" + EnvRequire + "=1)")
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	var (
		s   *Instance
		err error
	)
	for range 5 { // a free port may be taken between probe and start
		if s, err = startIn(0, dir, extra); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.stop)
	return s
}

func start(port int, name string) (*Instance, error) {
	dir, err := os.MkdirTemp("", "redistest-"+name+"-")
	if err != nil {
		return nil, err
	}
	var s *Instance
	for range 5 {
		if s, err = startIn(port, dir, nil); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startIn(port int, dir string, extra []string) (*Instance, error) {
	if port == 0 {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		port = p
	}
	s := &Instance{port: port, dir: dir, args: extra, ready: "Ready to accept connections"}
	if err := s.launch(); err != nil {
		return nil, err
	}
	return s, nil
}

// launch starts redis-server on s.port and waits until it logs that it is
// ready (no polling, no sleeping).
func (s *Instance) launch() error {
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", "")
	args = append(args, s.args...)
	cmd := exec.Command("redis-server", args...)
	setDeathSignal(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	ready := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		var tail []string
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			if !signalled {
				tail = append(tail, line)
				if strings.Contains(line, s.ready) {
					signalled = true
					ready <- nil
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		if !signalled {
			if len(tail) > 8 {
				tail = tail[len(tail)-8:]
			}
			ready <- fmt.Errorf("redis-server on port %d exited before it was ready: %s", s.port, strings.Join(tail, " | "))
		}
		close(done)
	}()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case err := <-ready:
		if err != nil {
			return err
		}
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("redis-server on port %d not ready after 30s", s.port)
	}
	s.cmd, s.done = cmd, done
	return nil
}

// Addr returns the server's address, "127.0.0.1:PORT". It stays the same
// across Restart.
func (s *Instance) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port returns the server's port.
func (s *Instance) Port() int { return s.port }

// Client returns a new client of s, closed when the test ends.
func (s *Instance) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill stops the server at once (SIGKILL), as a crash would, and waits for
// it to exit. Its data is gone (no persistence).
func (s *Instance) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on the same port after Kill (or kills it
// first if it is running).
func (s *Instance) Restart() error {
	s.Kill()
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for range 5 { // the port may linger briefly after the kill
		if err = s.launch(); err == nil {
			return nil
		}
	}
	return fmt.Errorf("redistest: restart on port %d: %w", s.port, err)
}

func (s *Instance) stop() { s.Kill() }

// Ping reports whether the server answers.
func (s *Instance) Ping(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return errors.Join(errors.New("redistest: ping "+s.Addr()), err)
	}
	return nil
}
