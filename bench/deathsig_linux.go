package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the redis-server a run started when
// the run dies without stopping it (a crash, SIGKILL).
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
