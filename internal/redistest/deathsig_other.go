//go:build !linux

package redistest

import "os/exec"

// setDeathSignal does nothing here: Main and t.Cleanup stop the servers.
func setDeathSignal(cmd *exec.Cmd) {}
