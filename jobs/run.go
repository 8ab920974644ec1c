package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// Func is a job. It does its work under ctx, which carries the run's unit
// counter and allocation (charge every quota.Limiter with it, or a request
// made with it), and is cancelled when the scheduler stops. Return an error
// matching quota.ErrExhausted (as a metered http.Client does) to stop cleanly
// when the budget is spent; save a checkpoint first with run.Save so the
// next run resumes there.
type Func func(ctx context.Context, run *Run) error

// Run is one execution of a job. Its methods are safe for concurrent use by
// the goroutines of that job.
type Run struct {
	s       *Scheduler
	job     *job
	id      string
	trigger Trigger
	start   time.Time
	log     *slog.Logger
	lease   backend.StateLease // the job's lease, held for the run's duration
	// leaseSent is when the request that granted the lease was sent (the
	// local, monotonic clock): the lease is surely the run's until then
	// plus the TTL, whatever the store's clock.
	leaseSent time.Time

	mu        sync.Mutex
	spent     map[string]int64
	charges   int64
	unmetered int64

	recorded atomic.Bool
}

// Job returns the job's name.
func (r *Run) Job() string { return r.job.name }

// ID returns the run's unique ID, as in Record.Run.
func (r *Run) ID() string { return r.id }

// Start returns when the run started, on the scheduler's clock.
func (r *Run) Start() time.Time { return r.start }

// Trigger returns what started the run.
func (r *Run) Trigger() Trigger { return r.trigger }

// Lease returns the run's lease on its job: holder, fencing token and
// expiry (as of the grant or the last renewal).
func (r *Run) Lease() backend.StateLease { return r.lease }

// Logger returns the scheduler's logger with the job and run attached.
func (r *Run) Logger() *slog.Logger { return r.log }

// Spent returns the units charged so far per "API/BUDGET", refunds
// subtracted.
func (r *Run) Spent() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.spent)
}

// observe is the quota.ChargeFunc on the run's context.
func (r *Run) observe(res *quota.Reservation, refund bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if res.Unmetered {
		if !refund {
			r.unmetered++
		}
		return
	}
	if !refund {
		r.charges++
	}
	for _, u := range res.Usage {
		k := res.API + "/" + u.Budget
		if refund {
			r.spent[k] -= u.Cost
		} else {
			r.spent[k] += u.Cost
		}
		if r.spent[k] == 0 {
			delete(r.spent, k)
		}
	}
}

// Save stores cursor, as JSON, as the job's checkpoint, replacing the last
// one: the next run's Resume reads it back. The write is fenced by the
// run's lease: once another run has taken the job's lease over (this one's
// expired), it is refused with an error wrapping ErrLeaseLost, so a run
// that lost its lease never overwrites a newer checkpoint. Save after each unit of work
// (a page, a region) so an exhausted or cut-off run loses nothing. To save
// after the run's context is cancelled, pass context.WithoutCancel(ctx).
func (r *Run) Save(ctx context.Context, cursor any) error {
	raw, err := json.Marshal(cursor)
	if err != nil {
		return fmt.Errorf("jobs: save checkpoint of %q: %w: cursor: %w", r.job.name, quota.ErrInvalid, err)
	}
	b, err := json.Marshal(Checkpoint{Job: r.job.name, Run: r.id, Saved: r.s.now(), Cursor: raw})
	if err != nil {
		return fmt.Errorf("jobs: save checkpoint of %q: %w", r.job.name, err)
	}
	if err := r.s.store.SaveStateFenced(ctx, checkpointKey(r.job.name), b, r.lease.Token); err != nil {
		return fmt.Errorf("jobs: save checkpoint of %q: %w", r.job.name, err)
	}
	return nil
}

// Resume reads the job's checkpoint into cursor (a pointer, as for
// json.Unmarshal). found is false, and cursor untouched, when there is none:
// start from the beginning.
func (r *Run) Resume(ctx context.Context, cursor any) (found bool, err error) {
	cp, found, err := LoadCheckpoint(ctx, r.s.store, r.job.name)
	if err != nil || !found {
		return false, err
	}
	if err := json.Unmarshal(cp.Cursor, cursor); err != nil {
		return false, fmt.Errorf("jobs: resume %q: checkpoint does not fit %T: %w", r.job.name, cursor, err)
	}
	return true, nil
}

// Clear forgets the job's checkpoint, so the next run starts from the
// beginning (a job that finished its whole cycle calls it).
func (r *Run) Clear(ctx context.Context) error {
	b, err := json.Marshal(Checkpoint{Job: r.job.name, Run: r.id, Saved: r.s.now()})
	if err != nil {
		return fmt.Errorf("jobs: clear checkpoint of %q: %w", r.job.name, err)
	}
	if err := r.s.store.SaveStateFenced(ctx, checkpointKey(r.job.name), b, r.lease.Token); err != nil {
		return fmt.Errorf("jobs: clear checkpoint of %q: %w", r.job.name, err)
	}
	return nil
}

// record builds the run's Record as it ends.
func (r *Run) record(end time.Time, out Outcome, errText string, exh *Exhaustion) Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Record{
		Job: r.job.name, Run: r.id, Trigger: r.trigger, Start: r.start, End: end, Outcome: out,
		Spent: maps.Clone(r.spent), Charges: r.charges, Unmetered: r.unmetered, Error: errText, Exhausted: exh,
		Holder: r.lease.Holder,
	}
}
