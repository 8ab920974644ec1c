package testkit

import (
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Clock is a fake clock that tests move by hand: Now returns the set
// instant, and only Set, Add and the clock's timers move it, so a test
// reaches any instant without sleeping. Pass c.Now where code takes a
// func() time.Time (quota.WithClock), c itself where it takes a
// backoff.Clock. It is safe for concurrent use; the zero Clock reads the
// zero time.
type Clock struct {
	mu    sync.Mutex
	t     time.Time
	waits []time.Duration
}

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's instant.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t, forward or back.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// NewTimer returns a backoff.Timer on c that fires at once: Start(d)
// records d (see Waits), moves c on by d and fires at the new instant. It
// fits quota.WithRetryClock(c, c.NewTimer): a retry loop waits out its
// backoff on the clock it reads, and never sleeps.
func (c *Clock) NewTimer() backoff.Timer { return &timer{clock: c, c: make(chan time.Time, 1)} }

// StuckTimer returns a backoff.Timer on c that never fires: Start(d)
// records d (see Waits) and calls onStart, where a test ends the wait
// (say, by cancelling the request that waits). The clock does not move.
func (c *Clock) StuckTimer(onStart func()) backoff.Timer {
	return &timer{clock: c, onStart: onStart, c: make(chan time.Time, 1)}
}

// Waits returns the durations the clock's timers were started with, in
// the order they were started.
func (c *Clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// timer is what NewTimer and StuckTimer return.
type timer struct {
	clock   *Clock
	onStart func() // nil: fire at once
	c       chan time.Time
}

func (t *timer) Start(d time.Duration) {
	c := t.clock
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	if t.onStart != nil {
		t.onStart()
		return
	}
	c.Add(d)
	t.c <- c.Now()
}

func (t *timer) Stop() {}

func (t *timer) C() <-chan time.Time { return t.c }
