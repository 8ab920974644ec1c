package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is the Redis a run talks to: one it started (and stops), or one it
// was given by URL (whose data it leaves alone but for its own keys).
type server struct {
	opts    *redis.Options
	started bool // a redis-server of our own
	addr    string
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd exits
	dir     string
}

// connect returns the server named by url, or when url is empty a new
// redis-server from PATH on a free loopback port with no persistence.
func connect(url string) (*server, error) {
	if url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("bench: redis url: %w", err)
		}
		return &server{opts: opts, addr: opts.Addr}, nil
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errors.New("bench: no -redis URL or $REDIS_URL, and no redis-server on PATH to start one (apt-get install redis-server)")
	}
	dir, err := os.MkdirTemp("", "quotactl-bench-redis-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var s *server
	for range 5 { // a probed free port may be taken before redis-server binds it
		if s, err = launch(dir); err == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
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

// launch starts redis-server in dir, with extra arguments after the
// defaults, and waits until it logs that it accepts connections.
func launch(dir string, extra ...string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("bench: free port: %w", err)
	}
	cmd := exec.Command("redis-server",
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", "")
	cmd.Args = append(cmd.Args, extra...)
	setDeathSignal(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: redis-server: %w", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start redis-server: %w", err)
	}
	ready := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		var tail []string
		signalled := false
		for sc.Scan() {
			if signalled {
				continue
			}
			line := sc.Text()
			tail = append(tail, line)
			if strings.Contains(line, "Ready to accept connections") {
				signalled = true
				ready <- nil
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		if !signalled {
			tail = tail[max(0, len(tail)-6):]
			ready <- fmt.Errorf("bench: redis-server on port %d exited before it was ready: %s", port, strings.Join(tail, " | "))
		}
		close(done)
	}()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case err := <-ready:
		if err != nil {
			return nil, err
		}
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-done
		return nil, fmt.Errorf("bench: redis-server on port %d not ready after 30s", port)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	return &server{opts: &redis.Options{Addr: addr}, started: true, addr: addr, cmd: cmd, done: done, dir: dir}, nil
}

// client returns a client of s with a connection for each of up to
// goroutines concurrent callers, so no caller waits for the pool.
// ContextTimeoutEnabled lets go-redis apply context deadlines itself, so
// the quota store does not need its goroutine-per-call guard.
func (s *server) client(goroutines int) *redis.Client {
	o := *s.opts
	o.PoolSize = goroutines + 4
	o.ContextTimeoutEnabled = true
	return redis.NewClient(&o)
}

// close stops a server this run started. A server given by URL is left
// running.
func (s *server) close() {
	if !s.started {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	_ = os.RemoveAll(s.dir)
}

// version returns the server's redis_version from INFO server.
func version(ctx context.Context, rdb redis.UniversalClient) string {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}

// deleteKeys removes every key matching each pattern (SCAN, then UNLINK in
// batches): a run's own keys on a server it was given.
func deleteKeys(ctx context.Context, rdb redis.UniversalClient, patterns ...string) error {
	for _, p := range patterns {
		it := rdb.Scan(ctx, 0, p, 1000).Iterator()
		var batch []string
		for it.Next(ctx) {
			batch = append(batch, it.Val())
			if len(batch) == 500 {
				if err := rdb.Unlink(ctx, batch...).Err(); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
		if len(batch) > 0 {
			if err := rdb.Unlink(ctx, batch...).Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// scanKeys returns the keys matching pattern.
func scanKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	var keys []string
	it := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	return keys, it.Err()
}

// scriptStats is what Redis counted for the commands that run scripts
// (EVALSHA and EVAL): how many calls, and how many µs it spent executing
// them, the commands the scripts call included. Redis measures the time
// itself, so it holds no network or client time.
type scriptStats struct{ calls, usec int64 }

// readScriptStats reads scriptStats from INFO commandstats.
func readScriptStats(ctx context.Context, rdb redis.UniversalClient) (scriptStats, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return scriptStats{}, fmt.Errorf("bench: info commandstats: %w", err)
	}
	return parseScriptStats(info), nil
}

func parseScriptStats(info string) scriptStats {
	var st scriptStats
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		name, fields, ok := strings.Cut(line, ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "calls":
				st.calls += n
			case "usec":
				st.usec += n
			}
		}
	}
	return st
}
