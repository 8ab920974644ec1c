//go:build !linux

package main

import "os/exec"

// setDeathSignal does nothing here: the run stops its redis-server on every
// normal exit and on SIGINT/SIGTERM.
func setDeathSignal(cmd *exec.Cmd) {}
