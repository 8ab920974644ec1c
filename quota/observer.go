package quota

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// Observer receives a Limiter's events: every decision, each threshold a
// budget crosses, refunds, exhaust marks, store errors and detected store
// losses (WithObserver, WithTransportObserver). quota/promquota and
// quota/otelquota are Observers. Events are delivered in order, off the
// decision path, from a queue (WithEventQueue); when it is full they are
// dropped and counted (Limiter.DroppedEvents), so an Observer never slows a
// decision. Observe is not called concurrently for one Limiter; a panic in it
// is recovered and logged. It must not call the Limiter's Flush.
type Observer interface {
	Observe(e Event)
}

// ObserverFunc is an Observer that is a function.
type ObserverFunc func(e Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// EventKind says what an Event reports.
type EventKind uint8

// The kinds of Event.
const (
	// EventDecision is one Take: Outcome says what was decided.
	EventDecision EventKind = iota + 1
	// EventThreshold is a budget's usage crossing Percent of its limit,
	// reported once per window across every process sharing the store.
	EventThreshold
	// EventRefund is a reservation given back: Usage holds the units
	// returned per budget (Cost).
	EventRefund
	// EventExhaust is a budget marked spent until Until (a zero Until
	// clears the mark).
	EventExhaust
	// EventStoreError is an operation the store could not do (Err); a
	// decision it broke is also reported as EventDecision with Outcome
	// OutcomeUnmetered or OutcomeFailed.
	EventStoreError
	// EventStoreLoss is the store found to have lost recorded usage (a
	// Redis restart without persistence, FLUSHALL, eviction, a replaced
	// SQLite file): Budget names the budget affected, Err says what was
	// found.
	EventStoreLoss
	// EventReport is an upstream response's report of a budget's standing
	// (Report), read by the Transport.
	EventReport
	// EventTrueUp is the store brought up to what a report said (Report):
	// Units is how many units the upstream counted spent that the meter
	// had not seen (negative when an opt-in lowering gave units back), and
	// Usage the budget's standing after.
	EventTrueUp
	// EventReportIgnored is a report the Transport could not read (a
	// malformed or contradictory value): Err says which. It is never an
	// error to the caller.
	EventReportIgnored
	// EventLimitLearned is a limit read from a report (Report.Limit) that
	// differs from the one in force: Percent is unused, Units holds the
	// learned limit, and Outcome is "applied" or "recorded" (a raise the
	// caller did not opt in to).
	EventLimitLearned
	// EventSettle is a Transport's estimated call (BodyPricer) settled to
	// what its response said it cost. Outcome OutcomeSettled: Usage holds
	// each budget charged, Cost the units it counts after the settle.
	// OutcomeExcess, one event per budget that cost more than its estimate
	// (after the settled one): Budget names it and Units is the excess
	// recorded on top (Limiter.ChargeExcess; Err when that failed).
	// OutcomeKept: the body was closed before it said its cost, or said
	// none; the estimate stays and Err says why.
	EventSettle
)

var kindNames = [...]string{"", "decision", "threshold", "refund", "exhaust", "store_error", "store_loss",
	"report", "true_up", "report_ignored", "limit_learned", "settle"}

// String returns the kind's name: "decision", "threshold", "refund",
// "exhaust", "store_error", "store_loss", "report", "true_up",
// "report_ignored", "limit_learned" or "settle".
func (k EventKind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", k)
}

// Outcome is what a decision did with a charge.
type Outcome string

// The outcomes of a decision.
const (
	OutcomeAdmitted  Outcome = "admitted"  // every budget paid
	OutcomeRefused   Outcome = "refused"   // a budget could not pay (ErrExhausted)
	OutcomeUnmetered Outcome = "unmetered" // the store was unreachable and FailOpen let it through
	OutcomeFailed    Outcome = "failed"    // the store was unreachable and the charge was refused

	// Of an EventLimitLearned: the learned limit applies now, or is only
	// recorded (a raise the Limiter was not told to take, WithLearnedRaises).
	OutcomeApplied  Outcome = "applied"
	OutcomeRecorded Outcome = "recorded"

	// Of an EventSettle: settled within the estimate, an excess recorded
	// above it, or the estimate kept (the cost never read).
	OutcomeSettled Outcome = "settled"
	OutcomeExcess  Outcome = "excess"
	OutcomeKept    Outcome = "kept"
)

// Event is one thing a Limiter reports to its Observers. Which fields are
// set depends on Kind. It never holds a credential's secret.
type Event struct {
	Kind EventKind
	// Time is when it happened: the store's time for decisions and refunds
	// when the store answered, the limiter's clock otherwise.
	Time time.Time
	API  string
	// Owner is the name of the account the budgets are kept under
	// (Credential.Owner, WithOwner or the store's record); empty when the
	// credential is its own owner.
	Owner string
	// Label is the credential's label (may be empty); Credential its
	// fingerprint.
	Label, Credential string
	Method            string // the charge's method
	Job               string // the job run charging (ContextWithJob)

	// Outcome, Start, Latency and RetryAfter describe a decision. Start is
	// when the limiter began deciding (host clock); Latency is how long it
	// took, store round trip included; RetryAfter is set when refused.
	Outcome    Outcome
	Start      time.Time
	Latency    time.Duration
	RetryAfter time.Duration

	// Usage is, for a decision, each budget's usage after the charge when
	// admitted, its state when refused (with RetryAt on the refusing
	// budgets), with Cost set to what the charge asked; for a refund, the
	// units given back (Cost) per budget; for a threshold, the usage that
	// crossed it.
	Usage []Usage

	// Budget names the budget a threshold, exhaust mark or store loss is
	// about, or the budget that refused a charge.
	Budget string
	// Percent is the threshold crossed (EventThreshold).
	Percent int
	// Until is when an exhaust mark ends (EventExhaust), or when a
	// threshold's window ends (EventThreshold).
	Until time.Time
	// Err is the cause of an EventStoreError or EventStoreLoss, or what
	// was wrong with an EventReportIgnored.
	Err error
	// Report is the upstream's report of an EventReport or EventTrueUp.
	Report *Report
	// Units is the units an EventTrueUp added (or removed), the limit an
	// EventLimitLearned learned, or the excess of an EventSettle.
	Units int64
	// Context is the context of the call that caused the event, for
	// tracing adapters (the parent span). It may be done by delivery time:
	// read values from it, do not wait on it.
	Context context.Context
}

// DefaultThresholds are the percentages of a budget's limit whose crossing
// an Observer is told of, unless WithThresholds says otherwise.
var DefaultThresholds = []int{50, 80, 95, 100}

// DefaultEventQueue is how many events a Limiter holds for slow Observers
// before it drops them (WithEventQueue).
const DefaultEventQueue = 4096

// markTimeout bounds the store call that records a threshold crossing.
const markTimeout = 10 * time.Second

// WithObserver adds o to the Limiter's observers: it receives every event
// of the Limiter, delivered off the decision path (see Observer). Several
// observers receive the same events in the order they were added.
func WithObserver(o Observer) Option {
	return func(l *Limiter) {
		if o != nil {
			l.obs = append(l.obs, o)
		}
	}
}

// WithThresholds sets the percentages of a budget's limit (each 1..100)
// whose crossing is reported as EventThreshold: once per window (a daily
// window's day, a monthly window's month; one window's length for a
// sliding window) per owner and budget, across every process sharing the
// store, which records each crossing (Store.MarkCrossing) off the decision
// path. With no percentages no thresholds are reported. Default: DefaultThresholds, when the Limiter
// has an Observer. New rejects a percentage out of range.
func WithThresholds(percents ...int) Option {
	return func(l *Limiter) {
		l.thresholds = slices.Clone(percents)
		if l.thresholds == nil {
			l.thresholds = []int{}
		}
	}
}

// WithEventQueue sets how many events the Limiter holds for its Observers
// before it drops new ones (counted by DroppedEvents). Default:
// DefaultEventQueue.
func WithEventQueue(n int) Option { return func(l *Limiter) { l.queueCap = max(n, 1) } }

// events delivers a Limiter's events to its observers, in order, from one
// goroutine at a time, started when events arrive and ended when the queue
// is empty (so an idle Limiter holds no goroutine).
type events struct {
	capacity int
	dropped  atomic.Uint64

	mu      sync.Mutex
	queue   []queued
	head    int
	running bool
	pending int             // queued or being delivered
	waiters []chan struct{} // Flush calls waiting for pending to reach 0
}

// queued is an event for obs, or threshold crossings to record (marks,
// under the store owner owner) and report to obs.
type queued struct {
	e     Event
	obs   []Observer
	marks []Event
	owner string
}

// setupEvents validates the observer options; called by New.
func (l *Limiter) setupEvents() error {
	for _, p := range l.thresholds {
		if p < 1 || p > 100 {
			return invalidf("threshold %d%%: must be between 1 and 100", p)
		}
	}
	if l.thresholds == nil {
		l.thresholds = DefaultThresholds
	}
	slices.Sort(l.thresholds)
	l.thresholds = slices.Compact(l.thresholds)
	if l.queueCap == 0 {
		l.queueCap = DefaultEventQueue
	}
	l.ev = &events{capacity: l.queueCap}
	return nil
}

// withObservers returns ctx carrying extra observers for the limiter calls
// made under it (a Transport's WithTransportObserver).
func withObservers(ctx context.Context, obs []Observer) context.Context {
	if len(obs) == 0 {
		return ctx
	}
	return withValues(ctx, func(v *callValues) {
		if len(v.observers) > 0 {
			obs = append(slices.Clip(obs), v.observers...)
		}
		v.observers = obs
	})
}

// observers returns the observers of a call under ctx, nil when none.
func (l *Limiter) observers(ctx context.Context) []Observer {
	if ctx == nil {
		return l.obs // the entry point refuses it
	}
	return l.observersWith(valuesOf(ctx))
}

// observersWith returns the observers of a call under a context carrying
// v, nil when none.
func (l *Limiter) observersWith(v *callValues) []Observer {
	var extra []Observer
	if v != nil {
		extra = v.observers
	}
	if len(extra) == 0 {
		return l.obs
	}
	if len(l.obs) == 0 {
		return extra
	}
	return append(slices.Clip(l.obs), extra...)
}

// emit queues e for obs.
func (l *Limiter) emit(obs []Observer, e Event) { l.enqueue(queued{e: e, obs: obs}) }

// enqueue queues q, or drops and counts it when the queue is full.
func (l *Limiter) enqueue(q queued) {
	d := l.ev
	d.mu.Lock()
	if len(d.queue)-d.head >= d.capacity {
		d.mu.Unlock()
		d.dropped.Add(1)
		return
	}
	d.queue = append(d.queue, q)
	d.pending++
	start := !d.running
	d.running = true
	d.mu.Unlock()
	if start {
		go l.deliver()
	}
}

// deliver hands queued events to their observers until the queue is empty.
func (l *Limiter) deliver() {
	d := l.ev
	for {
		d.mu.Lock()
		if d.head == len(d.queue) {
			d.queue, d.head, d.running = d.queue[:0], 0, false
			d.mu.Unlock()
			return
		}
		q := d.queue[d.head]
		d.queue[d.head] = queued{}
		d.head++
		d.mu.Unlock()
		if q.marks != nil {
			l.mark(q)
		} else {
			for _, o := range q.obs {
				l.call(o, q.e)
			}
		}
		d.done()
	}
}

// call runs one Observe, recovering a panic.
func (l *Limiter) call(o Observer, e Event) {
	defer func() {
		if v := recover(); v != nil {
			l.log.Error("quota: observer panicked", "api", l.api, "event", e.Kind.String(), "panic", v)
		}
	}()
	o.Observe(e)
}

// done marks one pending item finished and wakes Flush callers at zero.
func (d *events) done() {
	d.mu.Lock()
	d.pending--
	var w []chan struct{}
	if d.pending == 0 {
		w, d.waiters = d.waiters, nil
	}
	d.mu.Unlock()
	for _, c := range w {
		close(c)
	}
}

// DroppedEvents returns how many events the Limiter dropped because its
// observers fell WithEventQueue events behind.
func (l *Limiter) DroppedEvents() uint64 { return l.ev.dropped.Load() }

// Flush waits until every event queued so far has been delivered and every
// threshold crossing found so far has been recorded and reported, or ctx is
// done. Call it before a short-lived program exits (a job run under system
// cron) so its last events are not lost.
func (l *Limiter) Flush(ctx context.Context) error {
	d := l.ev
	d.mu.Lock()
	if d.pending == 0 {
		d.mu.Unlock()
		return nil
	}
	c := make(chan struct{})
	d.waiters = append(d.waiters, c)
	d.mu.Unlock()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("quota: flush events: %w", ctx.Err())
	}
}

// ownerName returns the name of the account a charge was kept under: the
// account, or "" when it is the credential's fingerprint (its own owner).
func ownerName(account, fp string) string {
	if account == fp || (fp == "" && len(account) == FingerprintLen && strings.Trim(account, "0123456789abcdef") == "") {
		return ""
	}
	return account
}

// decision is what Take found, for its event.
type decision struct {
	start  time.Time
	fp     string // the credential's fingerprint
	owner  string // the TakeRequest's Owner
	job    string
	debits []backend.Debit
	res    *backend.TakeResult // the store's answer; nil when it failed
	err    error               // the store's error
}

// note records what Take found; called once the store answered or failed.
func (d *decision) note(fp string, req *backend.TakeRequest, debits []backend.Debit, res *backend.TakeResult, err error) {
	if d == nil {
		return
	}
	if err != nil && !errors.Is(err, ErrStoreUnavailable) {
		return // a bad argument or unknown credential: no decision
	}
	d.fp, d.debits, d.res, d.err = fp, debits, res, err
	if req != nil {
		d.owner, d.job = req.Owner, req.Job
	}
}

// decided reports a decision: r is the reservation when admitted or
// unmetered, err Take's error otherwise.
func (l *Limiter) decided(ctx context.Context, obs []Observer, cred Credential, ch Charge, d *decision, r *Reservation, err error) {
	if d.debits == nil || (r == nil && d.res == nil && d.err == nil) {
		return // invalid arguments: no decision was made
	}
	if d.err != nil {
		l.storeError(ctx, obs, ownerName(d.owner, d.fp), cred.Label, d.fp, d.err)
	}
	e := Event{
		Kind: EventDecision, API: l.api, Owner: ownerName(d.owner, d.fp), Label: cred.Label, Credential: d.fp,
		Method: ch.Method, Job: d.job, Start: d.start, Latency: time.Since(d.start), Context: ctx,
	}
	budgets := func() {
		for _, b := range d.debits {
			e.Usage = append(e.Usage, Usage{Budget: b.Name, Window: b.Window, Limit: b.Limit, Cost: b.Cost})
		}
	}
	switch {
	case r != nil && r.Unmetered:
		e.Outcome, e.Time = OutcomeUnmetered, r.At
		budgets()
	case r != nil:
		e.Outcome, e.Time, e.Usage = OutcomeAdmitted, r.At, slices.Clone(r.Usage)
	case d.res != nil:
		e.Outcome, e.Time, e.Usage = OutcomeRefused, d.res.At, slices.Clone(d.res.Usage)
		for i := range e.Usage {
			e.Usage[i].Cost = d.debits[i].Cost
		}
		var ee *ExhaustedError
		if errors.As(err, &ee) {
			e.Budget, e.RetryAfter = ee.Budget, ee.RetryAfter
		}
	default:
		e.Outcome, e.Time = OutcomeFailed, l.eventTime()
		budgets()
	}
	l.emit(obs, e)
	if e.Outcome == OutcomeAdmitted {
		l.crossings(ctx, obs, e, d)
	}
}

// eventTime is the limiter's clock, or the host's.
func (l *Limiter) eventTime() time.Time {
	if t := l.now(); !t.IsZero() {
		return t
	}
	return time.Now()
}

// crossingKey names a threshold mark the limiter knows of.
type crossingKey struct {
	owner, budget string
	percent       int
}

// crossings finds the thresholds an admitted charge crossed and records
// them in the store off the decision path; the first process to record a
// crossing in a window reports it. A mark the limiter recorded or found
// is remembered until the end of the window it was asked for, so that a
// budget hovering at a threshold (a saturated one crosses 100% on every
// admitted charge) costs no store call per decision; for a sliding window
// this may hold back a crossing by another process's mark for up to one
// window length.
func (l *Limiter) crossings(ctx context.Context, obs []Observer, e Event, dec *decision) {
	debits := dec.debits
	if len(l.thresholds) == 0 {
		return
	}
	var found []Event
	for i, u := range e.Usage {
		before := u.Used - u.Cost
		for _, p := range l.thresholds {
			// crossed: before < p% of the limit <= after, in integers
			if before*100 < int64(p)*u.Limit && u.Used*100 >= int64(p)*u.Limit {
				mk := crossingKey{dec.owner, u.Budget, p}
				if until, ok := l.marks.Load(mk); ok && until.(time.Time).After(e.Time) {
					continue // known marked in this window: no store call
				}
				c := e
				c.Kind, c.Budget, c.Percent, c.Usage = EventThreshold, u.Budget, p, []Usage{u}
				c.Outcome, c.Start, c.Latency = "", time.Time{}, 0
				c.Until = u.Reset
				if !debits[i].Window.IsCalendar() {
					c.Until = e.Time.Add(debits[i].Window.Duration())
				}
				found = append(found, c)
			}
		}
	}
	if len(found) == 0 {
		return
	}
	l.enqueue(queued{obs: obs, marks: found, owner: dec.owner})
}

// mark records the crossings of q in the store and reports those this
// process recorded first; called by the delivering goroutine, so they
// come in order after the decision that crossed them.
func (l *Limiter) mark(q queued) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(q.marks[0].Context), markTimeout)
	defer cancel()
	for _, c := range q.marks {
		first, err := l.store.MarkCrossing(ctx, &backend.CrossingMark{
			API: l.api, Owner: q.owner, Budget: c.Budget, Percent: c.Percent, Until: c.Until, Now: l.now(),
		})
		if err != nil {
			e := Event{Kind: EventStoreError, Time: l.eventTime(), API: l.api, Owner: c.Owner, Label: c.Label, Credential: c.Credential,
				Err: fmt.Errorf("quota: mark %d%% crossed of %s/%s: %w", c.Percent, l.api, c.Budget, err), Context: c.Context}
			for _, o := range q.obs {
				l.call(o, e)
			}
			continue
		}
		l.marks.Store(crossingKey{q.owner, c.Budget, c.Percent}, c.Until)
		if first {
			for _, o := range q.obs {
				l.call(o, c)
			}
		}
	}
}

// storeError reports a store error.
func (l *Limiter) storeError(ctx context.Context, obs []Observer, owner, label, fp string, err error) {
	l.emit(obs, Event{Kind: EventStoreError, Time: l.eventTime(), API: l.api, Owner: owner, Label: label, Credential: fp, Err: err, Context: ctx})
}

// storeLost reports that the store lost recorded usage of budget of the
// account (the loss detection calls it).
func (l *Limiter) storeLost(ctx context.Context, account, fp, label, budget string, err error) {
	obs := l.observers(ctx)
	if len(obs) == 0 {
		return
	}
	l.emit(obs, Event{
		Kind: EventStoreLoss, Time: l.eventTime(), API: l.api, Owner: ownerName(account, fp), Label: label, Credential: fp,
		Budget: budget, Err: err, Context: ctx,
	})
}

// refunded reports a refund (got: units given back per budget) or the
// store error that stopped it.
func (l *Limiter) refunded(ctx context.Context, res *Reservation, budgets []Budget, got map[string]int64, err error) {
	obs := l.observers(ctx)
	if len(obs) == 0 {
		return
	}
	owner := ownerName(res.Owner, res.Credential)
	if err == nil && len(got) == 0 {
		return // nothing was refunded
	}
	if err != nil {
		if errors.Is(err, ErrStoreUnavailable) {
			l.storeError(ctx, obs, owner, res.Label, res.Credential, err)
		}
		return
	}
	e := Event{
		Kind: EventRefund, Time: l.eventTime(), API: l.api, Owner: owner, Label: res.Label, Credential: res.Credential,
		Method: res.Method, Job: res.Job, Context: ctx,
	}
	for _, b := range budgets {
		if n, ok := got[b.Name]; ok {
			e.Usage = append(e.Usage, Usage{Budget: b.Name, Window: b.Window, Limit: b.Limit, Cost: n})
		}
	}
	l.emit(obs, e)
}

// marked reports an exhaust mark set (or cleared) or the store error
// that stopped it.
func (l *Limiter) marked(ctx context.Context, cred Credential, fp, account, budget string, until time.Time, err error) {
	obs := l.observers(ctx)
	if len(obs) == 0 {
		return
	}
	if err != nil {
		if errors.Is(err, ErrStoreUnavailable) {
			l.storeError(ctx, obs, ownerName(account, fp), cred.Label, fp, err)
		}
		return
	}
	l.emit(obs, Event{
		Kind: EventExhaust, Time: l.eventTime(), API: l.api, Owner: ownerName(account, fp), Label: cred.Label, Credential: fp,
		Budget: budget, Until: until, Context: ctx,
	})
}
