package dashboard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// Status is one budget of one owner, as `quotactl status --json` prints it
// (same field names), plus percent and seconds to reset. Owner is the
// account the budget is kept under (an owner name, or the fingerprint of a
// credential that is its own owner); Credential and Fingerprint are its
// first credential (labelled ones first), Credentials all of them.
type Status struct {
	API         string     `json:"api"`
	Owner       string     `json:"owner,omitempty"`
	Credentials []CredJSON `json:"credentials,omitempty"`
	Credential  string     `json:"credential"`
	Fingerprint string     `json:"fingerprint"`
	Budget      string     `json:"budget"`
	Window      string     `json:"window"`
	// Source says whose definition is in force: "program" (the limiter's)
	// or "operator" ('quotactl budget set').
	Source         quota.Source `json:"source"`
	Used           int64        `json:"used"`
	Limit          int64        `json:"limit"`
	Remaining      int64        `json:"remaining"`
	Reset          *time.Time   `json:"reset,omitempty"`
	ExhaustedUntil *time.Time   `json:"exhausted_until,omitempty"`
	// StoreLoss is true while the exhausted_until mark is the limiter's
	// reaction to a store that lost recorded usage.
	StoreLoss bool `json:"store_loss,omitempty"`
	// Percent is used of limit, 0 to 100, rounded down (so 99.6% is not
	// shown as full); 100 while the budget is marked spent.
	Percent int64 `json:"percent"`
	// ResetSeconds is the time from now until capacity next frees, in
	// seconds (0 when nothing is counted).
	ResetSeconds float64 `json:"reset_seconds"`
}

// CredJSON is one credential of an owner: its label and fingerprint, never
// a secret.
type CredJSON struct {
	Label       string `json:"label"`
	Fingerprint string `json:"fingerprint"`
}

// ownerGroup is one account's credentials, labelled ones first.
type ownerGroup struct {
	account string
	creds   []quota.CredentialInfo
}

func (g ownerGroup) json() []CredJSON {
	out := make([]CredJSON, len(g.creds))
	for i, c := range g.creds {
		out[i] = CredJSON{Label: c.Label, Fingerprint: c.ID}
	}
	return out
}

// accountOf is the account a credential's budgets are kept under: its
// owner, or the credential itself (its fingerprint) when it is its own.
func accountOf(c quota.CredentialInfo) string {
	if c.Owner != "" {
		return c.Owner
	}
	return c.ID
}

func unlabelled(c quota.CredentialInfo) int {
	if c.Label == "" {
		return 1
	}
	return 0
}

// OwnerName is how an owner is shown: a named owner's name; for a
// credential that is its own owner, its label, else the first 8 digits of
// its fingerprint; for a key rotated under another key's account, the first
// 8 digits of that account's fingerprint.
func OwnerName(account, label, fingerprint string) string {
	if account != "" && account != fingerprint {
		if len(account) == quota.FingerprintLen && strings.Trim(account, "0123456789abcdef") == "" {
			return account[:8]
		}
		return account
	}
	if label != "" {
		return label
	}
	if fingerprint == "" {
		return "-"
	}
	return fingerprint[:min(8, len(fingerprint))]
}

// groupOwners groups credentials by account, sorted by account, labelled
// credentials first within one.
func groupOwners(creds []quota.CredentialInfo) []ownerGroup {
	sorted := slices.Clone(creds)
	slices.SortStableFunc(sorted, func(a, b quota.CredentialInfo) int {
		return cmp.Or(cmp.Compare(accountOf(a), accountOf(b)), cmp.Compare(unlabelled(a), unlabelled(b)), cmp.Compare(a.Label, b.Label), cmp.Compare(a.ID, b.ID))
	})
	var out []ownerGroup
	for _, c := range sorted {
		if n := len(out); n > 0 && out[n-1].account == accountOf(c) {
			out[n-1].creds = append(out[n-1].creds, c)
			continue
		}
		out = append(out, ownerGroup{account: accountOf(c), creds: []quota.CredentialInfo{c}})
	}
	return out
}

// spent reports whether nothing is left: used up, or marked spent.
func (s Status) spent() bool { return s.ExhaustedUntil != nil || s.Remaining == 0 }

// Bucket is one hour (or --every) of a History: the units and calls
// recorded in it, as `quotactl history --json` prints them, and the units
// per method (from the store's breakdown; hourly buckets only).
type Bucket struct {
	Start   time.Time        `json:"start"`
	End     time.Time        `json:"end"`
	Units   int64            `json:"units"`
	Calls   int64            `json:"calls"`
	Methods map[string]int64 `json:"methods,omitempty"`
}

// History is one budget's current window of one owner, per hour in the
// budget's own time zone (a daily budget's zone; the display zone for a
// sliding one), as `quotactl history --json` prints it (same field names).
type History struct {
	API          string    `json:"api"`
	Owner        string    `json:"owner,omitempty"`
	Budget       string    `json:"budget"`
	Credential   string    `json:"credential"`
	Fingerprint  string    `json:"fingerprint"`
	Window       string    `json:"window"`
	Used         int64     `json:"used"`
	Limit        int64     `json:"limit"`
	From         time.Time `json:"from"`
	To           time.Time `json:"to"`
	EverySeconds float64   `json:"every_seconds"`
	Zone         string    `json:"zone"`
	Buckets      []Bucket  `json:"buckets"`
	// Jobs is the units each job spent in the window's hours, from the
	// store's breakdown (charges made outside a job are not in it).
	Jobs map[string]int64 `json:"jobs,omitempty"`
}

// NoMethod is the method name the chart gives units charged without one.
const NoMethod = "(no method)"

// Job is one job's recent runs, as `quotactl jobs --json` prints a job
// (job, last, checkpoint) plus its recent runs, newest first.
type Job struct {
	Job        string           `json:"job"`
	Last       *jobs.Record     `json:"last"`
	Checkpoint *jobs.Checkpoint `json:"checkpoint"`
	Runs       []jobs.Record    `json:"runs"`
}

// Crossing is a usage threshold one budget crossed in its current window.
type Crossing struct {
	API         string    `json:"api"`
	Owner       string    `json:"owner,omitempty"`
	Credential  string    `json:"credential"`
	Fingerprint string    `json:"fingerprint"`
	Budget      string    `json:"budget"`
	Percent     int64     `json:"percent"` // 50, 80, 95 or 100
	At          time.Time `json:"at"`      // when usage first reached it in the window
	Used        int64     `json:"used"`    // units counted right after that charge
	Limit       int64     `json:"limit"`
}

// Thresholds lists the crossings of every budget. Derived is true: they are
// computed from the entries counted in each window (the first charge that
// took usage to each threshold), not from recorded events.
type Thresholds struct {
	Derived   bool       `json:"derived"`
	Levels    []int64    `json:"levels"`
	Crossings []Crossing `json:"crossings"`
}

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
	now := h.now()
	apis, err := h.store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("dashboard: list store: %w", err)
	}
	s := &Snapshot{Now: now.UTC(), Status: []Status{}, History: []History{}, Jobs: []Job{},
		Thresholds: Thresholds{Derived: true, Levels: h.levels, Crossings: []Crossing{}}}
	for _, a := range apis {
		// An operator's definition ('quotactl budget set') is the one in
		// force over the program's.
		over, err := quota.Overrides(ctx, h.store, a.Name)
		if err != nil {
			return nil, fmt.Errorf("dashboard: overrides of %s: %w", a.Name, err)
		}
		var src map[string]quota.Source
		a.Budgets, src = quota.ApplyOverrides(a.Budgets, over)
		if len(a.Budgets) == 0 {
			continue
		}
		if err := h.readAPI(ctx, a, src, now, s); err != nil {
			return nil, err
		}
	}
	// Sorted by api, owner, label, budget.
	slices.SortStableFunc(s.Status, func(x, y Status) int {
		return cmp.Or(cmp.Compare(x.API, y.API), cmp.Compare(OwnerName(x.Owner, x.Credential, x.Fingerprint), OwnerName(y.Owner, y.Credential, y.Fingerprint)),
			cmp.Compare(x.Credential, y.Credential), cmp.Compare(x.Budget, y.Budget))
	})
	slices.SortStableFunc(s.History, func(x, y History) int {
		return cmp.Or(cmp.Compare(x.API, y.API), cmp.Compare(OwnerName(x.Owner, x.Credential, x.Fingerprint), OwnerName(y.Owner, y.Credential, y.Fingerprint)),
			cmp.Compare(x.Credential, y.Credential), cmp.Compare(x.Budget, y.Budget))
	})
	if ss, ok := h.store.(quota.StateStore); ok {
		s.JobsKept = true
		if s.Jobs, err = readJobs(ctx, ss); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (h *Handler) readAPI(ctx context.Context, a quota.APIInfo, src map[string]quota.Source, now time.Time, s *Snapshot) error {
	l, err := quota.New(h.store, a.Name, a.Budgets, h.limiterOptions()...)
	if err != nil {
		return fmt.Errorf("dashboard: stored budgets of %s: %w", a.Name, err)
	}
	if len(a.Credentials) == 0 {
		// Nothing charged yet: every budget is whole.
		for _, b := range a.Budgets {
			s.Status = append(s.Status, Status{API: a.Name, Budget: b.Name, Window: b.Window.String(), Source: sourceOf(src, b.Name), Limit: b.Limit, Remaining: b.Limit})
		}
		return nil
	}
	for _, grp := range groupOwners(a.Credentials) {
		c := grp.creds[0]
		us, err := l.StatusOf(ctx, grp.account)
		if err != nil {
			return fmt.Errorf("dashboard: usage of %s: %w", a.Name, err)
		}
		for _, u := range us {
			st := Status{
				API: a.Name, Owner: grp.account, Credentials: grp.json(), Credential: c.Label, Fingerprint: c.ID, Budget: u.Budget, Window: u.Window.String(),
				Source: sourceOf(src, u.Budget), Used: u.Used, Limit: u.Limit, Remaining: u.Remaining, Reset: jsonTime(u.Reset), ExhaustedUntil: jsonTime(u.ExhaustedUntil),
				StoreLoss: u.StoreLoss && !u.ExhaustedUntil.IsZero(), Percent: Percent(u), ResetSeconds: resetSeconds(u, now),
			}
			s.Status = append(s.Status, st)
			b := a.Budgets[slices.IndexFunc(a.Budgets, func(b quota.Budget) bool { return b.Name == u.Budget })]
			entries, err := h.store.Entries(ctx, &backend.EntriesRequest{API: a.Name, Owner: grp.account, Budget: b, Now: h.storeNow()})
			if err != nil {
				return fmt.Errorf("dashboard: entries of %s/%s: %w", a.Name, b.Name, err)
			}
			var rows []backend.BreakdownRow
			if every(b.Window) == time.Hour {
				rows, err = h.store.Breakdown(ctx, &backend.BreakdownRequest{API: a.Name, Owner: grp.account, Budgets: []string{b.Name}, Since: b.Window.Start(now), Now: h.storeNow()})
				if err != nil {
					return fmt.Errorf("dashboard: breakdown of %s/%s: %w", a.Name, b.Name, err)
				}
			}
			hist := h.history(a.Name, grp, b, now, entries, rows)
			s.History = append(s.History, hist)
			s.Thresholds.Crossings = append(s.Thresholds.Crossings, crossings(st, entries, h.levels)...)
		}
	}
	return nil
}

func sourceOf(src map[string]quota.Source, budget string) quota.Source {
	if s, ok := src[budget]; ok {
		return s
	}
	return quota.SourceProgram
}

// Percent returns u's used of limit in percent, rounded down and at most
// 100, so a bar is never drawn full before the budget is; 100 while the
// budget is marked spent.
func Percent(u quota.Usage) int64 {
	if !u.ExhaustedUntil.IsZero() {
		return 100
	}
	if u.Limit <= 0 {
		return 0
	}
	return min(max(u.Used, 0)*100/u.Limit, 100)
}

func resetSeconds(u quota.Usage, now time.Time) float64 {
	at := u.Reset
	if u.Window.IsDaily() {
		at = u.Window.NextReset(now)
	}
	if u.ExhaustedUntil.After(at) {
		at = u.ExhaustedUntil // marked spent: nothing frees before the mark ends
	}
	if at.IsZero() || !at.After(now) {
		return 0
	}
	return at.Sub(now).Round(time.Second).Seconds()
}

// zoneOf is where a budget's hours are labelled: a daily budget's own zone,
// else the display zone.
func (h *Handler) zoneOf(w quota.Window) *time.Location {
	if w.IsDaily() {
		return w.Location()
	}
	return h.loc
}

// every is the length of a chart's bucket: an hour, unless the window is
// shorter than 6 hours, when it is the shortest of 1, 5, 10, 15 or 30
// minutes that makes at most 24 buckets.
func every(w quota.Window) time.Duration {
	if w.IsDaily() || w.Duration() >= 6*time.Hour {
		return time.Hour
	}
	for _, s := range []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute} {
		if w.Duration()/s <= 24 {
			return s
		}
	}
	return time.Hour
}

// history buckets entries per hour of the window (see every), on the hours
// of the budget's zone, and stacks each hour by method from the store's
// breakdown rows (hourly rows: only for hourly buckets).
func (h *Handler) history(api string, grp ownerGroup, b quota.Budget, now time.Time, entries []quota.Entry, rows []backend.BreakdownRow) History {
	c := grp.creds[0]
	every := every(b.Window)
	loc := h.zoneOf(b.Window)
	from := b.Window.Start(now)
	// The first bucket starts on the local hour (or step) at or before from.
	lf := from.In(loc)
	first := time.Date(lf.Year(), lf.Month(), lf.Day(), lf.Hour(), 0, 0, 0, loc)
	for first.Add(every).Compare(from) <= 0 {
		first = first.Add(every)
	}
	n := int(now.Sub(first)/every) + 1
	bs := make([]Bucket, n)
	for i := range bs {
		bs[i].Start = first.Add(time.Duration(i) * every).UTC()
		bs[i].End = first.Add(time.Duration(i+1) * every).UTC()
	}
	var used int64
	for _, e := range entries {
		used += e.Cost
		i := int(e.At.Sub(first) / every)
		if i < 0 || i >= n {
			continue
		}
		bs[i].Units += e.Cost
		bs[i].Calls++
	}
	jobUnits := map[string]int64{}
	for _, r := range rows {
		i := int(r.Hour.Sub(first) / every)
		if i < 0 || i >= n || r.Units <= 0 {
			continue
		}
		if bs[i].Methods == nil {
			bs[i].Methods = map[string]int64{}
		}
		m := r.Method
		if m == "" {
			m = NoMethod
		}
		bs[i].Methods[m] += r.Units
		if r.Job != "" {
			jobUnits[r.Job] += r.Units
		}
	}
	var byJob map[string]int64
	if len(jobUnits) > 0 {
		byJob = jobUnits
	}
	return History{
		API: api, Owner: grp.account, Budget: b.Name, Credential: c.Label, Fingerprint: c.ID, Window: b.Window.String(),
		Used: used, Limit: b.Limit, From: from.UTC(), To: now.UTC(), EverySeconds: every.Seconds(),
		Zone: loc.String(), Buckets: bs, Jobs: byJob,
	}
}

// crossings walks the window's entries, oldest first, and returns the first
// charge that took usage to each level. A budget marked spent with no
// charge taking it to 100% gets no 100% crossing here: its mark is on its
// status.
func crossings(st Status, entries []quota.Entry, levels []int64) []Crossing {
	var out []Crossing
	var used int64
	next := 0
	for _, e := range entries {
		used += e.Cost
		for next < len(levels) && used*100 >= levels[next]*st.Limit {
			out = append(out, Crossing{
				API: st.API, Owner: st.Owner, Credential: st.Credential, Fingerprint: st.Fingerprint, Budget: st.Budget,
				Percent: levels[next], At: e.At.UTC(), Used: used, Limit: st.Limit,
			})
			next++
		}
	}
	return out
}

func readJobs(ctx context.Context, ss quota.StateStore) ([]Job, error) {
	names, err := jobs.Names(ctx, ss)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	out := []Job{}
	for _, name := range names {
		recs, err := jobs.History(ctx, ss, name, runsShown)
		if err != nil {
			return nil, fmt.Errorf("dashboard: %w", err)
		}
		j := Job{Job: name, Runs: recs}
		if len(recs) > 0 {
			j.Last = &recs[0]
		}
		cp, found, err := jobs.LoadCheckpoint(ctx, ss, name)
		if err != nil && !errors.Is(err, quota.ErrNotFound) {
			return nil, fmt.Errorf("dashboard: %w", err)
		}
		if found {
			j.Checkpoint = &cp
		}
		out = append(out, j)
	}
	return out, nil
}

// jsonTime is a time for JSON output: UTC, or nil when zero.
func jsonTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
