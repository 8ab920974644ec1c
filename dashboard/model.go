package dashboard

import (
	"context"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/internal/view/jobview"
	"github.com/quotactl/quotactl/quota"
)

// The dashboard's JSON is the view model quotactl prints: each type below
// is the one `quotactl ... --json` encodes, so /api and the CLI have the
// same field names and, read from one store at one instant, the same
// values.
type (
	// Status is one budget of one owner, as `quotactl status --json`
	// prints it: used, limit, remaining, reset, the exhaustion mark, the
	// percent used (100 while the budget is marked spent) and the whole
	// seconds until capacity next frees.
	Status = view.Status
	// CredJSON is one credential of an owner: its label and fingerprint,
	// never a secret.
	CredJSON = view.Credential
	// Bucket is one step of a History: units and calls, and units per
	// method when buckets are whole hours.
	Bucket = view.Bucket
	// History is one budget's current window of one owner in buckets, in
	// the budget's own time zone, as `quotactl history --json` prints it.
	History = view.History
	// Job is one job's runs, lease, checkpoint, next tick and expected
	// cost, as `quotactl jobs --json` prints it, with its recent runs,
	// newest first.
	Job = jobview.Job
	// Crossing is a usage threshold one budget crossed in its current
	// window.
	Crossing = view.Crossing
	// Thresholds lists the crossings of every budget, derived from the
	// entries counted in each window.
	Thresholds = view.Thresholds
)

// NoMethod is the method name the chart gives units charged without one.
const NoMethod = view.NoMethod

// Snapshot is everything the page shows, read from the store at one time.
type Snapshot struct {
	Now        time.Time  `json:"now"`
	Status     []Status   `json:"status"`
	History    []History  `json:"history"`
	Jobs       []Job      `json:"jobs"`
	Thresholds Thresholds `json:"thresholds"`
	// JobsKept is false when the store keeps no job history (it is not a
	// quota.StateStore).
	JobsKept bool `json:"jobs_kept"`
}

// runsShown is how many recent runs of each job the page lists.
const runsShown = 10

// read builds a Snapshot from the store.
func (h *Handler) read(ctx context.Context) (*Snapshot, error) {
	o, err := h.reader.Overview(ctx, h.levels)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	s := &Snapshot{Now: o.Now, Status: o.Status, History: o.History, Jobs: []Job{}, Thresholds: o.Thresholds}
	if ss, ok := h.store.(quota.StateStore); ok {
		s.JobsKept = true
		if s.Jobs, err = jobview.Read(ctx, h.reader, ss, o.APIs, runsShown); err != nil {
			return nil, fmt.Errorf("dashboard: %w", err)
		}
	}
	return s, nil
}

// Percent returns the share of u's limit that cannot be spent now, in
// percent, rounded down (so a bar is never drawn full before the budget
// is): 100 while the budget is marked spent. It is Status.Percent, and
// what quotactl shows.
func Percent(u quota.Usage) int64 { return view.Percent(u) }
