//go:build unix

package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadOnlyCommandsAsAnotherUser: an operator who may read but not write
// a 0644 store in a directory of another user runs the inspecting commands
// (status, list, history, jobs, costs estimate, budget list); commands that
// write fail. Run as root, the commands run as nobody (root ignores file
// modes).
func TestReadOnlyCommandsAsAnotherUser(t *testing.T) {
	bin := buildBinary(t)
	dir, err := os.MkdirTemp("", "quotactl-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755); _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "quota.db")
	owner := []string{"HOME=" + dir, "QUOTA_STORE=sqlite:" + db, "KEY=AIzaSy-read-only-test"}
	run := func(env []string, cred *syscall.Credential, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("quotactl %v: %v", args, err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}
	for _, args := range [][]string{
		{"budget", "set", "youtube/units", "--limit", "10", "--window", "1h"},
		{"take", "youtube", "--credential-env", "KEY", "--label", "yt-key-1", "--cost", "4"},
	} {
		if code, _, errOut := run(owner, nil, args...); code != 0 {
			t.Fatalf("owner: quotactl %v: exit %d: %s", args, code, errOut)
		}
	}
	qbin := bin
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		qbin = filepath.Join(dir, "quotactl")
		copyBinary(t, bin, qbin)
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	bin = qbin
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	reader := []string{"HOME=" + t.TempDir(), "QUOTA_STORE=sqlite:" + db}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "4/10"},
		{[]string{"list"}, "yt-key-1"},
		{[]string{"history", "youtube", "--label", "yt-key-1"}, "4 of 10"},
		{[]string{"jobs"}, ""},
		{[]string{"--json", "costs", "estimate", "youtube", "videos.list=2", "--label", "yt-key-1"}, `"left": 6`},
		{[]string{"budget", "list"}, "youtube/units"},
		{[]string{"credential", "list"}, "yt-key-1"},
	} {
		code, out, errOut := run(reader, cred, tc.args...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("reader: quotactl %v: exit %d, stdout %q, stderr %q; want %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if code, _, errOut := run(append(reader, "KEY=AIzaSy-read-only-test"), cred, "take", "youtube", "--credential-env", "KEY", "--cost", "1"); code == 0 {
		t.Errorf("reader: take succeeded on a file it may not write (stderr %q): the test cannot tell a read-only open from another", errOut)
	}
}

// TestReadOnlyCommandOnMissingDefaultStore: an inspecting command with no
// store says so and creates nothing, not even the state directory.
func TestReadOnlyCommandOnMissingDefaultStore(t *testing.T) {
	bin := buildBinary(t)
	home := t.TempDir()
	state := filepath.Join(home, "state")
	for _, args := range [][]string{{"status"}, {"list"}, {"budget", "list"}, {"jobs"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"HOME=" + home, "XDG_STATE_HOME=" + state}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("quotactl %v: %v: %s", args, err, errOut.String())
		}
		want := "no store at sqlite:" + filepath.Join(state, "quotactl", "quota.db") + " (the default store) yet"
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("quotactl %v: stderr %q; want it to say %q", args, errOut.String(), want)
		}
		if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("quotactl %v created %s", args, state)
		}
	}
}

// TestWriteCommandOnMissingDefaultStore: a command that writes but needs
// what a store records fails on a default store that does not exist, says
// so, and creates nothing, not even the state directory; budget set creates
// the store.
func TestWriteCommandOnMissingDefaultStore(t *testing.T) {
	bin := buildBinary(t)
	home := t.TempDir()
	state := filepath.Join(home, "state")
	env := []string{"HOME=" + home, "XDG_STATE_HOME=" + state, "KEY=AIzaSy-missing-default"}
	for _, args := range [][]string{
		{"adjust", "youtube", "--label", "k", "--budget", "units", "--used", "3"},
		{"take", "youtube", "--credential-env", "KEY", "--cost", "1"},
		{"budget", "set", "youtube/units", "--limit", "0", "--window", "1h"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("quotactl %v: %v, want exit 2: %s", args, err, errOut.String())
		}
		if args[0] != "budget" {
			want := "no store at sqlite:" + filepath.Join(state, "quotactl", "quota.db") + " (the default store)"
			if !strings.Contains(errOut.String(), want) {
				t.Errorf("quotactl %v: stderr %q; want it to say %q", args, errOut.String(), want)
			}
		}
		if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("quotactl %v created %s", args, state)
		}
	}
}

func copyBinary(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
