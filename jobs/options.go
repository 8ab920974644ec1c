package jobs

import (
	"log/slog"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// Option configures a Scheduler in New.
type Option func(*Scheduler)

// WithLogger sets where the scheduler logs run outcomes, skipped ticks and
// runs cut off at stop. Default: slog.Default() at the time New is called.
func WithLogger(log *slog.Logger) Option { return func(s *Scheduler) { s.log = log } }

// WithClock sets the clock that stamps runs (Record.Start and End, checkpoint
// times). Default: time.Now. Tests inject a fake clock, or run in a
// testing/synctest bubble where time.Now is already fake.
//
// An injected clock also times the runs' leases: lease requests carry its
// now instead of leaving the store to use its own clock.
func WithClock(clock func() time.Time) Option {
	return func(s *Scheduler) { s.clock, s.clockSet = clock, true }
}

// WithLeaseTTL sets how long a run's lease in the store lives unless
// renewed (the run renews it every third of d). A run whose process dies
// blocks the job's next runs at most this long. Default: DefaultLeaseTTL.
// d < 3ms keeps the default.
func WithLeaseTTL(d time.Duration) Option {
	return func(s *Scheduler) {
		if d >= 3*time.Millisecond {
			s.leaseTTL = d
		}
	}
}

// WithLocation sets the time zone cron specs are read in, unless a spec has
// its own CRON_TZ= prefix. Default: time.Local.
func WithLocation(loc *time.Location) Option { return func(s *Scheduler) { s.loc = loc } }

// WithHistory sets how many runs of each job the store keeps (the newest).
// Default: DefaultHistory. n <= 0 keeps the default.
func WithHistory(n int) Option {
	return func(s *Scheduler) {
		if n > 0 {
			s.keep = n
		}
	}
}

// WithStopTimeout sets how long Run waits, once its context is done and the
// running jobs' contexts are cancelled, for those jobs to return. Runs still
// going then are cut off: logged and recorded as Abandoned. Default:
// DefaultStopTimeout.
func WithStopTimeout(d time.Duration) Option { return func(s *Scheduler) { s.stopTimeout = d } }

// DefaultHistory is how many runs per job the store keeps unless WithHistory
// says otherwise.
const DefaultHistory = 100

// DefaultStopTimeout is how long Run waits for running jobs at stop unless
// WithStopTimeout says otherwise.
const DefaultStopTimeout = 30 * time.Second

// JobOption configures one job in Scheduler.Add.
type JobOption func(*job)

// WithAllocation gives the job its own allocation inside a shared budget:
// every charge its runs make to the budget within is also charged, in the
// same atomic Take, to the budget alloc (see quota.ContextWithAllocation).
// Both must be budgets of the limiter the job uses; define alloc with the
// job's cap, e.g. {Name: "backfill", Limit: 2000} inside "units" of 9,500.
// A run that hits the cap ends Exhausted on alloc, and the shared budget is
// left to the other jobs.
func WithAllocation(alloc, within string) JobOption {
	return func(j *job) { j.allocs = append(j.allocs, [2]string{alloc, within}) }
}

// WithLimiter names the limiter and credential the job charges. While the
// job waits for capacity (WaitingMark), each tick asks l whether the budget
// that stopped the last run can pay again before the mark's time (after a
// reset with Limiter.Adjust, or a raised limit), and starts the run if so.
// Without it, runs wait until the mark's time.
func WithLimiter(l *quota.Limiter, cred quota.Credential) JobOption {
	return func(j *job) { j.limiter, j.cred = l, cred }
}

// WithTimeout bounds each run of the job: its context is cancelled after d,
// and a run that returns an error because of it ends Failed. Default: no
// bound.
func WithTimeout(d time.Duration) JobOption { return func(j *job) { j.timeout = d } }
