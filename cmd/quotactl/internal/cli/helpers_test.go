package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storeurl"
)

// t0 is the tests' fixed start: 09:00 UTC, 01:00 in Los Angeles.
var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// env is one test's world: an SQLite file, a fake clock and environment.
type env struct {
	t     *testing.T
	url   string
	path  string
	clock *testkit.Clock
	vars  map[string]string
	tty   bool
	store quota.Store // opened on first use by g()
}

func newEnv(t *testing.T) *env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "quota.db")
	return &env{t: t, url: storeurl.SQLiteURL(path), path: path, clock: testkit.NewClock(t0), vars: map[string]string{}}
}

func (e *env) lookup(k string) (string, bool) {
	v, ok := e.vars[k]
	return v, ok
}

// io returns fake IO writing to out and errOut.
func (e *env) io(out, errOut *bytes.Buffer) *IO {
	return &IO{
		In: strings.NewReader(""), Out: out, ErrOut: errOut, LookupEnv: e.lookup,
		Clock: e.clock.Now, TTY: e.tty, Location: time.UTC,
	}
}

// g returns globals over the env's store (opened once, closed at the end
// of the test) and the buffers the command writes to.
func (e *env) g() (*globals, *bytes.Buffer, *bytes.Buffer) {
	e.t.Helper()
	if e.store == nil {
		st, err := storeurl.Open(context.Background(), e.url)
		if err != nil {
			e.t.Fatal(err)
		}
		e.store = st
		e.t.Cleanup(func() { st.Close() })
	}
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	return &globals{io: e.io(out, errOut), store: e.store}, out, errOut
}

// jsonG is g with --json.
func (e *env) jsonG() (*globals, *bytes.Buffer, *bytes.Buffer) {
	g, out, errOut := e.g()
	g.json = true
	return g, out, errOut
}

// result is what a quotactl run left.
type result struct {
	code        int
	out, errOut string
}

// run runs quotactl in process, as the binary would, on the env's store
// file (opened and closed by the run).
func (e *env) run(args ...string) result {
	e.t.Helper()
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	code := Main(context.Background(), append([]string{"--store", e.url}, args...), e.io(out, errOut))
	return result{code, out.String(), errOut.String()}
}

// ok runs quotactl and fails the test unless it exits 0.
func (e *env) ok(args ...string) string {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("quotactl %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.errOut)
	}
	return r.out
}

// oneLine checks stderr is one line prefixed "quotactl: " and holds want.
func oneLine(t *testing.T, stderr string, want ...string) {
	t.Helper()
	if !strings.HasPrefix(stderr, "quotactl: ") || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr %q: want one line starting with \"quotactl: \"", stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q does not say %q", stderr, w)
		}
	}
}

// decode reads JSON output into v.
func decode(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
}

// setup defines youtube's budgets: units 10 over a sliding hour, search 3 a
// day in Los Angeles; and records credential yt-key-1 ($KEY1) by a first
// take of 1 unit each.
func (e *env) setup() {
	e.t.Helper()
	e.ok("budget", "set", "youtube/units", "--limit", "10", "--window", "1h")
	e.ok("budget", "set", "youtube/search", "--limit", "3", "--daily", "America/Los_Angeles")
	e.vars["KEY1"] = "AIzaSy-key-one"
	e.ok("take", "youtube", "--credential-env", "KEY1", "--label", "yt-key-1", "--cost", "1")
}

// usage returns the status of yt-key-1's budgets as budget -> used.
func (e *env) usage(api string) map[string]statusJSON {
	e.t.Helper()
	var rows []statusJSON
	decode(e.t, e.ok("--json", "status", api), &rows)
	m := map[string]statusJSON{}
	for _, r := range rows {
		m[r.Credential+"/"+r.Budget] = r
	}
	return m
}

func matchString(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
