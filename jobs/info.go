package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

const infoPrefix = "jobs/info/"

func infoKey(job string) string { return infoPrefix + job }

// Info is what a Scheduler records in the store about a job, so that
// `quotactl jobs` in another process can show its next tick and what its
// next run is expected to cost.
type Info struct {
	Job      string `json:"job"`
	Spec     string `json:"spec,omitempty"`     // the cron spec; empty: RunOnce only
	Location string `json:"location,omitempty"` // the zone the spec is read in, unless it says CRON_TZ=
	Plan     *Plan  `json:"plan,omitempty"`     // WithPlan
}

// Plan is what one run of a job is expected to call: Calls[METHOD] calls,
// priced with cost table Table, charged to API's budgets.
type Plan struct {
	API   string           `json:"api"`
	Table string           `json:"table,omitempty"` // the cost table's name; empty: the one named API
	Calls map[string]int64 `json:"calls"`
}

// WithPlan declares what one run of the job is expected to call: calls
// maps each METHOD of the cost table to a count (as `quotactl costs
// estimate` takes them), charged to api's budgets; table names the cost
// table when it is not the one named api. The scheduler records it with
// the job's schedule (Info), and `quotactl jobs` holds it against what is
// left.
func WithPlan(api, table string, calls map[string]int64) JobOption {
	return func(j *job) { j.plan = &Plan{API: api, Table: table, Calls: maps.Clone(calls)} }
}

// Next returns when the job's schedule next fires after t, or the zero time
// for a job with no schedule or a spec this build cannot read.
func (i Info) Next(after time.Time) time.Time {
	if i.Spec == "" {
		return time.Time{}
	}
	sched, err := parseSpec(i.Spec)
	if err != nil {
		return time.Time{}
	}
	loc := time.Local
	if l, err := time.LoadLocation(i.Location); err == nil && i.Location != "" {
		loc = l
	}
	return sched.Next(after.In(loc))
}

// LoadInfo returns what a scheduler recorded about job. found is false when
// no scheduler has run it yet.
func LoadInfo(ctx context.Context, store quota.StateStore, job string) (info Info, found bool, err error) {
	if err := backend.CheckName("job", job); err != nil {
		return info, false, fmt.Errorf("jobs: info: %w", err)
	}
	b, err := store.LoadState(ctx, infoKey(job))
	if errors.Is(err, quota.ErrNotFound) {
		return info, false, nil
	}
	if err != nil {
		return info, false, fmt.Errorf("jobs: load info of %q: %w", job, err)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, false, fmt.Errorf("jobs: info of %q: %w", job, err)
	}
	return info, true, nil
}

// saveInfo records j's Info.
func (s *Scheduler) saveInfo(ctx context.Context, j *job) error {
	b, err := json.Marshal(Info{Job: j.name, Spec: j.spec, Location: s.loc.String(), Plan: j.plan})
	if err != nil {
		return fmt.Errorf("jobs: info of %q: %w", j.name, err)
	}
	if err := s.store.SaveState(ctx, infoKey(j.name), b); err != nil {
		return fmt.Errorf("jobs: save info of %q: %w", j.name, err)
	}
	return nil
}
