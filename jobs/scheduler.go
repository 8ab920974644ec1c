package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// Scheduler runs registered jobs on their cron schedules (Run) or one at a
// time on demand (RunOnce), recording each run's outcome in a StateStore.
//
// Every job runs with panic recovery and never overlaps itself, across
// processes and hosts sharing the store: a run holds the job's lease in the
// store for its duration (renewed while it runs, released at the end), and
// a run that finds the lease held ends Skipped, recorded, with one log line
// naming the holder and when its lease expires. A holder that crashed
// stops renewing; its lease expires and the next run resumes from the
// checkpoint. Within one process a tick that comes while the job's
// previous run is still going is skipped and logged (cron.Recover and
// cron.SkipIfStillRunning are chained on every job, and RunOnce refuses
// with ErrBusy while the same job runs in this process).
//
// While the budget a job needs is spent (its last run ended Exhausted), its
// runs do not start before capacity returns: the WaitingMark in the store
// says until when, for every process; such ticks are logged once per
// window and not recorded.
// A Scheduler is safe for concurrent use. Make one with New.
type Scheduler struct {
	store       quota.StateStore
	log         *slog.Logger
	clock       func() time.Time
	clockSet    bool // WithClock: lease requests carry the clock's now
	leaseTTL    time.Duration
	loc         *time.Location
	keep        int
	stopTimeout time.Duration
	cron        *cron.Cron

	mu      sync.Mutex
	jobs    map[string]*job
	base    context.Context // the scheduled runs' parent, set by Run
	running map[*Run]struct{}
}

type job struct {
	name    string
	spec    string
	sched   cron.Schedule // nil: RunOnce only
	fn      Func
	allocs  [][2]string
	timeout time.Duration
	busy    chan struct{} // holds a token while a run is going
	limiter *quota.Limiter
	cred    quota.Credential
	plan    *Plan
	// waitLogged is the WaitingMark.Until last logged, under Scheduler.mu:
	// one log line per window.
	waitLogged time.Time
}

var (
	// ErrBusy is returned by RunOnce when the job is already running in
	// this scheduler.
	ErrBusy = errors.New("jobs: job already running")

	// ErrStopped is the cause (context.Cause) of a scheduled run's context
	// being cancelled when Run's context is done.
	ErrStopped = errors.New("jobs: scheduler stopping")
)

// historyTimeout bounds the store write that records a run.
const historyTimeout = 10 * time.Second

// New returns a Scheduler that keeps checkpoints and run history in store
// (usually the quota.Store the jobs' limiter uses: every store in this module
// is a StateStore).
//
// Defaults: slog.Default(), time.Now for run timestamps, specs read in
// time.Local, DefaultHistory runs kept per job, DefaultStopTimeout.
func New(store quota.StateStore, opts ...Option) *Scheduler {
	s := &Scheduler{
		store:       store,
		clock:       time.Now,
		loc:         time.Local,
		keep:        DefaultHistory,
		stopTimeout: DefaultStopTimeout,
		leaseTTL:    DefaultLeaseTTL,
		jobs:        make(map[string]*job),
		running:     make(map[*Run]struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.cron = cron.New(cron.WithLocation(s.loc), cron.WithParser(specParser), cron.WithLogger(cronLogger{s.log}))
	return s
}

func (s *Scheduler) now() time.Time { return s.clock() }

// Add registers fn as the job name, run on spec: a cron spec with five
// fields ("*/15 * * * *"), or six with leading seconds ("30 */15 * * * *"),
// or a descriptor ("@hourly", "@every 15m": at least 1s), optionally prefixed with
// "CRON_TZ=Zone " to read it in that zone. An empty spec registers a job that
// runs only through RunOnce. Names are letters, digits, '.', '_' and '-'.
// Jobs may be added while Run is running.
func (s *Scheduler) Add(name, spec string, fn Func, opts ...JobOption) error {
	if err := backend.CheckName("job", name); err != nil {
		return fmt.Errorf("jobs: add: %w", err)
	}
	if fn == nil {
		return fmt.Errorf("jobs: add %q: %w: nil func", name, quota.ErrInvalid)
	}
	j := &job{name: name, spec: spec, fn: fn, busy: make(chan struct{}, 1)}
	for _, o := range opts {
		o(j)
	}
	for _, a := range j.allocs {
		if err := backend.CheckName("budget", a[0]); err != nil {
			return fmt.Errorf("jobs: add %q: allocation: %w", name, err)
		}
		if err := backend.CheckName("budget", a[1]); err != nil {
			return fmt.Errorf("jobs: add %q: allocation: %w", name, err)
		}
	}
	if spec != "" {
		sched, err := parseSpec(spec)
		if err != nil {
			return fmt.Errorf("jobs: add %q: %w", name, err)
		}
		j.sched = sched
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.jobs[name]; dup {
		return fmt.Errorf("jobs: add %q: %w: a job of that name is already registered", name, quota.ErrInvalid)
	}
	s.jobs[name] = j
	if j.sched != nil {
		l := cronLogger{s.log.With("job", name)}
		s.cron.Schedule(j.sched, cron.NewChain(cron.Recover(l), cron.SkipIfStillRunning(l)).Then(cron.FuncJob(func() { s.tick(j) })))
	}
	return nil
}

// Next returns when the job's schedule next fires after now, or the zero
// time for an unknown job or one with no schedule.
func (s *Scheduler) Next(name string) time.Time {
	s.mu.Lock()
	j := s.jobs[name]
	s.mu.Unlock()
	if j == nil || j.sched == nil {
		return time.Time{}
	}
	return j.sched.Next(s.now().In(s.loc))
}

// Run starts the schedule and blocks until ctx is done (see SignalContext
// for SIGINT and SIGTERM). Then it stops starting runs, cancels the running
// jobs' contexts (cause ErrStopped), and waits for them up to the stop
// timeout. Runs still going then are cut off: each is logged and recorded as
// Abandoned, and Run returns an error naming them. Run returns nil after a
// clean stop. It may be called once.
func (s *Scheduler) Run(ctx context.Context) error {
	base, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	s.mu.Lock()
	if s.base != nil {
		s.mu.Unlock()
		return errors.New("jobs: Run called twice")
	}
	s.base = base
	var names []string
	var all []*job
	for name, j := range s.jobs {
		if j.sched != nil {
			names = append(names, name)
		}
		all = append(all, j)
	}
	s.mu.Unlock()
	for _, j := range all {
		if err := s.saveInfo(ctx, j); err != nil {
			s.log.Warn("jobs: job info not recorded", "job", j.name, "error", err)
		}
	}
	slices.Sort(names)

	s.cron.Start()
	s.log.Info("jobs: scheduler started", "jobs", names)
	<-ctx.Done()
	stopped := s.cron.Stop() // no new runs; done when the running ones return
	cancel(ErrStopped)
	s.log.Info("jobs: stopping: running jobs cancelled", "cause", context.Cause(ctx), "timeout", s.stopTimeout)

	timer := time.NewTimer(s.stopTimeout)
	defer timer.Stop()
	select {
	case <-stopped.Done():
		s.log.Info("jobs: scheduler stopped")
		return nil
	case <-timer.C:
	}

	s.mu.Lock()
	runs := make([]*Run, 0, len(s.running))
	for r := range s.running {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	slices.SortFunc(runs, func(a, b *Run) int { return strings.Compare(a.job.name, b.job.name) })
	var cut []string
	for _, r := range runs {
		end := s.now()
		rec := r.record(end, Abandoned, fmt.Sprintf("cut off: still running %v after the stop timeout of %v", end.Sub(r.start), s.stopTimeout), nil)
		if ok, _ := s.finish(base, r, rec, nil); ok {
			cut = append(cut, r.job.name+" ("+r.id+")")
		}
	}
	return fmt.Errorf("jobs: stop: %d run(s) cut off after %v: %s", len(cut), s.stopTimeout, strings.Join(cut, ", "))
}

// RunOnce runs the job name now, under ctx, records the run in the history
// and returns its Record. The error is nil when the run ended OK or
// Exhausted (a clean stop: the next run resumes), or Skipped (another
// process's run holds the job's lease: recorded, not started), and wraps the
// job's error when it Failed, Panicked or was Cancelled; it is ErrBusy when
// the job is already running here, and wraps quota.ErrNotFound for an
// unknown job. While the job waits for capacity (see WaitingMark) the run
// does not start: the Record's Outcome is Waiting, the error nil, and
// nothing is recorded.
// Failing to record the run is also an error. It suits system cron: one
// process, one run, exit status from the error.
func (s *Scheduler) RunOnce(ctx context.Context, name string) (Record, error) {
	s.mu.Lock()
	j := s.jobs[name]
	s.mu.Unlock()
	if j == nil {
		return Record{}, fmt.Errorf("jobs: run %q: %w: no such job", name, quota.ErrNotFound)
	}
	return s.execute(ctx, j, Once)
}

// tick is a scheduled run.
func (s *Scheduler) tick(j *job) {
	s.mu.Lock()
	base := s.base
	s.mu.Unlock()
	if _, err := s.execute(base, j, Scheduled); errors.Is(err, ErrBusy) {
		s.log.Info("jobs: tick skipped: the job is still running", "job", j.name)
	}
}

// execute runs j once under parent and records the run.
func (s *Scheduler) execute(parent context.Context, j *job, trigger Trigger) (Record, error) {
	select {
	case j.busy <- struct{}{}:
	default:
		return Record{}, fmt.Errorf("%w: %q", ErrBusy, j.name)
	}
	defer func() { <-j.busy }()

	run := &Run{s: s, job: j, trigger: trigger, start: s.now(), spent: map[string]int64{}}
	run.id = runID(run.start)
	run.log = s.log.With("job", j.name, "run", run.id)

	if w, ok := s.waiting(parent, j, run.start); ok {
		return waitingRecord(run, w), nil
	}
	held, err := s.acquire(parent, run)
	switch {
	case err != nil:
		rec := run.record(s.now(), Failed, err.Error(), nil)
		_, recErr := s.finish(parent, run, rec, nil)
		return rec, errors.Join(err, recErr)
	case held != nil:
		rec := run.record(s.now(), Skipped, held.Error(), nil)
		rec.Holder, rec.LeaseExpires = held.Held.Holder, held.Held.Expires
		_, recErr := s.finish(parent, run, rec, nil)
		return rec, recErr
	}
	// The run that held the lease before may have just stopped on a spent
	// budget: read its mark again, now that no other run can write it.
	if w, ok := s.waiting(parent, j, run.start); ok {
		s.release(run)
		return waitingRecord(run, w), nil
	}
	if err := s.saveInfo(parent, j); err != nil {
		run.log.Warn("jobs: job info not recorded", "error", err)
	}
	renewed := make(chan struct{})
	leaseCtx, cancelLease := context.WithCancelCause(parent)
	defer cancelLease(nil)
	go s.renew(run, cancelLease, renewed)
	defer func() {
		close(renewed)
		s.release(run)
	}()

	ctx, cancel := s.runContext(leaseCtx, run)
	defer cancel()
	run.log.Debug("jobs: run started", "trigger", trigger)

	err, panicked, stack := call(ctx, j.fn, run)
	return s.ended(parent, leaseCtx, ctx, run, err, panicked, stack)
}

// runContext returns the context a run's job is called with: the lease's,
// with the job's name, its charge counter and allocations, and its
// timeout; and, for a scheduled run, registers it as running until the
// returned func is called.
func (s *Scheduler) runContext(leaseCtx context.Context, run *Run) (context.Context, func()) {
	j := run.job
	ctx := quota.ContextWithJob(quota.ContextWithChargeFunc(leaseCtx, run.observe), j.name)
	for _, a := range j.allocs {
		ctx = quota.ContextWithAllocation(ctx, a[0], a[1])
	}
	cancel := func() {}
	if j.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, j.timeout)
	}
	if run.trigger != Scheduled {
		return ctx, cancel
	}
	s.mu.Lock()
	s.running[run] = struct{}{}
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		delete(s.running, run)
		s.mu.Unlock()
		cancel()
	}
}

// ended records how a run ended (its outcome from the job's error, a
// panic or its context), marks a spent budget for the next runs, and
// returns the record with the run's error.
func (s *Scheduler) ended(parent, leaseCtx, ctx context.Context, run *Run, err error, panicked bool, stack []byte) (Record, error) {
	j := run.job
	if cause := context.Cause(leaseCtx); err != nil && errors.Is(cause, ErrLeaseLost) && !errors.Is(err, ErrLeaseLost) {
		// a job that returns ctx.Err() (or an error wrapping it) was
		// stopped by its lost lease, not by a SIGTERM: say so
		err = fmt.Errorf("%w: %w", cause, err)
	}
	out := classify(ctx, err, panicked)
	var text string
	if err != nil {
		text = err.Error()
	}
	var exh *Exhaustion
	if out == Exhausted {
		exh = exhaustion(err)
	}
	rec := run.record(s.now(), out, text, exh)
	markErr := s.mark(context.WithoutCancel(parent), rec)
	_, recErr := s.finish(parent, run, rec, stack)

	var runErr error
	switch out {
	case Failed, Panicked, Cancelled:
		runErr = fmt.Errorf("jobs: %s %s: %w", j.name, out, err)
	}
	return rec, errors.Join(runErr, markErr, recErr)
}

// waitingRecord is the unrecorded Record RunOnce returns for a run that
// waits for capacity.
func waitingRecord(run *Run, w WaitingMark) Record {
	return Record{
		Job: run.job.name, Run: run.id, Trigger: run.trigger, Start: run.start, End: run.start, Outcome: Waiting,
		Error:     "waiting for capacity until " + w.Until.Format(time.RFC3339),
		Exhausted: &Exhaustion{Budget: w.Budget, Cost: w.Cost, RetryAt: w.Until},
	}
}

// call runs fn, turning a panic into an error.
func call(ctx context.Context, fn Func, run *Run) (err error, panicked bool, stack []byte) {
	defer func() {
		if v := recover(); v != nil {
			err, panicked, stack = fmt.Errorf("panic: %v", v), true, debug.Stack()
		}
	}()
	return fn(ctx, run), false, nil
}

func classify(ctx context.Context, err error, panicked bool) Outcome {
	switch {
	case panicked:
		return Panicked
	case err == nil:
		return OK
	case errors.Is(err, quota.ErrExhausted):
		return Exhausted
	case errors.Is(ctx.Err(), context.Canceled):
		return Cancelled
	}
	return Failed
}

// finish logs the run's one line and appends its record, once per run:
// recorded is false when the run was already recorded (cut off at stop,
// then returned).
func (s *Scheduler) finish(parent context.Context, run *Run, rec Record, stack []byte) (recorded bool, err error) {
	if !run.recorded.CompareAndSwap(false, true) {
		return false, nil
	}
	report(run.log, rec, stack)
	b, err := json.Marshal(rec)
	if err != nil {
		return true, fmt.Errorf("jobs: record run of %q: %w", rec.Job, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), historyTimeout)
	defer cancel()
	if err := s.store.AppendRecord(ctx, runsStream(rec.Job), b, s.keep); err != nil {
		err = fmt.Errorf("jobs: record run of %q: %w", rec.Job, err)
		run.log.Error("jobs: run not recorded", "error", err)
		return true, err
	}
	return true, nil
}

// report logs one line for a finished run.
func report(l *slog.Logger, rec Record, stack []byte) {
	switch rec.Outcome {
	case OK:
		l.Info("jobs: run ok", "took", rec.Duration(), "spent", rec.Spent)
	case Exhausted:
		if e := rec.Exhausted; e != nil {
			l.Info("jobs: budget exhausted, run stopped cleanly; the next run resumes",
				"budget", e.Budget, "left", e.Left, "capacity_returns", e.RetryAt, "in", e.RetryAt.Sub(rec.End).Round(time.Second), "spent", rec.Spent)
		} else {
			l.Info("jobs: budget exhausted, run stopped cleanly; the next run resumes", "error", rec.Error, "spent", rec.Spent)
		}
	case Failed:
		l.Error("jobs: run failed", "error", rec.Error, "spent", rec.Spent)
	case Panicked:
		l.Error("jobs: run panicked", "error", rec.Error, "spent", rec.Spent, "stack", string(stack))
	case Cancelled:
		l.Warn("jobs: run cancelled", "error", rec.Error, "spent", rec.Spent)
	case Abandoned:
		l.Warn("jobs: run cut off at stop", "running_for", rec.Duration(), "spent", rec.Spent)
	case Skipped:
		l.Info("jobs: run skipped: another run holds the job's lease", "holder", rec.Holder, "lease_expires", rec.LeaseExpires,
			"in", rec.LeaseExpires.Sub(rec.End).Round(time.Millisecond))
	}
}

// runID returns a unique, sortable run ID: the start time and random bits.
func runID(start time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return start.UTC().Format("20060102T150405.000Z") + "-" + hex.EncodeToString(b[:])
}

// cronLogger sends cron's messages to slog: its routine chatter at Debug,
// the skip notices of SkipIfStillRunning at Info, and panics it recovered
// outside a run at Error.
type cronLogger struct{ log *slog.Logger }

func (c cronLogger) Info(msg string, kv ...any) {
	if msg == "skip" {
		c.log.Info("jobs: tick skipped: the previous run is still going")
		return
	}
	c.log.Debug("jobs: cron: "+msg, kv...)
}

func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.log.Error("jobs: cron: "+msg, append([]any{"error", err}, kv...)...)
}
