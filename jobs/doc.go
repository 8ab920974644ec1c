// Package jobs runs ingestion jobs on a cron schedule and stops them cleanly
// when their quota budget is spent.
//
// A job is a Func registered with a cron spec on a Scheduler. Each run gets a
// *Run: its context carries an observer that counts the units every
// quota.Limiter charges under it (refunds subtract), and optionally a job's
// own allocation inside a shared budget (WithAllocation). A run that stops on
// quota.ErrExhausted ends "exhausted", not "failed": it logs one line (job,
// budget, units left, when capacity returns), and the next tick resumes from
// the checkpoint the job saved with Run.Save.
//
// Runs never overlap, across processes and hosts: each run holds the job's
// lease in the store (Redis SET NX PX with a fencing token, an SQLite row
// written in an immediate transaction, or in process for a MemoryStore),
// renews it while it runs and releases it at the end. A run that finds the
// lease held ends Skipped; a crashed holder's lease expires (WithLeaseTTL)
// and the next run resumes from the checkpoint. Checkpoint writes carry the
// lease's fencing token, so a run that lost its lease cannot overwrite a
// newer checkpoint (Run.Save returns an error wrapping ErrLeaseLost).
//
// An Exhausted run leaves a WaitingMark in the store: until capacity
// returns, runs in every process sharing the store do not start (one log
// line per window, nothing recorded), and `quotactl jobs` shows "waiting for
// capacity until T". WithLimiter lets a reset end the wait early.
//
// Run history (start, end, outcome, units spent per budget, error text) and
// checkpoints live in a quota.StateStore, the same store the limiter uses,
// so `quotactl jobs` can show them from another process: see History, Names
// and LoadCheckpoint.
//
// Two ways to run:
//
//   - in process: Scheduler.Run(ctx) blocks until ctx is done (SignalContext
//     makes one that SIGINT and SIGTERM cancel), then cancels running jobs and
//     waits for them up to the stop timeout;
//   - under system cron: Scheduler.RunOnce(ctx, name) runs one job now,
//     records its history and returns.
package jobs
