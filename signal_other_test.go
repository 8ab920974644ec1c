//go:build !unix

package quotactl_test

import "testing"

func pauseProcess(t *testing.T, pid int) {
	t.Helper()
	t.Fatalf("this test stops a redis-server with SIGSTOP, which needs a Unix system")
}

func resumeProcess(t *testing.T, pid int) { t.Helper() }
