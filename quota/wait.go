package quota

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Wait charges ch for cred like Take, but when a budget cannot pay now it
// blocks until the charge is admitted or ctx ends, trying again at the
// refusal's exact RetryAt (never polling sooner). Within a process, the
// waiters of one Limiter queue per owner and budget, first come, first
// served; across processes there is no shared queue (give a large job its own
// allocation with ContextWithAllocation). Errors other than exhaustion return
// at once; when ctx ends, Wait returns its error having taken nothing.
func (l *Limiter) Wait(ctx context.Context, cred Credential, ch Charge) (*Reservation, error) {
	return l.wait(ctx, cred, ch, -1)
}

// WithWait makes the Transport wait for capacity instead of failing: a
// request whose charge the budget cannot pay now waits in Limiter.Wait's
// queue for up to maxWait in all, then is sent. A refusal whose RetryAt is
// further away than what is left of maxWait fails at once with the
// *ExhaustedError, as without WithWait. Default: no waiting (maxWait 0).
func WithWait(maxWait time.Duration) TransportOption {
	return func(t *Transport) { t.maxWait = max(maxWait, 0) }
}

// take is the Transport's charge: Take, or a bounded Wait under WithWait.
func (t *Transport) take(ctx context.Context, cred Credential, ch Charge) (*Reservation, error) {
	if t.maxWait <= 0 {
		return t.limiter.Take(ctx, cred, ch)
	}
	return t.limiter.wait(ctx, cred, ch, t.maxWait)
}

// wait is Wait, giving up with the refusal when the wait would pass
// maxWait (maxWait < 0: no bound).
func (l *Limiter) wait(ctx context.Context, cred Credential, ch Charge, maxWait time.Duration) (*Reservation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id, err := l.identify(ctx, cred)
	if err != nil {
		if cancelled(ctx) {
			return nil, stopped(ctx, "wait") // the caller's stop, not the store's failure
		}
		// The credential could not be registered (the store is down or did
		// not answer in time, a label is taken, ...): the answer is Take's
		// to a registration failing so, failure policy (FailOpen) and
		// events included.
		return l.takeWith(ctx, cred, ch, err, false)
	}
	budgets := allocate(ctx, ch).Units
	w := waiters.join(l, id.account, budgets)
	defer waiters.leave(w)
	start := time.Now()
	for {
		select {
		case <-w.turn:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		res, err := l.Take(ctx, cred, ch)
		var ex *ExhaustedError
		if !errors.As(err, &ex) {
			return res, err
		}
		d := max(ex.RetryAfter, time.Microsecond)
		if maxWait >= 0 && time.Since(start)+d > maxWait {
			return nil, fmt.Errorf("%w (not waited for: over the wait limit of %v)", err, maxWait)
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
			w.turn <- struct{}{} // still the head: try again
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// waitKey names one FIFO queue: a limiter's budget for one account (the
// owner budgets are kept under; credentials of one owner share it).
type waitKey struct {
	l       *Limiter
	account string
	budget  string
}

type waiter struct {
	keys []waitKey
	turn chan struct{} // has a value when the waiter is at the head of every queue
	told bool          // turn was signalled; under waitQueues.mu
}

// waitQueues holds every Limiter's queues, so that a Limiter carries
// nothing for Wait until it is used; a queue is dropped when it empties.
type waitQueues struct {
	mu sync.Mutex
	q  map[waitKey][]*waiter
}

var waiters = waitQueues{q: make(map[waitKey][]*waiter)}

func (wq *waitQueues) join(l *Limiter, account string, budgets map[string]int64) *waiter {
	w := &waiter{turn: make(chan struct{}, 1)}
	for b := range budgets {
		w.keys = append(w.keys, waitKey{l, account, b})
	}
	wq.mu.Lock()
	defer wq.mu.Unlock()
	for _, k := range w.keys {
		wq.q[k] = append(wq.q[k], w)
	}
	wq.tell(w)
	return w
}

func (wq *waitQueues) leave(w *waiter) {
	wq.mu.Lock()
	defer wq.mu.Unlock()
	var next []*waiter
	for _, k := range w.keys {
		q := wq.q[k]
		if i := slices.Index(q, w); i >= 0 {
			q = slices.Delete(q, i, i+1)
		}
		if len(q) == 0 {
			delete(wq.q, k)
			continue
		}
		wq.q[k] = q
		next = append(next, q[0])
	}
	for _, n := range next {
		wq.tell(n)
	}
}

// tell gives w its turn if it heads every queue it is in. Under wq.mu.
func (wq *waitQueues) tell(w *waiter) {
	if w.told {
		return
	}
	for _, k := range w.keys {
		if wq.q[k][0] != w {
			return
		}
	}
	w.told = true
	w.turn <- struct{}{}
}
