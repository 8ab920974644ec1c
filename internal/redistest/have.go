package redistest

import "testing"

// HaveServer reports whether tests can start redis-server processes of
// their own (it is on PATH). Without it, and with $QUOTA_REQUIRE_REDIS=1,
// it fails the test instead; what says what the test wanted the server
// for. A test that gets false must still test something real in-process
// (a miniredis playing the same fault), never skip.
func HaveServer(t testing.TB, what string) bool {
	t.Helper()
	ok, why := haveServer(t, what)
	if !ok {
		t.Logf("redistest: FALLBACK for %s: %s", what, why)
	}
	return ok
}
