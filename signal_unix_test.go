//go:build unix

package quotactl_test

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// pauseProcess stops process pid (SIGSTOP), as a hung server would be, and
// on Linux waits until the kernel reports it stopped. The test resumes it
// with resumeProcess; a stopped process still accepts TCP connections (the
// kernel completes the handshake) but answers nothing.
func pauseProcess(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", pid, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	stat := "/proc/" + strconv.Itoa(pid) + "/stat"
	if _, err := os.Stat(stat); err != nil {
		return // not Linux: SIGSTOP takes effect before the process next runs
	}
	waitFor(t, 10*time.Second, "process "+strconv.Itoa(pid)+" to stop", func() bool {
		b, err := os.ReadFile(stat)
		if err != nil {
			return false
		}
		// "PID (COMM) STATE ...": the state follows the last ')'.
		i := bytes.LastIndexByte(b, ')')
		return i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't')
	})
}

// resumeProcess continues a process stopped by pauseProcess.
func resumeProcess(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT %d: %v", pid, err)
	}
}
