package redistest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the server when the test binary
// exits, even when Main did not run.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
