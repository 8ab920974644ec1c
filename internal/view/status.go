package view

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// Status is one budget of one owner: `quotactl status --json` prints an
// array of them, the dashboard's /api/status the same array. Owner is the
// account the budget is kept under (an owner name, or the fingerprint of a
// credential that is its own owner); Credential and Fingerprint are its
// first credential (labelled ones first), Credentials all of them. A
// budget of an API nothing was charged to yet has no owner and is whole.
type Status struct {
	API         string       `json:"api"`
	Owner       string       `json:"owner,omitempty"`
	Credentials []Credential `json:"credentials,omitempty"`
	Credential  string       `json:"credential"`
	Fingerprint string       `json:"fingerprint"`
	Budget      string       `json:"budget"`
	Window      string       `json:"window"`
	// Source says whose definition is in force: "program" (the limiter's)
	// or "operator" ('quotactl budget set').
	Source quota.Source `json:"source"`
	// Unit is what Used, Limit and Remaining count: the budget's unit
	// ("tokens", "requests", "usd-micro" for micro-dollars), "units" when
	// it declares none (see quota.Budget.Unit). Amount and UsedOf show
	// them.
	Unit  string `json:"unit"`
	Used  int64  `json:"used"`
	Limit int64  `json:"limit"`
	// LimitSource says where the owner's limit comes from: "program" (the
	// program's definition of the budget, or its limit for this owner),
	// "operator" ('quotactl budget set', of the budget or --owner) or
	// "upstream" (learned from the upstream's reports). See
	// quota.SourceUpstream for which applies.
	LimitSource quota.Source `json:"limit_source"`
	// OwnLimit is true when the limit is the owner's own rather than the
	// budget's.
	OwnLimit bool `json:"own_limit,omitempty"`
	// LearnedLimit is the limit the upstream last reported for the owner,
	// applied or not (absent: none).
	LearnedLimit   int64      `json:"learned_limit,omitempty"`
	Remaining      int64      `json:"remaining"`
	Reset          *time.Time `json:"reset,omitempty"`
	ExhaustedUntil *time.Time `json:"exhausted_until,omitempty"`
	// StoreLoss is true while the exhausted_until mark is the limiter's
	// reaction to a store that lost recorded usage.
	StoreLoss bool `json:"store_loss,omitempty"`
	// Percent is the share of the limit that cannot be spent now (see
	// Percent): 100 while the budget is marked spent.
	Percent int64 `json:"percent"`
	// ResetSeconds is the whole seconds until capacity next frees (see
	// ResetSeconds).
	ResetSeconds float64 `json:"reset_seconds"`
	// Drift is the units the upstream reported spent in the budget's
	// current window that no metered call had charged (true-ups: another
	// client on the same account), from the store's hourly breakdown, so
	// whole hours: the hours that end inside the window.
	Drift int64 `json:"drift,omitempty"`
	// OwnerName is how the tools name the owner (Owner.Name): the
	// dashboard's rows and /metrics' owner label. Not in JSON, which names
	// the account (owner) and its credentials.
	OwnerName string `json:"-"`
}

// Credential is one credential of an owner: its label and fingerprint,
// never a secret.
type Credential struct {
	Label       string `json:"label"`
	Fingerprint string `json:"fingerprint"`
}

// Spent reports whether nothing is left: used up, or marked spent.
func (s Status) Spent() bool { return Spent(s.Usage()) }

// Spent reports whether nothing is left of u: used up, or marked spent.
// A spent budget shows 100% (Percent) and a full bar.
func Spent(u quota.Usage) bool { return u.Limit > 0 && u.Remaining == 0 }

// Usage returns the quota.Usage s shows (from its exported fields alone, so
// a Status read back from JSON gives the same).
func (s Status) Usage() quota.Usage {
	w, _ := quota.ParseWindow(s.Window)
	u := quota.Usage{Budget: s.Budget, Window: w, Limit: s.Limit, Used: s.Used, Remaining: s.Remaining, StoreLoss: s.StoreLoss}
	if s.Reset != nil {
		u.Reset = *s.Reset
	}
	if s.ExhaustedUntil != nil {
		u.ExhaustedUntil = *s.ExhaustedUntil
	}
	return u
}

// Percent is the share of u's limit that cannot be spent now, in percent
// from 0 to 100: (limit - remaining) / limit, rounded down, so 99.6% is not
// shown as full. A budget marked spent has nothing remaining: 100, whatever
// its entries add up to, since it can pay for nothing. It is what
// quota_store_remaining_units and quota_store_limit_units say:
// 100 * (1 - remaining / limit).
func Percent(u quota.Usage) int64 {
	if u.Limit <= 0 {
		return 0
	}
	return min(max(u.Limit-u.Remaining, 0)*100/u.Limit, 100)
}

// NextFree is when u's capacity next frees: a daily or monthly budget's next reset,
// else when a sliding window's oldest counted entry leaves it; never
// before the end of a mark that the budget is spent. Zero when nothing is
// counted and nothing is marked.
func NextFree(u quota.Usage, now time.Time) time.Time {
	at := u.Reset
	if u.Window.IsCalendar() {
		at = u.Window.NextReset(now)
	}
	if u.ExhaustedUntil.After(at) {
		at = u.ExhaustedUntil // marked spent: nothing frees before the mark ends
	}
	return at
}

// ResetSeconds is the time from now until u's capacity next frees
// (NextFree), in whole seconds rounded up: it says 0 only once capacity
// has come back, never while the budget is still spent (an alert on
// reset_seconds > 0 holds until the reset, not until the last half
// second). 0 when nothing is counted and nothing is marked.
func ResetSeconds(u quota.Usage, now time.Time) float64 { return SecondsUntil(NextFree(u, now), now) }

// SecondsUntil is the time from now until t in whole seconds, rounded up;
// 0 when t is zero or not after now.
func SecondsUntil(t, now time.Time) float64 {
	if t.IsZero() || !t.After(now) {
		return 0
	}
	d := t.Sub(now)
	return float64((d + time.Second - 1) / time.Second)
}

// Status reads the status of every budget of every owner of apis, sorted by
// API, owner name (Owner.Name), credential and budget. An API with budgets
// and no credential yet has one whole row per budget, without an owner.
func (r *Reader) Status(ctx context.Context, apis ...API) ([]Status, error) {
	out := []Status{}
	now := r.Now()
	for _, a := range apis {
		if len(a.Budgets) == 0 {
			continue
		}
		if len(a.Owners) == 0 {
			// Nothing charged yet: every budget is whole.
			for _, b := range a.Budgets {
				out = append(out, Status{API: a.Name, Budget: b.Name, Window: b.Window.String(), Source: a.Source(b.Name), LimitSource: a.Source(b.Name), Unit: b.UnitOf(), Limit: b.Limit, Remaining: b.Limit})
			}
			continue
		}
		l, err := r.Limiter(a)
		if err != nil {
			return nil, err
		}
		for _, o := range a.Owners {
			us, err := l.StatusOf(ctx, o.Account)
			if err != nil {
				return nil, err
			}
			drift, err := r.drift(ctx, a.Name, o.Account, us)
			if err != nil {
				return nil, err
			}
			for _, u := range us {
				s := statusOf(a, o, u, now)
				s.Drift = drift[u.Budget]
				lf, err := l.LimitOf(ctx, o.Account, u.Budget)
				if err != nil {
					return nil, err
				}
				s.LimitSource, s.OwnLimit, s.LearnedLimit = lf.Source, lf.PerOwner, lf.Learned
				out = append(out, s)
			}
		}
	}
	slices.SortStableFunc(out, func(x, y Status) int {
		return cmp.Or(cmp.Compare(x.API, y.API), cmp.Compare(x.OwnerName, y.OwnerName), cmp.Compare(x.Credential, y.Credential), cmp.Compare(x.Budget, y.Budget))
	})
	return out, nil
}

// drift returns, per budget of us, the units true-ups added in its
// current window (Status.Drift): one breakdown read for the owner.
func (r *Reader) drift(ctx context.Context, api, account string, us []quota.Usage) (map[string]int64, error) {
	if len(us) == 0 {
		return nil, nil
	}
	now := r.StoreNow()
	if now.IsZero() {
		now = r.Now()
	}
	starts := make(map[string]time.Time, len(us))
	since := now
	for _, u := range us {
		if u.Window.IsZero() {
			continue
		}
		st := u.Window.Start(now)
		starts[u.Budget] = st
		since = minTime(since, st)
	}
	rows, err := r.store.Breakdown(ctx, &backend.BreakdownRequest{API: api, Owner: account, Since: since, Now: r.StoreNow()})
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, row := range rows {
		st, ok := starts[row.Budget]
		if row.Method != backend.UnmeteredMethod || !ok || !row.Hour.Add(time.Hour).After(st) {
			continue
		}
		out[row.Budget] += row.Units
	}
	return out, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func statusOf(a API, o Owner, u quota.Usage, now time.Time) Status {
	first := o.Credentials[0]
	creds := make([]Credential, len(o.Credentials))
	for i, c := range o.Credentials {
		creds[i] = Credential{Label: c.Label, Fingerprint: c.ID}
	}
	b, _ := a.Budget(u.Budget)
	return Status{
		API: a.Name, Owner: o.Account, OwnerName: o.Name, Credentials: creds, Credential: first.Label, Fingerprint: first.ID,
		Budget: u.Budget, Window: u.Window.String(), Source: a.Source(u.Budget), Unit: b.UnitOf(),
		Used: u.Used, Limit: u.Limit, Remaining: u.Remaining, Reset: jsonTime(u.Reset), ExhaustedUntil: jsonTime(u.ExhaustedUntil),
		StoreLoss: u.StoreLoss && !u.ExhaustedUntil.IsZero(), Percent: Percent(u), ResetSeconds: ResetSeconds(u, now),
	}
}

// jsonTime is a time for JSON: UTC, or nil when zero.
func jsonTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
