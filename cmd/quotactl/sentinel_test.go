package main

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/internal/redistest"
)

// TestSentinelErrors runs the binary against a Sentinel set-up of the
// test's own: a master name the Sentinel does not monitor, a Sentinel that
// is down, and a master that is down. Each is one line on stderr saying
// which (go-redis logs its dial failures and Sentinel notes to stderr on
// its own unless the binary silences it), with exit code 1.
func TestSentinelErrors(t *testing.T) {
	bin := buildBinary(t)
	s := redistest.NewSentinel(t)
	down := redistest.Server(t)
	down.Kill()
	for _, tc := range []struct {
		what, url, want string
		before          func()
	}{
		{"unknown master", "redis+sentinel://" + s.Sentinel.Addr() + "/nosuchmaster",
			`unknown master "nosuchmaster": no Sentinel that answered monitors it (` + s.Sentinel.Addr() + ` monitors "mymaster")`, nil},
		{"Sentinel down", "redis+sentinel://" + down.Addr() + "/mymaster",
			`cannot ask the Sentinels for master "mymaster": ` + down.Addr() + ": dial tcp", nil},
		{"master down", "redis+sentinel://" + s.Sentinel.Addr() + "/mymaster?open_timeout=1s",
			`master "mymaster" at ` + s.Master.Addr() + ": ", s.Master.Kill},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			cmd := exec.Command(bin, "status", "--store", tc.url)
			cmd.Env = []string{"HOME=" + t.TempDir()}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v; want 1\nstderr: %s", err, stderr.String())
			}
			got := stderr.String()
			if strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "quotactl: ") || !strings.Contains(got, tc.want) {
				t.Errorf("stderr %q; want one line saying %q", got, tc.want)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout %q", stdout.String())
			}
		})
	}
}
