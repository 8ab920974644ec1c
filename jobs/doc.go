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
