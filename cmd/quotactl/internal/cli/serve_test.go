package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// startServe runs serve on opts until the test ends and returns its base
// URL (opts.Listen's host, the bound port).
func startServe(t *testing.T, opts *serveOptions) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	opts.ready = func(a string) { addr <- a }
	done := make(chan error, 1)
	go func() { done <- serveRun(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve stopped with %v", err)
		}
	})
	select {
	case a := <-addr:
		_, port, _ := strings.Cut(a, "]:")
		if port == "" {
			_, port, _ = strings.Cut(a, ":")
		}
		return "http://127.0.0.1:" + port
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	return ""
}

func fetch(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeAPIMatchesStatusJSON: /api/status has every field of `status
// --json`, with the same values, row for row.
func TestServeAPIMatchesStatusJSON(t *testing.T) {
	e := newEnv(t)
	e.setup()
	e.ok("take", "youtube", "--label", "yt-key-1", "--cost", "2", "--budget", "search")
	var cli []map[string]any
	decode(t, e.ok("--json", "status"), &cli)

	g, out, _ := e.g()
	base := startServe(t, &serveOptions{globals: g, Listen: "127.0.0.1:0", Refresh: time.Second})
	if !strings.Contains(out.String(), "quotactl: dashboard on http://127.0.0.1:") {
		t.Errorf("serve said %q", out.String())
	}
	code, body := fetch(t, base+"/api/status", "")
	if code != 200 {
		t.Fatalf("/api/status: %d %s", code, body)
	}
	var api []map[string]any
	if err := json.Unmarshal([]byte(body), &api); err != nil {
		t.Fatal(err)
	}
	if len(api) != len(cli) || len(cli) == 0 {
		t.Fatalf("%d API rows, %d CLI rows", len(api), len(cli))
	}
	for i, row := range cli {
		for k, v := range row {
			if got, ok := api[i][k]; !ok || !reflect.DeepEqual(got, v) {
				t.Errorf("row %d field %q: API %v (present %v), --json %v", i, k, got, ok, v)
			}
		}
	}
	if code, body := fetch(t, base+"/metrics", ""); code != 200 || !strings.Contains(body, `quota_store_used_units{api="youtube",budget="search",owner="yt-key-1"} 3`) {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
}

// TestServeNeedsTokenBeyondLoopback: listening on every interface without a
// token is a usage error; with one, requests without it are refused, and
// the token is never printed.
func TestServeNeedsTokenBeyondLoopback(t *testing.T) {
	e := newEnv(t)
	e.setup()
	r := e.run("serve", "--listen", "0.0.0.0:0")
	if r.code != ExitUsage {
		t.Fatalf("serve on 0.0.0.0 without a token: exit %d, %q", r.code, r.errOut)
	}
	oneLine(t, r.errOut, "reachable from other hosts", tokenEnv)
	r = e.run("serve", "--listen", "nonsense")
	if r.code != ExitUsage {
		t.Errorf("--listen nonsense: exit %d", r.code)
	}

	// A store that does not exist yet is an error, not an empty dashboard
	// forever; and serve creates nothing.
	missing := filepath.Join(t.TempDir(), "none.db")
	r = e.run("--store", "sqlite:"+missing, "serve", "--listen", "127.0.0.1:0")
	if r.code != ExitError || !strings.Contains(r.errOut, "none.db") {
		t.Errorf("serve on a missing store: exit %d, %q", r.code, r.errOut)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("serve created %s: %v", missing, err)
	}

	const token = "tok-0123456789-abcdef"
	e.vars[tokenEnv] = token
	g, out, errOut := e.g()
	base := startServe(t, &serveOptions{globals: g, Listen: "0.0.0.0:0", Refresh: time.Second})
	if code, _ := fetch(t, base+"/api/status", ""); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d", code)
	}
	if code, _ := fetch(t, base+"/api/status", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d", code)
	}
	if code, body := fetch(t, base+"/api/status", token); code != 200 || !strings.Contains(body, "yt-key-1") {
		t.Errorf("with the token: %d", code)
	}
	if strings.Contains(out.String()+errOut.String(), token) {
		t.Errorf("serve printed the token: %q %q", out, errOut)
	}
	if !strings.Contains(out.String(), "token required") {
		t.Errorf("serve does not say a token is required: %q", out)
	}
}

// TestServeBadListen: a --listen address that cannot be listened on for
// what it says (a port out of range or not a port) is a usage error naming
// the flag and the value, whether or not a token is given, and before any
// complaint about the token.
func TestServeBadListen(t *testing.T) {
	e := newEnv(t)
	e.setup()
	for _, token := range []string{"", "tok-0123456789-abcdef"} {
		if token != "" {
			e.vars[tokenEnv] = token
		}
		for _, addr := range []string{":99999", "127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:no-such-port", "[::1]:65536"} {
			r := e.run("serve", "--listen", addr)
			if r.code != ExitUsage {
				t.Errorf("serve --listen %s (token %t): exit %d, want 2 (%s)", addr, token != "", r.code, r.errOut)
			}
			oneLine(t, r.errOut, `--listen "`+addr+`"`, "port", "0 to 65535")
			if token != "" && strings.Contains(r.errOut, token) {
				t.Errorf("stderr shows the token: %q", r.errOut)
			}
		}
	}
}

// TestServeTokenSpaces: the dashboard reads a client's token trimmed, so a
// token given with surrounding spaces is kept without them (it could never
// match otherwise), and one that is only spaces is a usage error rather than
// a dashboard no one can sign in to.
func TestServeTokenSpaces(t *testing.T) {
	e := newEnv(t)
	g, _, _ := e.g()
	for _, tc := range []struct {
		flag, env, want string
		blank           bool
	}{
		{flag: "  tok-0123456789  ", want: "tok-0123456789"},
		{env: "tok-0123456789 \t", want: "tok-0123456789"},
		{flag: " ", blank: true},
		{env: "  ", blank: true},
		{env: "", want: ""},
	} {
		e.vars[tokenEnv] = tc.env
		got, err := (&serveOptions{globals: g, Token: tc.flag}).token()
		switch {
		case tc.blank && (err == nil || !strings.Contains(err.Error(), "blank")):
			t.Errorf("token (--token %q, $%s %q) = %q, %v; want a usage error saying it is blank", tc.flag, tokenEnv, tc.env, got, err)
		case !tc.blank && (err != nil || got != tc.want):
			t.Errorf("token (--token %q, $%s %q) = %q, %v; want %q", tc.flag, tokenEnv, tc.env, got, err, tc.want)
		}
	}
}
