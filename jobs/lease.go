package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// DefaultLeaseTTL is how long a run's lease lives unless renewed, unless
// WithLeaseTTL says otherwise. A run renews it every third of that; a
// crashed holder's lease ends at most this long after its last renewal.
const DefaultLeaseTTL = 30 * time.Second

// ErrLeaseLost is the cause (context.Cause) of a run's context being
// cancelled when the run's lease could not be renewed: it expired or
// another run took it over. The run's later checkpoint writes are refused.
var ErrLeaseLost = backend.ErrLeaseLost

const waitingPrefix = "jobs/waiting/"

func waitingKey(job string) string { return waitingPrefix + job }

// WaitingMark is a job's mark, kept in the store, that the budget it needs is
// spent until Until: runs before then do not start (their ticks are
// skipped, and logged once per window). An Exhausted run sets it; the next
// OK run clears it.
type WaitingMark struct {
	Job    string    `json:"job"`
	Budget string    `json:"budget"` // "API/BUDGET" that stopped the run
	Cost   int64     `json:"cost"`   // what the refused charge asked for
	Until  time.Time `json:"until"`  // when capacity returns
	Run    string    `json:"run"`    // the run that stopped
	Since  time.Time `json:"since"`  // when it stopped
}

// LoadWaiting returns job's waiting mark. found is false when the job is
// not waiting for capacity at now (no mark, or one that has ended).
func LoadWaiting(ctx context.Context, store quota.StateStore, job string, now time.Time) (w WaitingMark, found bool, err error) {
	if err := backend.CheckName("job", job); err != nil {
		return w, false, fmt.Errorf("jobs: waiting: %w", err)
	}
	b, err := store.LoadState(ctx, waitingKey(job))
	if errors.Is(err, quota.ErrNotFound) {
		return w, false, nil
	}
	if err != nil {
		return w, false, fmt.Errorf("jobs: load waiting mark of %q: %w", job, err)
	}
	if len(b) == 0 {
		return w, false, nil
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return w, false, fmt.Errorf("jobs: waiting mark of %q: %w", job, err)
	}
	return w, now.Before(w.Until), nil
}

// CurrentLease returns the live lease on job's runs: who holds it (host,
// process and run) and until when. found is false when no run holds it.
func CurrentLease(ctx context.Context, store quota.StateStore, job string, now time.Time) (l backend.StateLease, found bool, err error) {
	if err := backend.CheckName("job", job); err != nil {
		return l, false, fmt.Errorf("jobs: lease: %w", err)
	}
	l, err = store.LoadLease(ctx, &backend.StateLeaseRequest{Key: checkpointKey(job), Now: now})
	if errors.Is(err, quota.ErrNotFound) {
		return l, false, nil
	}
	if err != nil {
		return l, false, fmt.Errorf("jobs: lease of %q: %w", job, err)
	}
	return l, true, nil
}

// processName names this process in lease holders: "host:pid".
var processName = func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}()

// leaseNow is the Now of lease requests: the scheduler's clock when one was
// injected (WithClock), else zero, the store's own clock.
func (s *Scheduler) leaseNow() time.Time {
	if !s.clockSet {
		return time.Time{}
	}
	return s.now()
}

// acquire takes run's lease. held is set, and err nil, when another run
// holds it.
func (s *Scheduler) acquire(ctx context.Context, run *Run) (held *backend.StateLeaseHeldError, err error) {
	sent := time.Now()
	l, err := s.store.AcquireLease(ctx, &backend.StateLeaseRequest{
		Key: checkpointKey(run.job.name), Holder: processName + " run " + run.id, TTL: s.leaseTTL, Now: s.leaseNow(),
	})
	if errors.As(err, &held) {
		return held, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: lease for %q: %w", run.job.name, err)
	}
	run.lease, run.leaseSent = l, sent
	return nil, nil
}

// renew keeps run's lease alive every third of its TTL until done is
// closed. When the lease is lost it cancels the run with ErrLeaseLost; so
// it does when the lease may have ended in the store without a renewal
// getting through (the store unreachable or locked for a whole TTL, the
// process paused): the store counts the TTL from an instant no earlier than
// when the request that granted or renewed the lease was sent, so past
// that instant plus the TTL, another process's run may hold the lease.
func (s *Scheduler) renew(run *Run, cancel context.CancelCauseFunc, done <-chan struct{}) {
	every := s.leaseTTL / 3
	valid := run.leaseSent.Add(s.leaseTTL) // the lease is surely ours until then
	t := time.NewTimer(every)
	defer t.Stop()
	expired := time.NewTimer(time.Until(valid))
	defer expired.Stop()
	lapse := func(err error) {
		args := []any{"ttl", s.leaseTTL}
		if err != nil {
			args = append(args, "error", err)
		}
		run.log.Error("jobs: run's lease ran out before it could be renewed: cancelling it; another run may hold the lease now", args...)
		cancel(fmt.Errorf("jobs: %s: %w: not renewed within its TTL of %v", run.job.name, ErrLeaseLost, s.leaseTTL))
	}
	var lastErr error
	for {
		select {
		case <-done:
			return
		case <-expired.C:
			lapse(lastErr)
			return
		case <-t.C:
		}
		sent := time.Now()
		if !sent.Before(valid) { // the process was paused past it: no renewal can help
			lapse(lastErr)
			return
		}
		deadline := sent.Add(every)
		if valid.Before(deadline) {
			deadline = valid
		}
		ctx, stop := context.WithDeadline(context.Background(), deadline)
		_, err := s.store.RenewLease(ctx, &backend.StateLeaseRequest{Key: checkpointKey(run.job.name), Token: run.lease.Token, TTL: s.leaseTTL, Now: s.leaseNow()})
		stop()
		switch {
		case errors.Is(err, backend.ErrLeaseLost):
			run.log.Error("jobs: run lost its lease (expired or taken over): cancelling it; its checkpoint writes are refused", "error", err)
			cancel(fmt.Errorf("jobs: %s: %w", run.job.name, ErrLeaseLost))
			return
		case err != nil:
			if !time.Now().Before(valid) {
				lapse(err)
				return
			}
			lastErr = err
			run.log.Warn("jobs: lease renewal failed; retrying", "error", err, "lease_valid_for", time.Until(valid).Round(time.Millisecond))
		default:
			valid, lastErr = sent.Add(s.leaseTTL), nil
			expired.Reset(time.Until(valid))
		}
		t.Reset(every)
	}
}

// release ends run's lease.
func (s *Scheduler) release(run *Run) {
	ctx, cancel := context.WithTimeout(context.Background(), historyTimeout)
	defer cancel()
	err := s.store.ReleaseLease(ctx, &backend.StateLeaseRequest{Key: checkpointKey(run.job.name), Token: run.lease.Token, Now: s.leaseNow()})
	switch {
	case errors.Is(err, backend.ErrLeaseLost):
		run.log.Warn("jobs: the run's lease had already ended at release: another run may have started meanwhile", "error", err)
	case err != nil:
		run.log.Warn("jobs: lease not released; it expires on its own", "error", err, "ttl", s.leaseTTL)
	}
}

// waiting reports whether j waits for capacity at now, logging it once per
// window. A job with WithLimiter whose budget can pay again (a reset, a
// raised limit) is not waiting, whatever the mark says.
func (s *Scheduler) waiting(ctx context.Context, j *job, now time.Time) (WaitingMark, bool) {
	w, found, err := LoadWaiting(ctx, s.store, j.name, now)
	if err != nil {
		s.log.Warn("jobs: cannot read the job's waiting mark; running", "job", j.name, "error", err)
		return w, false
	}
	if !found || j.capacityBack(ctx, w) {
		return w, false
	}
	s.mu.Lock()
	first := !j.waitLogged.Equal(w.Until)
	j.waitLogged = w.Until
	s.mu.Unlock()
	if first {
		s.log.Info("jobs: waiting for capacity: runs before it returns are skipped", "job", j.name,
			"budget", w.Budget, "until", w.Until, "in", w.Until.Sub(now).Round(time.Second))
	}
	return w, true
}

// capacityBack asks the job's limiter whether the budget of w can pay the
// refused cost again.
func (j *job) capacityBack(ctx context.Context, w WaitingMark) bool {
	if j.limiter == nil {
		return false
	}
	api := j.limiter.API() + "/"
	if len(w.Budget) <= len(api) || w.Budget[:len(api)] != api {
		return false
	}
	us, err := j.limiter.Status(ctx, j.cred)
	if err != nil {
		return false
	}
	for _, u := range us {
		if api+u.Budget == w.Budget {
			return u.ExhaustedUntil.IsZero() && u.Remaining >= max(w.Cost, 1)
		}
	}
	return false
}

// mark records, after a run, whether the job now waits for capacity.
func (s *Scheduler) mark(ctx context.Context, rec Record) error {
	var w WaitingMark
	switch {
	case rec.Outcome == Exhausted && rec.Exhausted != nil && rec.Exhausted.RetryAt.After(rec.End):
		w = WaitingMark{Job: rec.Job, Budget: rec.Exhausted.Budget, Cost: rec.Exhausted.Cost, Until: rec.Exhausted.RetryAt, Run: rec.Run, Since: rec.End}
	case rec.Outcome == OK || rec.Outcome == Exhausted:
		// capacity is there, or returned already: clear any mark
	default:
		return nil
	}
	b, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("jobs: waiting mark of %q: %w", rec.Job, err)
	}
	if w.Until.IsZero() {
		if _, found, _ := LoadWaiting(ctx, s.store, rec.Job, time.Time{}); !found {
			return nil // nothing to clear
		}
	}
	if err := s.store.SaveState(ctx, waitingKey(rec.Job), b); err != nil {
		return fmt.Errorf("jobs: save waiting mark of %q: %w", rec.Job, err)
	}
	return nil
}
