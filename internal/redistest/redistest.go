// Package redistest gives tests a Redis to talk to, the same way in every
// package of the module.
//
// Client returns a client of a shared server: $REDIS_URL when set, else a
// redis-server found on PATH started once per test binary on a free loopback
// port, else an in-process miniredis. With $QUOTA_REQUIRE_REDIS=1 (CI sets
// it) the miniredis fallback is a test failure instead. Prefix returns a key
// prefix unique to the test, so tests never need FLUSHALL.
//
// Server starts a server of the test's own, which the test may Kill,
// Restart, Pause and Resume (fault tests); NewCluster and NewSentinel start
// a Redis Cluster and a Sentinel set-up. They use redis-server from PATH,
// else in-process miniredis servers behind loopback proxies that play the
// same faults (never a skipped test); with $QUOTA_REQUIRE_REDIS=1 the
// fallback is a test failure. Each logs which it started. Mini returns a
// miniredis, whose clock the test moves with SetTime and FastForward.
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

// Instance is a Redis server of one test's own on a loopback port, with no
// persistence, that the test may Kill, Restart, Pause and Resume to play
// faults. It is stopped when the test ends.
//
// It is a redis-server process when one is on PATH (Kind KindServer), else
// an in-process miniredis behind a loopback TCP proxy the Instance owns
// (Kind KindMini): the proxy plays the faults, so the API and what clients
// see are the same in both modes.
type Instance struct {
	mu    sync.Mutex
	port  int
	dir   string
	args  []string // extra arguments, after the defaults
	conf  string   // a config file to start with (Sentinel), or ""
	ready string   // the log line that says the server is ready
	cmd   *exec.Cmd
	done  chan struct{} // closed when cmd exits

	// The fallback: a miniredis behind a proxy (nil when real).
	mini *miniredis.Miniredis
	prx  *proxy
	pass string // the miniredis's password, or ""
}

// Server starts a Redis server of the test's own on a free loopback port:
// a redis-server process when one is on PATH, else (unless
// $QUOTA_REQUIRE_REDIS=1, which makes that a test failure) an in-process
// miniredis behind a loopback proxy that Kill, Restart, Pause and Resume
// act on. extra arguments go to redis-server (e.g. "--maxmemory", "1mb");
// the fallback supports only "--requirepass PASS" and fails the test on any
// other. Kind tells which the test got; Server logs it.
func Server(t testing.TB, extra ...string) *Instance {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("redistest: $%s=1 but no redis-server on PATH to start a server of the test's own (apt-get install redis-server): %v", EnvRequire, err)
		}
		return fallbackServer(t, "no redis-server on PATH", extra)
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
	for i := 0; i+1 < len(extra); i++ {
		if extra[i] == "--requirepass" {
			s.pass = extra[i+1]
		}
	}
	t.Cleanup(s.stop)
	t.Logf("redistest: Server: redis-server (pid %d) at %s", s.cmd.Process.Pid, s.Addr())
	return s
}

// fallbackServer returns a miniredis behind a proxy of its own.
func fallbackServer(t testing.TB, why string, extra []string) *Instance {
	t.Helper()
	m := miniredis.NewMiniRedis()
	var pass string
	for i := 0; i < len(extra); i++ {
		switch {
		case extra[i] == "--requirepass" && i+1 < len(extra):
			pass = extra[i+1]
			m.RequireAuth(pass)
			i++
		default:
			t.Fatalf("redistest: Server argument %q is not supported by the miniredis fallback (%s); only --requirepass PASS is", extra[i], why)
		}
	}
	s := proxied(t, m)
	s.pass = pass
	t.Logf("redistest: Server: FALLBACK in-process miniredis behind a loopback proxy at %s (%s)", s.Addr(), why)
	return s
}

// proxied starts m and a proxy in front of it on a free loopback port, both
// stopped when the test ends.
func proxied(t testing.TB, m *miniredis.Miniredis) *Instance {
	t.Helper()
	if err := m.Start(); err != nil {
		t.Fatalf("redistest: start miniredis: %v", err)
	}
	t.Cleanup(m.Close)
	p := newProxy(m.Addr())
	if err := p.listen("127.0.0.1:0"); err != nil {
		t.Fatalf("redistest: proxy: %v", err)
	}
	s := &Instance{port: p.port(), mini: m, prx: p}
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

// Kind reports what the server is: KindServer (a redis-server process) or
// KindMini (the in-process miniredis fallback).
func (s *Instance) Kind() Kind {
	if s.mini != nil {
		return KindMini
	}
	return KindServer
}

// IsReal reports whether the server is a redis-server process.
func (s *Instance) IsReal() bool { return s.mini == nil }

// Addr returns the server's address, "127.0.0.1:PORT". It stays the same
// across Restart.
func (s *Instance) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port returns the server's port.
func (s *Instance) Port() int { return s.port }

// Client returns a new client of s (with the --requirepass password, if
// any), closed when the test ends.
func (s *Instance) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: s.pass})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill stops the server at once, as a crash would, and waits until it is
// gone: a redis-server gets SIGKILL; the fallback's proxy closes its
// listener and every connection (clients see connection refused or reset).
// The data and loaded scripts are gone either way (no persistence).
func (s *Instance) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prx != nil {
		s.prx.kill()
		s.mini.FlushAll()
		// A restarted redis-server has no scripts either.
		c := redis.NewClient(&redis.Options{Addr: s.mini.Addr(), Password: s.pass, MaxRetries: -1})
		_ = c.ScriptFlush(context.Background()).Err()
		_ = c.Close()
		return
	}
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
		if s.prx != nil {
			err = s.prx.listen(s.Addr())
		} else {
			err = s.launch()
		}
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("redistest: restart on port %d: %w", s.port, err)
}

// Pause makes the server hang, as a stuck process does: connections stay
// open and new ones are accepted, but nothing is answered until Resume. A
// redis-server is stopped with SIGSTOP (Unix only; elsewhere Pause returns
// an error), and Pause returns once the kernel reports it stopped; the
// fallback's proxy stops forwarding and holds what it reads.
func (s *Instance) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prx != nil {
		return s.prx.setPaused(true)
	}
	if s.cmd == nil {
		return errors.New("redistest: pause: the server is killed")
	}
	return pauseProcess(s.cmd.Process.Pid)
}

// Resume undoes Pause: the server answers again, including what it was
// sent while paused.
func (s *Instance) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prx != nil {
		return s.prx.setPaused(false)
	}
	if s.cmd == nil {
		return errors.New("redistest: resume: the server is killed")
	}
	return resumeProcess(s.cmd.Process.Pid)
}

func (s *Instance) stop() { s.Kill() }

// Ping reports whether the server answers.
func (s *Instance) Ping(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: s.pass, MaxRetries: -1})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return errors.Join(errors.New("redistest: ping "+s.Addr()), err)
	}
	return nil
}
