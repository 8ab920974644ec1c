package quota

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// reportTimeout bounds the store calls a report leads to (a true-up, a
// learned limit), made after the response, whatever the request's context.
const reportTimeout = 10 * time.Second

// WithReporter sets what reads upstream reports from responses (see
// Reporter); nil reads none. Default: the Pricer, when it is a Reporter
// (costs.Table is one, for tables whose profile declares reports).
func WithReporter(r Reporter) TransportOption {
	return func(t *Transport) {
		t.reporter = r
		t.reporterSet = true
	}
}

// WithTrueDown lets the Transport also lower the store's count when a report
// says the upstream counts less (opt-in; by default reports only ever add,
// see Limiter.TrueUp). grace is the longest a call admitted by any process
// sharing the store may take to reach the upstream (queueing, retries'
// waits, the network); the entries of calls admitted since the oldest call
// this Transport has in flight, less grace, are always kept (Limiter.TrueDown
// says why that never admits what the upstream would refuse). grace <= 0
// turns lowering off.
func WithTrueDown(grace time.Duration) TransportOption {
	return func(t *Transport) {
		t.trueDown = max(grace, 0)
		if t.trueDown > 0 && t.flying == nil {
			t.flying = &inflight{at: map[uint64]time.Time{}}
		}
	}
}

// inflight is the admission times of the calls a Transport has sent and
// not yet had answered (only kept WithTrueDown).
type inflight struct {
	mu   sync.Mutex
	next uint64
	at   map[uint64]time.Time
}

// add records a call admitted at at and returns its handle for done.
func (f *inflight) add(at time.Time) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.at[f.next] = at
	return f.next
}

func (f *inflight) done(id uint64) {
	f.mu.Lock()
	delete(f.at, id)
	f.mu.Unlock()
}

// oldest returns the earliest admission among the calls in flight, or
// from when there is none earlier.
func (f *inflight) oldest(from time.Time) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, at := range f.at {
		if at.Before(from) {
			from = at
		}
	}
	return from
}

// learnedLimits remembers, per owner and budget, the last limit a report
// said, so that the store is told a limit once, not on every response.
type learnedLimits struct {
	mu   sync.Mutex
	last map[[2]string]int64
}

// changed records limit for owner's budget and reports whether it differs
// from the last one recorded.
func (l *learnedLimits) changed(owner, budget string, limit int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := [2]string{owner, budget}
	if l.last[k] == limit {
		return false
	}
	if l.last == nil {
		l.last = map[[2]string]int64{}
	}
	l.last[k] = limit
	return true
}

// forget drops owner's budget, so the next report tells the store again.
func (l *learnedLimits) forget(owner, budget string) {
	l.mu.Lock()
	delete(l.last, [2]string{owner, budget})
	l.mu.Unlock()
}

// report reads what resp says of the owner's standing (the Reporter: the
// cost table's profile) and acts on it: every report is an event; a limit
// the upstream states is learned (Limiter.LearnLimit); and when the
// upstream counts more used than this attempt's reservation saw, the store
// is trued up (Limiter.TrueUp), so every process sharing it counts what
// another client spent. A report the reservation already covers costs no
// store call. body is the peeked body of an error response, else nil.
func (a *attempt) report(resp *http.Response, res *Reservation, body []byte) {
	t := a.t
	if t.reporter == nil {
		return
	}
	reports, ignored := t.reporter.Reports(a.req, resp, body, t.limiter.eventTime())
	if len(reports) == 0 && len(ignored) == 0 {
		return
	}
	l := t.limiter
	obs := l.observers(a.ctx)
	base := a.event(res)
	for _, why := range ignored {
		why = a.scrub(why)
		e := base
		e.Kind, e.Time, e.Err = EventReportIgnored, l.eventTime(), errors.New(why)
		l.emit(obs, e)
		t.log.LogAttrs(a.ctx, slog.LevelDebug, "quota: transport: report ignored",
			slog.String("api", l.api), slog.String("why", why))
	}
	if len(reports) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), reportTimeout)
	defer cancel()
	for i := range reports {
		r := reports[i]
		if _, ok := t.budgets[r.Budget]; !ok {
			continue // a scope the table maps to no budget of this limiter
		}
		e := base
		e.Kind, e.Time, e.Budget, e.Report = EventReport, l.eventTime(), r.Budget, &r
		l.emit(obs, e)
	}
	a.trued = a.trued[:0]
	for _, tr := range tightest(reports, t.budgets) {
		r := tr.Report
		if tr.least > 0 {
			lr := r
			lr.Limit = tr.least
			a.learn(ctx, res, lr, base, obs)
		}
		if r.Spent {
			a.spent(ctx, res, r)
		}
		a.trued = append(a.trued, r)
		a.trueUp(ctx, res, r, base, obs)
	}
}

// trueUp brings the store's count of r's budget up to the upstream's
// report (and down, WithTrueDown), unless the reservation shows it already
// counts no less.
func (a *attempt) trueUp(ctx context.Context, res *Reservation, r Report, base Event, obs []Observer) {
	t, l := a.t, a.t.limiter
	up, down := a.behind(res, r)
	if !up && !(down && t.trueDown > 0) {
		return
	}
	var since time.Time
	if t.trueDown > 0 {
		since = t.flying.oldest(res.At).Add(-t.trueDown)
	}
	out, err := l.TrueDown(ctx, a.cred, r, since)
	if err != nil {
		t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: could not true up to the upstream's report",
			slog.String("api", l.api), slog.String("budget", r.Budget), slog.Any("credential", a.cred),
			slog.String("error", a.scrub(err.Error())))
		return
	}
	if out.Added != 0 {
		e := base
		e.Kind, e.Time, e.Budget, e.Report, e.Units = EventTrueUp, l.eventTime(), r.Budget, &r, out.Added
		e.Usage = []Usage{out.Usage}
		l.emit(obs, e)
		t.log.LogAttrs(a.ctx, slog.LevelDebug, "quota: transport: trued the store up (or down) to the upstream's report",
			slog.String("api", l.api), slog.String("budget", r.Budget), slog.Any("credential", a.cred),
			slog.Int64("upstream_used", out.Upstream), slog.Int64("counted", out.Counted), slog.Int64("added", out.Added),
			slog.Time("until", r.Reset))
	}
}

// event returns the fields every event about res's call carries.
func (a *attempt) event(res *Reservation) Event {
	return Event{API: a.t.limiter.api, Owner: ownerName(res.Owner, res.Credential), Label: res.Label,
		Credential: res.Credential, Method: res.Method, Job: res.Job, Context: a.ctx}
}

// trueUpAgain trues the store up to the response's reports again after
// a refund, for the budgets refunded (nil: every budget res charged): the
// reports counted the call at what the upstream charged for it (nothing,
// for a call it refused), and a refund taken after the first true-up would
// leave the store that much below the upstream's count (another client's
// spend, learned from the report, would be given back with it).
func (a *attempt) trueUpAgain(ctx context.Context, res *Reservation, refunded map[string]int64) {
	var base Event
	var obs []Observer
	for _, r := range a.trued {
		if _, ok := refunded[r.Budget]; !ok && (refunded != nil || res.usage(r.Budget) == nil) {
			continue
		}
		if obs == nil {
			base, obs = a.event(res), a.t.limiter.observers(a.ctx)
		}
		a.trueUp(ctx, res, r, base, obs)
	}
}

// tightest returns, of reports, one per budget of budgets: when several
// scopes of one response report on one budget (an IETF upstream's
// per-minute and daily policies, both mapped to the table's one budget),
// the one with the least remaining, and the smallest limit any of them
// states (least), the one to learn. Learning each in turn would leave the
// last one's limit in force (a daily policy's 1,000 over the minute's 10),
// and the meter would admit what the tightest policy refuses.
func tightest(reports []Report, budgets map[string]Budget) []tightReport {
	out := make([]tightReport, 0, len(reports))
	at := map[string]int{}
	left := func(r Report) int64 {
		switch {
		case r.Remaining >= 0:
			return r.Remaining
		case r.Limit > 0 && r.Used >= 0:
			return max(r.Limit-r.Used, 0)
		}
		return MaxLimit
	}
	for _, r := range reports {
		if _, ok := budgets[r.Budget]; !ok {
			continue
		}
		i, seen := at[r.Budget]
		if !seen {
			at[r.Budget] = len(out)
			out = append(out, tightReport{Report: r, least: r.Limit})
			continue
		}
		if r.Limit > 0 && (out[i].least <= 0 || r.Limit < out[i].least) {
			out[i].least = r.Limit
		}
		if left(r) < left(out[i].Report) {
			out[i].Report = r
		}
	}
	return out
}

// tightReport is the report tightest keeps for a budget, and the least
// limit the response states for it.
type tightReport struct {
	Report
	least int64
}

// behind reports whether report r may count more used than the store (up)
// or less (down): when the reservation charged r's budget and counted at
// least the upstream's used after its own charge, the store counts no less
// (it only grows until entries expire), and no true-up is needed. A budget
// the reservation did not charge may be either.
func (a *attempt) behind(res *Reservation, r Report) (up, down bool) {
	if r.Reset.IsZero() {
		return false, false // nothing says until when to count it
	}
	for _, u := range res.Usage {
		if u.Budget != r.Budget {
			continue
		}
		used, err := upstreamUsed(r, u.Limit)
		if err != nil {
			return false, false
		}
		return used > u.Used, used < u.Used
	}
	return true, true
}

// spent marks r's budget spent until the upstream's reset (Report.Spent):
// the store's count may cover the upstream's now, but not until then when
// some of the entries it counts were recorded before the upstream's window
// began (the job's own calls of its previous window, still in a sliding
// budget's window) and leave sooner; a call admitted then would be refused.
// The mark ends at the upstream's reset, or sooner where that lies past
// the budget's own window in force (when an entry recorded now would stop
// counting): a reset a report put months ahead, by a fault or a lie, does
// not lock a budget of an hour for months; a later report can mark it
// again. (tightest kept only reports of the Transport's budgets.)
func (a *attempt) spent(ctx context.Context, res *Reservation, r Report) {
	now := a.t.limiter.now()
	until := r.Reset
	if end := a.t.limiter.def(a.t.budgets[r.Budget]).Window.Expiry(now); until.After(end) {
		until = end
	}
	if !until.After(now) {
		return
	}
	for _, u := range res.Usage {
		if u.Budget == r.Budget && !u.ExhaustedUntil.Before(until) {
			return // already marked until then
		}
	}
	a.markSpent(ctx, r.Budget, until)
}

// learn tells the limiter the limit report r states for the owner
// (Limiter.LearnLimit), once per change seen by this Transport.
func (a *attempt) learn(ctx context.Context, res *Reservation, r Report, base Event, obs []Observer) {
	t := a.t
	if res.Owner == "" || !t.learned.changed(res.Owner, r.Budget, r.Limit) {
		return
	}
	applied, err := t.limiter.LearnLimit(ctx, res.Owner, r.Budget, min(r.Limit, MaxLimit))
	if err != nil {
		t.learned.forget(res.Owner, r.Budget)
		t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: could not record a limit the upstream reported",
			slog.String("api", t.limiter.api), slog.String("budget", r.Budget), slog.Int64("limit", r.Limit),
			slog.String("error", a.scrub(err.Error())))
		return
	}
	e := base
	e.Kind, e.Time, e.Budget, e.Units, e.Report = EventLimitLearned, t.limiter.eventTime(), r.Budget, r.Limit, &r
	e.Outcome = OutcomeRecorded
	if applied {
		e.Outcome = OutcomeApplied
	}
	t.limiter.emit(obs, e)
}
