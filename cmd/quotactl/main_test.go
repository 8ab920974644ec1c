package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/transcript.txt from this run")

// session runs the real quotactl binary in a working directory, the way a
// shell would, and keeps a transcript.
type session struct {
	t          *testing.T
	bin, dir   string
	env        []string
	transcript bytes.Buffer
}

// run runs quotactl with args; tty says whether to present stdout as a
// terminal (QUOTACTL_FORCE_TTY=1) or leave it a pipe, as it is. shown is the
// command line for the transcript.
func (s *session) run(tty bool, shown string, args ...string) (code int, out string) {
	s.t.Helper()
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.Env = s.env
	if tty {
		cmd.Env = append(cmd.Env, "QUOTACTL_FORCE_TTY=1")
	}
	var stdout, stderr, both bytes.Buffer
	var mu sync.Mutex // exec copies stdout and stderr in two goroutines
	cmd.Stdout = &tee{&mu, &stdout, &both}
	cmd.Stderr = &tee{&mu, &stderr, &both}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		s.t.Fatalf("running quotactl: %v", err)
	}
	if shown == "" {
		shown = "quotactl " + strings.Join(args, " ")
	}
	fmt.Fprintf(&s.transcript, "$ %s\n%s", shown, both.String())
	if code != 0 {
		fmt.Fprintf(&s.transcript, "[exit %d]\n", code)
	}
	// Every error is one line on stderr, prefixed "quotactl: ".
	if code != 0 && (!strings.HasPrefix(stderr.String(), "quotactl: ") || strings.Count(stderr.String(), "\n") != 1) {
		s.t.Errorf("%s: exit %d, stderr %q: want one line", shown, code, stderr.String())
	}
	if code == 0 && stderr.Len() > 0 {
		s.t.Errorf("%s: exit 0 with stderr %q", shown, stderr.String())
	}
	return code, stdout.String()
}

// tee writes to its own buffer and to the one both streams share, in the
// order the process wrote them.
type tee struct {
	mu   *sync.Mutex
	a, b *bytes.Buffer
}

func (t *tee) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.a.Write(p)
	return t.b.Write(p)
}

func (s *session) want(code int, wantCode int, out, what string, re ...string) {
	s.t.Helper()
	if code != wantCode {
		s.t.Fatalf("%s: exit %d, want %d\n%s", what, code, wantCode, s.transcript.String())
	}
	for _, r := range re {
		if !regexp.MustCompile(r).MatchString(out) {
			s.t.Errorf("%s: output does not match %q:\n%s", what, r, out)
		}
	}
}

var built struct {
	once sync.Once
	bin  string
	err  error
	dir  string
}

// buildBinary builds quotactl once per test binary.
func buildBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "quotactl-bin")
		if built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "quotactl")
		out, err := exec.Command(goTool(), "build", "-o", built.bin, ".").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// TestDefaultStore: with neither --store nor $QUOTA_STORE, the store is
// $XDG_STATE_HOME/quotactl/quota.db, directory created on first use.
func TestDefaultStore(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cmd := exec.Command(bin, "budget", "set", "api/units", "--limit", "5", "--window", "1m")
	cmd.Env = []string{"HOME=" + dir, "XDG_STATE_HOME=" + state}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	fi, err := os.Stat(filepath.Join(state, "quotactl", "quota.db"))
	if err != nil || fi.Size() == 0 {
		t.Fatalf("default store: %v", err)
	}
	cmd = exec.Command(bin, "budget", "list")
	cmd.Env = []string{"HOME=" + dir, "XDG_STATE_HOME=" + state}
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "api/units\t5\tsliding:1m0s\toperator\n" {
		t.Errorf("budget list on the default store: %v, %q", err, out)
	}
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// TestBinarySession builds quotactl and runs a session on an SQLite file:
// define budgets, take until the budget is spent (exit 3), status, history,
// refund, errors. It keeps the transcript in testdata/transcript.txt (go test
// -run TestBinarySession -update rewrites it); the README quotes it.
func TestBinarySession(t *testing.T) {
	dir := t.TempDir()
	bin := buildBinary(t)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &session{t: t, bin: bin, dir: work, env: []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TZ=America/Los_Angeles",
		"QUOTA_STORE=sqlite:quota.db", "YT_KEY=AIzaSyD-not-a-real-key", "NEW_KEY=AIzaSyD-the-rotated-key",
	}}
	fmt.Fprintf(&s.transcript, "$ export QUOTA_STORE=sqlite:quota.db TZ=America/Los_Angeles\n$ read -rs YT_KEY && export YT_KEY   # the API key; never a flag value\n")

	code, out := s.run(true, "", "budget", "set", "youtube/units", "--limit", "10000", "--daily", "America/Los_Angeles")
	s.want(code, 0, out, "budget set units", `^youtube/units: 10000 units per day, reset at midnight America/Los_Angeles\n$`)
	code, out = s.run(true, "", "budget", "set", "youtube/search", "--limit", "100", "--daily", "America/Los_Angeles")
	s.want(code, 0, out, "budget set search")

	// Take until the budget is spent: uploads at 1,600 units each.
	idRE := `^youtube/[0-9a-f]{24}/[0-9a-z]+\.[0-9A-Z]+\n$`
	var ids []string
	for i := 0; ; i++ {
		if i == 20 {
			t.Fatalf("no exit 3 after %d takes\n%s", i, s.transcript.String())
		}
		code, out = s.run(true, "", "take", "youtube", "--credential-env", "YT_KEY", "--label", "yt-key-1", "--cost", "1600", "--budget", "units", "--method", "videos.insert")
		if code == 3 {
			break
		}
		s.want(code, 0, out, "take", idRE)
		ids = append(ids, strings.TrimSpace(out))
	}
	if len(ids) != 6 {
		t.Errorf("%d takes of 1600 fitted in 10000, want 6", len(ids))
	}
	code, out = s.run(true, "", "take", "youtube", "--label", "yt-key-1", "--cost", "1", "--budget", "search", "--method", "search.list")
	s.want(code, 0, out, "take search", idRE)

	code, out = s.run(true, "", "status")
	s.want(code, 0, out, "status",
		// Piped to the test, not a terminal of known width: 80 columns.
		`(?m)^API +OWNER +BUDGET +USED +LEFT +USAGE +NEXT FREE$`,
		`(?m)^youtube +yt-key-1 +units +9600/10000 +400 +\[#########-\]  96% +(reset )?in \S+$`,
		`(?m)^youtube +yt-key-1 +search +1/100 +99 +\[#-+\]   1% +(reset )?in `)
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 80 {
			t.Errorf("status wider than 80 columns: %q", l)
		}
	}
	code, out = s.run(false, "quotactl status | cat", "status")
	s.want(code, 0, out, "status piped", `(?m)^youtube\t[0-9a-f]{8}\tyt-key-1\tunits\t9600/10000\t400\t`)
	if strings.Contains(out, "CREDENTIAL") {
		t.Errorf("piped status has a header:\n%s", out)
	}

	code, out = s.run(true, "", "history", "youtube", "--label", "yt-key-1", "--budget", "units")
	s.want(code, 0, out, "history",
		`^youtube/units for yt-key-1: 9600 of 10000 used in the window \(day, reset at midnight America/Los_Angeles\), per 1h in America/Los_Angeles; a full bar is the limit\n`,
		// 9600 of 10000 is 38 of the 40 characters of a full bar.
		`(?m)^\d\d:00  \|#{38}  \|  9600  \(6 calls\)$`,
		`(?m)^by method: videos.insert 9600$`)

	code, out = s.run(true, "", "refund", ids[0])
	s.want(code, 0, out, "refund", `^refunded youtube/`)
	code, out = s.run(true, "", "take", "youtube", "--label", "yt-key-1", "--cost", "1600", "--budget", "units", "--method", "videos.insert")
	s.want(code, 0, out, "take after refund", idRE)
	code, out = s.run(true, "", "take", "youtube", "--label", "yt-key-1", "--cost", "20000", "--budget", "units")
	s.want(code, 4, out, "cost over the limit")

	code, out = s.run(true, "", "costs", "estimate", "youtube", "videos.list=300", "search.list=20", "--label", "yt-key-1")
	s.want(code, 0, out, "estimate that fits", `(?m)^Fits\. Tightest budget: units`)
	code, out = s.run(true, "", "costs", "estimate", "youtube", "videos.list=500", "--label", "yt-key-1")
	s.want(code, 3, out, "estimate that does not fit", `(?m)^Does not fit: units runs out first`)

	code, out = s.run(true, "", "exhaust", "youtube", "--label", "yt-key-1", "--budget", "search", "--until", "reset")
	s.want(code, 0, out, "exhaust", `^youtube/search for yt-key-1: marked spent until \d{4}-\d\d-\d\d 00:00:00 P[SD]T \(in \S+\)\n$`)
	code, out = s.run(true, "", "take", "youtube", "--label", "yt-key-1", "--cost", "1", "--budget", "search")
	s.want(code, 3, out, "take on a budget marked spent")
	code, out = s.run(true, "", "adjust", "youtube", "--label", "yt-key-1", "--budget", "search", "--used", "40")
	s.want(code, 0, out, "adjust", `^youtube/search for yt-key-1: 40 of 100 used\n$`)
	code, out = s.run(true, "", "status", "youtube", "--label", "yt-key-1")
	s.want(code, 0, out, "status after", `(?m)^youtube +yt-key-1 +search +40/100 +60 `, `(?m)^youtube +yt-key-1 +units +9600/10000 +400 `)

	code, out = s.run(true, "", "take", "youtube", "--label", "yt-key-9", "--cost", "1")
	s.want(code, 2, out, "unknown label")
	code, out = s.run(true, "", "reset", "youtube", "--label", "yt-key-1")
	s.want(code, 2, out, "reset without --yes")
	code, out = s.run(true, "", "--store", "redis://127.0.0.1:1", "status")
	s.want(code, 1, out, "unreachable store")
	// Key rotation: the new key cannot take the label by accident; rotated
	// in, it continues the old key's usage.
	fmt.Fprintf(&s.transcript, "$ read -rs NEW_KEY && export NEW_KEY   # the project's new API key\n")
	code, out = s.run(true, "", "take", "youtube", "--credential-env", "NEW_KEY", "--label", "yt-key-1", "--cost", "1", "--budget", "search")
	s.want(code, 2, out, "label taken")
	if !strings.Contains(s.transcript.String(), "quotactl credential rotate youtube yt-key-1") {
		t.Errorf("the label-taken error does not name the fix:\n%s", s.transcript.String())
	}
	code, out = s.run(true, "", "credential", "rotate", "youtube", "yt-key-1", "--credential-env", "NEW_KEY")
	s.want(code, 0, out, "rotate", `^youtube: yt-key-1 is now [0-9a-f]{8}, owner [0-9a-f]{8}, usage kept; the old key [0-9a-f]{8} stays under the same owner without a label\n$`)
	code, out = s.run(true, "", "take", "youtube", "--credential-env", "NEW_KEY", "--label", "yt-key-1", "--cost", "1", "--budget", "search")
	s.want(code, 0, out, "take with the new key", `^youtube/[0-9a-f]{24}/`)
	code, out = s.run(true, "", "status", "youtube")
	// At 80 columns the owner is one column: the label, +1 for the old key.
	s.want(code, 0, out, "status after rotation", `(?m)^youtube +yt-key-1 \+1 +search +41/100 +59 `)
	code, out = s.run(true, "", "credential", "list")
	s.want(code, 0, out, "credential list", `(?m)^youtube +[0-9a-f]{8} +yt-key-1 +[0-9a-f]{24}$`, `(?m)^youtube +[0-9a-f]{8} +\(no label\) +[0-9a-f]{24}$`)

	code, out = s.run(true, "", "list")
	s.want(code, 0, out, "list", `(?m)^youtube +credential +yt-key-1 +fingerprint [0-9a-f]{24}, owner [0-9a-f]{8}$`)

	if strings.Contains(s.transcript.String(), "AIzaSyD-not-a-real-key") || strings.Contains(s.transcript.String(), "the-rotated-key") {
		t.Error("the transcript shows the API key")
	}
	path := filepath.Join("testdata", "transcript.txt")
	if *update {
		if err := os.WriteFile(path, s.transcript.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	// The committed transcript is this session's: the same commands, in
	// order (times and IDs differ from run to run).
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestBinarySession -update writes it)", err)
	}
	if a, b := commands(string(old)), commands(s.transcript.String()); a != b {
		t.Errorf("testdata/transcript.txt is stale (go test -run TestBinarySession -update rewrites it):\n%s\nwant:\n%s", a, b)
	}
}

// commands returns a transcript's command lines, reservation IDs elided.
func commands(transcript string) string {
	id := regexp.MustCompile(`[a-z]+/[0-9A-Za-z][0-9A-Za-z._-]*/[0-9a-z]+\.[0-9A-Z]+`)
	var out []string
	for _, l := range strings.Split(transcript, "\n") {
		if strings.HasPrefix(l, "$ ") {
			out = append(out, id.ReplaceAllString(l, "ID"))
		}
	}
	return strings.Join(out, "\n")
}

func TestIsTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	t.Setenv("QUOTACTL_FORCE_TTY", "")
	if isTerminal(w) {
		t.Error("a pipe is a terminal")
	}
	t.Setenv("QUOTACTL_FORCE_TTY", "1")
	if !isTerminal(w) {
		t.Error("QUOTACTL_FORCE_TTY=1 did not make it one")
	}
}
