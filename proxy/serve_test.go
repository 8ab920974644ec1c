package proxy_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/proxy"
	"github.com/quotactl/quotactl/quota"
)

// blocking is an upstream whose handler signals entered and waits for
// release.
func blocking(t *testing.T) (*counting, chan struct{}, chan struct{}) {
	entered, release := make(chan struct{}, 16), make(chan struct{})
	up := newCounting(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	return up, entered, release
}

// A connection past --max-conns is answered 503 with a problem document,
// while the one in flight completes.
func TestConnectionLimit(t *testing.T) {
	up, entered, release := blocking(t)
	e := start(t, demoTable(t, ""), up.URL, func(c *proxy.Config) { c.MaxConns = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, done := serve(t, ctx, e.proxy)

	first := make(chan reply, 1)
	go func() { first <- get(t, url+"/v1/items", "Authorization", "Bearer k") }()
	<-entered // the first connection holds the only slot
	r := get(t, url+"/v1/items", "Authorization", "Bearer k")
	if r.status != http.StatusServiceUnavailable || problemOf(t, r)["type"] != proxy.ProblemBase+"too-many-connections" ||
		!strings.Contains(r.body, "at most 1 connections") || r.header.Get("Retry-After") != "1" {
		t.Fatalf("second connection: %d %v %s", r.status, r.header, r.body)
	}
	close(release)
	if r := <-first; r.status != 200 {
		t.Fatalf("first: %d %s", r.status, r.body)
	}
	if up.n.Load() != 1 {
		t.Errorf("upstream received %d, want 1", up.n.Load())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Beyond loopback, Serve requires a token.
func TestNonLoopbackNeedsToken(t *testing.T) {
	up := newCounting(t, nil)
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, demoTable(t, ""), up.URL, nil)
	err = e.proxy.Serve(context.Background(), ln)
	if !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), "reachable from other hosts: give a token") {
		t.Fatalf("Serve on %s without a token: %v", ln.Addr(), err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("the refused listener still accepts connections")
	}
	ln, err = net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	et := start(t, demoTable(t, ""), up.URL, func(c *proxy.Config) { c.Token = "t0k" })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- et.proxy.Serve(ctx, ln) }()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if r := get(t, "http://127.0.0.1:"+port+"/v1/items", "Authorization", "Bearer k", proxy.TokenHeader, "Bearer t0k"); r.status != 200 {
		t.Fatalf("with a token: %d %s", r.status, r.body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Shutting down lets the call in flight finish, and its charge stands.
func TestGracefulShutdown(t *testing.T) {
	up, entered, release := blocking(t)
	e := start(t, demoTable(t, ""), up.URL, nil)
	ctx, cancel := context.WithCancel(context.Background())
	url, done := serve(t, ctx, e.proxy)
	first := make(chan reply, 1)
	go func() { first <- get(t, url+"/v1/items", "Authorization", "Bearer k") }()
	<-entered
	cancel() // SIGTERM
	select {
	case err := <-done:
		t.Fatalf("Serve returned with a call in flight: %v", err)
	default:
	}
	close(release)
	if r := <-first; r.status != 200 || r.body != `{"ok":true}` {
		t.Fatalf("in-flight call: %d %s", r.status, r.body)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if got := used(t, e.limiter, "team", "units"); got != 1 {
		t.Errorf("used %d after shutdown, want the in-flight call's 1", got)
	}
	if _, err := http.Get(url + "/v1/items"); err == nil {
		t.Error("the proxy still answers after shutdown")
	}
}
