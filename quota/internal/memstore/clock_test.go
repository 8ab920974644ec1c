package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// TestHostClockReadsTheWallClock: the cheap host clock tells the wall
// clock's time, on the reading that renews it and on those that add the
// monotonic clock's time to it.
func TestHostClockReadsTheWallClock(t *testing.T) {
	var c HostClock
	for i := range 1000 {
		before := time.Now().UnixMicro()
		got := c.NowUS()
		after := time.Now().UnixMicro()
		// A ms either way: the two clocks are read at different ns, and
		// where the monotonic clock is not slewed with the wall clock
		// (not Linux) they part by up to 500 ppm over clockEvery.
		if got < before-1000 || got > after+1000 {
			t.Fatalf("reading %d: %d µs, want between %d and %d", i, got, before, after)
		}
	}
}

// TestMemoryTakeNotBeforePrune: a decision on the host clock read before
// the store's lock (so a later decision may have pruned the log first)
// happens at the instant the log was pruned at, not at its reading: at
// the reading it would count the log without entries already dropped, and
// admit more than the limit over a window.
func TestMemoryTakeNotBeforePrune(t *testing.T) {
	ctx := context.Background()
	s := New()
	b := backend.Budget{Name: "units", Limit: 10, Window: backend.Sliding(time.Second)}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	take := func(host, cost int64) (bool, time.Time) {
		t.Helper()
		ok, at, _, err := s.take(ctx, &backend.TakeRequest{API: "api", Owner: "o", Nonce: "n"}, host, false, []backend.Debit{{Budget: b, Cost: cost}}, make([]backend.Usage, 1))
		if err != nil {
			t.Fatal(err)
		}
		return ok, at
	}
	if ok, _ := take(t0, 9); !ok {
		t.Fatal("first take refused")
	}
	// A second later the first entry has expired, and is pruned.
	if ok, _ := take(t0+time.Second.Microseconds(), 1); !ok {
		t.Fatal("second take refused")
	}
	// A decision read 1ms earlier: at that instant the first entry still
	// counts (9 + 1 + 9 > 10), but it is gone from the log. It happens at
	// the second's instant instead, where 1 + 9 fits.
	ok, at := take(t0+999*time.Millisecond.Microseconds(), 9)
	if want := time.UnixMicro(t0 + time.Second.Microseconds()); !ok || !at.Equal(want) {
		t.Fatalf("late reading: ok %v at %v; want admitted at %v", ok, at, want)
	}
	if ok, _ := take(t0+time.Second.Microseconds(), 1); ok {
		t.Fatal("a take over the limit admitted")
	}
}
