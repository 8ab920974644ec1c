// Package testkit holds the helpers the module's tests share, so that each
// is written once: a Buffer that goroutines may log to, a fake Clock (with
// backoff timers for retry loops) that tests move by hand, and Child, which
// re-executes a test binary as a child process in a role.
//
// It is for tests only: _test.go files and the test-support packages
// (quota/storetest, internal/redistest) may import it; nothing a program
// links may. It depends on the standard library and
// github.com/cenkalti/backoff/v4 alone, so the tests of any package,
// package quota's own included, can use it.
//
// Below it, package overspend checks what concurrent callers sharing a
// budget were granted and refused; the go-redis hook helper is
// redistest.Hook, beside the Redis servers.
package testkit
