package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// Outcome is how a run ended. Its string form is what the store and
// `quotactl jobs` show.
type Outcome string

const (
	// OK: the job returned nil.
	OK Outcome = "ok"
	// Exhausted: the job returned an error matching quota.ErrExhausted. A
	// clean stop, not a failure: the next tick resumes from the checkpoint.
	Exhausted Outcome = "exhausted"
	// Failed: the job returned any other error.
	Failed Outcome = "failed"
	// Panicked: the job panicked; the scheduler recovered it.
	Panicked Outcome = "panicked"
	// Cancelled: the run's context was cancelled (the scheduler stopping, or
	// RunOnce's caller giving up) and the job returned an error.
	Cancelled Outcome = "cancelled"
	// Abandoned: the job did not return within the stop timeout after its
	// context was cancelled; the scheduler stopped waiting for it.
	Abandoned Outcome = "abandoned"
	// Skipped: another run of the job, in this or another process or host,
	// held the job's lease, so this one did not start. Record.Holder names
	// that run and LeaseExpires says when its lease ends.
	Skipped Outcome = "skipped"
	// Waiting: the budget the job needs is spent until the job's
	// WaitingMark says, so the run did not start. RunOnce returns it; it is
	// never recorded in the history (ticks while waiting leave no trace but
	// one log line per window).
	Waiting Outcome = "waiting"
)

// Trigger says what started a run.
type Trigger string

const (
	// Scheduled runs were started by the cron schedule.
	Scheduled Trigger = "schedule"
	// Once runs were started by RunOnce (system cron, --once, tests).
	Once Trigger = "once"
)

// Record is one run in a job's history. The JSON field names are stable:
// `quotactl jobs --json` prints them as they are.
type Record struct {
	Job     string    `json:"job"`
	Run     string    `json:"run"` // unique run ID
	Trigger Trigger   `json:"trigger"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Outcome Outcome   `json:"outcome"`
	// Spent is the units the run charged per budget, keyed "API/BUDGET"
	// ("youtube/units"), with refunds subtracted. Budgets never charged are
	// absent.
	Spent map[string]int64 `json:"spent,omitempty"`
	// Charges counts the charges granted (refunded ones included).
	Charges int64 `json:"charges"`
	// Unmetered counts charges a fail-open limiter let through while its
	// store was unreachable: their units are not in Spent.
	Unmetered int64 `json:"unmetered,omitempty"`
	// Error is the job's error text (for a panic: "panic: VALUE").
	Error string `json:"error,omitempty"`
	// Exhausted says which budget stopped an Exhausted run, or, for a
	// Waiting one, which budget it waits for.
	Exhausted *Exhaustion `json:"exhausted,omitempty"`
	// Holder is who held the job's lease ("host:pid run ID"): the run's
	// own, or for a Skipped run the other run's.
	Holder string `json:"holder,omitempty"`
	// LeaseExpires is, for a Skipped run, when the holder's lease ends
	// unless renewed.
	LeaseExpires time.Time `json:"lease_expires,omitzero"`
}

// Duration returns how long the run took.
func (r Record) Duration() time.Duration { return r.End.Sub(r.Start) }

// Exhaustion is what stopped an Exhausted run, from the *quota.ExhaustedError.
type Exhaustion struct {
	Budget string `json:"budget"` // "API/BUDGET"
	Used   int64  `json:"used"`   // units counted in the window then
	Limit  int64  `json:"limit"`
	Left   int64  `json:"left"` // units left (0 while marked spent)
	Cost   int64  `json:"cost"` // what the refused charge asked for
	// RetryAt is when capacity returns: when the refused charge could be paid.
	RetryAt time.Time `json:"retry_at"`
}

func exhaustion(err error) *Exhaustion {
	var e *quota.ExhaustedError
	if !errors.As(err, &e) {
		return nil
	}
	left := max(e.Limit-e.Used, 0)
	if !e.ExhaustedUntil.IsZero() {
		left = 0
	}
	return &Exhaustion{
		Budget: e.API + "/" + e.Budget, Used: e.Used, Limit: e.Limit, Left: left, Cost: e.Cost,
		RetryAt: e.RetryAt,
	}
}

// Checkpoint is a job's saved cursor as the store keeps it.
type Checkpoint struct {
	Job    string          `json:"job"`
	Run    string          `json:"run"`   // the run that saved it
	Saved  time.Time       `json:"saved"` // when, on the scheduler's clock
	Cursor json.RawMessage `json:"cursor"`
}

const (
	runsPrefix       = "jobs/runs/"
	checkpointPrefix = "jobs/checkpoint/"
)

func runsStream(job string) string    { return runsPrefix + job }
func checkpointKey(job string) string { return checkpointPrefix + job }

// History returns up to n of job's most recent runs, newest first (n <= 0:
// every run the store keeps). A job with no runs gives an empty slice.
func History(ctx context.Context, store quota.StateStore, job string, n int) ([]Record, error) {
	if err := backend.CheckName("job", job); err != nil {
		return nil, fmt.Errorf("jobs: history: %w", err)
	}
	raw, err := store.Records(ctx, runsStream(job), n)
	if err != nil {
		return nil, fmt.Errorf("jobs: history of %q: %w", job, err)
	}
	out := make([]Record, 0, len(raw))
	for i, b := range raw {
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("jobs: history of %q: record %d: %w", job, i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Names returns the names of the jobs that have a run history in store,
// sorted.
func Names(ctx context.Context, store quota.StateStore) ([]string, error) {
	streams, err := store.Streams(ctx, runsPrefix)
	if err != nil {
		return nil, fmt.Errorf("jobs: names: %w", err)
	}
	out := make([]string, 0, len(streams))
	for _, s := range streams {
		out = append(out, strings.TrimPrefix(s, runsPrefix))
	}
	return out, nil
}

// LoadCheckpoint returns job's saved checkpoint. found is false when there is
// none (never saved, or cleared).
func LoadCheckpoint(ctx context.Context, store quota.StateStore, job string) (cp Checkpoint, found bool, err error) {
	if err := backend.CheckName("job", job); err != nil {
		return cp, false, fmt.Errorf("jobs: checkpoint: %w", err)
	}
	b, err := store.LoadState(ctx, checkpointKey(job))
	if errors.Is(err, quota.ErrNotFound) {
		return cp, false, nil
	}
	if err != nil {
		return cp, false, fmt.Errorf("jobs: load checkpoint of %q: %w", job, err)
	}
	if len(b) == 0 {
		return cp, false, nil
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		return cp, false, fmt.Errorf("jobs: checkpoint of %q: %w", job, err)
	}
	if len(cp.Cursor) == 0 || string(cp.Cursor) == "null" {
		return cp, false, nil // cleared
	}
	return cp, true, nil
}
