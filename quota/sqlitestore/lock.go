package sqlitestore

import (
	"context"
	"math/rand/v2"
	"time"
)

// Waiting for the write lock.
//
// SQLite's own busy handler sleeps 1, 2, 5, ... and then 100ms between
// attempts. A process making decisions back to back leaves the lock free for
// microseconds between its transactions, so a process in that handler can
// miss every window for seconds and time out. So the write connections have
// no busy handler: begin polls for the lock in Go with short jittered
// sleeps (at most pollMax apart), and a process that has held the lock back
// to back for holdMax leaves it free for yieldFor (longer than pollMax), so
// a process waiting for it gets a turn within about holdMax. The cost, at
// saturation only, is yieldFor in every holdMax of throughput.
const (
	pollMin  = 20 * time.Microsecond
	pollMax  = 500 * time.Microsecond
	holdMax  = 20 * time.Millisecond
	yieldFor = time.Millisecond
)

// gate serialises a process's write transactions and paces them.
type gate struct {
	sem     chan struct{} // one token: held from begin to end
	since   time.Time     // start of the current run of back-to-back transactions
	lastEnd time.Time     // when the previous transaction ended
}

func newGate() gate { return gate{sem: make(chan struct{}, 1)} }

// begin starts a BEGIN IMMEDIATE transaction by calling try, waiting for
// the write lock up to the busy timeout or until ctx is done: try fails
// with SQLITE_BUSY while another process holds the lock. On success the
// caller holds the gate and must call end after the commit or rollback.
func (s *Store) begin(ctx context.Context, try func() error) error {
	g := &s.gate
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.closed {
		<-g.sem
		return errClosed
	}
	now := time.Now()
	if now.Sub(g.lastEnd) >= yieldFor {
		g.since = now // the lock was free long enough: a new run
	} else if now.Sub(g.since) >= holdMax {
		if err := sleep(ctx, yieldFor-now.Sub(g.lastEnd)); err != nil {
			<-g.sem
			return err
		}
		g.since = time.Now()
	}
	var deadline time.Time
	wait := pollMin
	for {
		err := try()
		if err == nil {
			if !deadline.IsZero() {
				g.since = time.Now() // another process had the lock
			}
			return nil
		}
		if !isBusy(err) {
			<-g.sem
			return err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(s.busy)
		}
		left := time.Until(deadline)
		if left <= 0 {
			<-g.sem
			return err // "database is locked"
		}
		if err := sleep(ctx, min(wait/2+rand.N(wait/2+1), left)); err != nil {
			<-g.sem
			return err
		}
		wait = min(2*wait, pollMax)
	}
}

// end releases the gate begin took.
func (s *Store) end() {
	s.gate.lastEnd = time.Now()
	<-s.gate.sem
}

func isBusy(err error) bool {
	code, ok := sqliteCode(err)
	return ok && code&0xff == 5 // SQLITE_BUSY
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryBusy calls fn until it returns something other than SQLITE_BUSY or
// deadline passes, sleeping a little between calls.
func retryBusy(deadline time.Time, fn func() error) error {
	wait := pollMin
	for {
		err := fn()
		if !isBusy(err) || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(wait/2 + rand.N(wait/2+1))
		wait = min(2*wait, 10*time.Millisecond)
	}
}
