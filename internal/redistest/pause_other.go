//go:build !unix

package redistest

import "errors"

// pauseProcess fails: stopping a redis-server process needs SIGSTOP, which
// this system lacks. (Without redis-server on PATH, Pause uses the proxy.)
func pauseProcess(pid int) error {
	return errors.New("redistest: Pause of a redis-server process needs SIGSTOP, a Unix signal; this system has none")
}

// resumeProcess fails like pauseProcess.
func resumeProcess(pid int) error {
	return errors.New("redistest: Resume of a redis-server process needs SIGCONT, a Unix signal; this system has none")
}
