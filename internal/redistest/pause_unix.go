//go:build unix

package redistest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// pauseProcess stops process pid (SIGSTOP), as a hung server would be. On
// Linux it returns once /proc says the process is stopped (a bounded poll
// on that condition); elsewhere SIGSTOP takes effect before the process
// next runs. A stopped process still accepts TCP connections (the kernel
// completes the handshake) but answers nothing.
func pauseProcess(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("redistest: SIGSTOP %d: %w", pid, err)
	}
	stat := "/proc/" + strconv.Itoa(pid) + "/stat"
	if _, err := os.Stat(stat); err != nil {
		return nil
	}
	stopped := func() bool {
		b, err := os.ReadFile(stat)
		if err != nil {
			return false
		}
		// "PID (COMM) STATE ...": the state follows the last ')'.
		i := bytes.LastIndexByte(b, ')')
		return i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't')
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !stopped() {
		select {
		case <-deadline.C:
			return fmt.Errorf("redistest: process %d not stopped 10s after SIGSTOP", pid)
		case <-tick.C:
		}
	}
	return nil
}

// resumeProcess continues a process stopped by pauseProcess.
func resumeProcess(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("redistest: SIGCONT %d: %w", pid, err)
	}
	return nil
}
