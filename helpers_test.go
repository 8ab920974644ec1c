package quotactl_test

import (
	"bytes"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

// t0 is the fixed instant the reliability tests pin their limiters' clocks
// to: under a fixed clock nothing leaves the window, so used only grows.
var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return t0 }

// waitFor polls cond until it holds or within passes, then fails the test
// naming what it waited for. It waits for processes, servers and goroutines
// to get somewhere; it never stands in for moving a clock.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(within, cond) {
		t.Fatalf("gave up after %v waiting for %s", within, what)
	}
}

// poll reports whether cond held before within passed.
func poll(within time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
	return true
}

// settleGoroutines waits until no more goroutines run than before, and
// fails with every goroutine's stack if some are left over: a leak.
func settleGoroutines(t *testing.T, before int) {
	t.Helper()
	if poll(10*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		return
	}
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	t.Fatalf("goroutine leak: %d running, %d before the test\n%s", runtime.NumGoroutine(), before, buf.String())
}
