package quota

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Estimate, then settle. A Transport over a BodyPricer takes a call's
// estimate (Estimate.Charge: an upper bound read from the request, such as
// an LLM request's prompt bound and output ceiling) before sending it, and
// hands the caller a successful response whose body feeds the Estimate's
// Actual as it is read. Once the body has said what the call cost — at its
// end (io.EOF), or at Close when what was read already holds it (a JSON
// body a decoder read to its closing brace, a stream's final usage event)
// — the charge is settled to it: budgets that cost less are given back the
// difference (Limiter.Settle), budgets that cost more have the excess
// recorded on top (Limiter.ChargeExcess), so the meter never counts less
// than the upstream billed. A refund is followed by a true-up to the
// response's reports again: they count the call at what the upstream
// charged and the spend of other clients, which a refund of the estimate's
// rest must not take back. A body closed before it said its cost (a
// stream abandoned half way), or one that says none, keeps the estimate.
// Each outcome is an EventSettle. Responses other than 2xx keep the
// estimate without one: errors (the upstream may have counted the call
// against its limits) and redirects (one logical call is charged once,
// its hops are not settled).

// settleTimeout bounds the store calls of one settle.
const settleTimeout = 10 * time.Second

// errClosedEarly is why a settle kept the estimate of a body closed before
// it said its cost.
var errClosedEarly = errors.New("quota: transport: response body closed before it said what the call cost: the estimate stays")

// settling wraps resp's body so the charge of res settles to the actual
// cost once the body has said it; resp as it is when there is nothing to
// settle.
func (a *attempt) settling(resp *http.Response, res *Reservation) *http.Response {
	if a.est.Actual == nil || resp.StatusCode < 200 || resp.StatusCode >= 300 || res.Unmetered || resp.Body == nil || resp.Body == http.NoBody {
		return resp
	}
	actual := a.est.Actual(resp)
	if actual == nil {
		return resp
	}
	resp.Body = &settleBody{rc: resp.Body, a: *a, res: res, actual: actual} // (a copy: the attempt itself stays on the stack)
	return resp
}

// settleBody is a response body that settles its call's charge once read.
type settleBody struct {
	rc     io.ReadCloser
	a      attempt
	res    *Reservation
	mu     sync.Mutex // guards actual between Read and a concurrent Close
	actual Actual
	once   sync.Once
}

func (b *settleBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.mu.Lock()
		_, _ = b.actual.Write(p[:n])
		b.mu.Unlock()
	}
	if err == io.EOF {
		b.finish(nil)
	}
	return n, err
}

func (b *settleBody) Close() error {
	err := b.rc.Close()
	b.finish(errClosedEarly)
	return err
}

// finish settles the charge once: to the actual cost when the body said
// it, else keeping the estimate (early says why, nil at EOF).
func (b *settleBody) finish(early error) {
	b.once.Do(func() {
		b.mu.Lock()
		units, err := b.actual.Units()
		b.mu.Unlock()
		if err != nil && early != nil {
			err = errors.Join(early, err)
		}
		b.a.settle(b.res, units, err)
	})
}

// settle settles res to units (per budget), or keeps it when err says the
// cost is unknown; either way an EventSettle.
func (a *attempt) settle(res *Reservation, units map[string]int64, why error) {
	t, l := a.t, a.t.limiter
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), settleTimeout)
	defer cancel()
	e := a.event(res)
	e.Kind = EventSettle
	if why != nil {
		e.Outcome, e.Err, e.Time, e.Usage = OutcomeKept, why, l.eventTime(), cloneUsage(res.Usage)
		l.emit(l.observers(a.ctx), e)
		t.log.LogAttrs(a.ctx, slog.LevelDebug, "quota: transport: estimate kept",
			slog.String("api", l.api), slog.String("method", res.Method), slog.String("why", a.scrub(why.Error())))
		return
	}
	back, excess := map[string]int64{}, map[string]int64{}
	for _, u := range res.Usage {
		n, ok := units[u.Budget]
		switch {
		case !ok || n == u.Cost:
		case n < u.Cost:
			back[u.Budget] = max(n, 0)
		default:
			excess[u.Budget] = n - u.Cost
		}
	}
	if len(back) > 0 {
		if err := l.Settle(ctx, res, back); err != nil {
			t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: settle failed: the estimate stays",
				slog.String("api", l.api), slog.String("method", res.Method), slog.Any("credential", a.cred),
				slog.String("error", a.scrub(err.Error())))
		} else {
			a.trueUpAgain(ctx, res, back)
		}
	}
	var failed error
	if len(excess) > 0 {
		if _, failed = l.ChargeExcess(ctx, res, excess); failed != nil {
			t.log.LogAttrs(a.ctx, slog.LevelError, "quota: transport: the call cost more than its estimate and the excess could not be recorded",
				slog.String("api", l.api), slog.String("method", res.Method), slog.Any("credential", a.cred),
				slog.String("error", a.scrub(failed.Error())))
		}
	}
	obs := l.observers(a.ctx)
	e.Outcome, e.Time, e.Usage = OutcomeSettled, l.eventTime(), cloneUsage(res.Usage) // (Settle and ChargeExcess updated the costs)
	l.emit(obs, e)
	for _, name := range slices.Sorted(maps.Keys(excess)) {
		x := e
		x.Outcome, x.Budget, x.Units, x.Err = OutcomeExcess, name, excess[name], failed
		l.emit(obs, x)
		t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: the call cost more than its estimate: the excess is counted",
			slog.String("api", l.api), slog.String("method", res.Method), slog.String("budget", name), slog.Int64("excess", excess[name]))
	}
}

func cloneUsage(us []Usage) []Usage { return append([]Usage(nil), us...) }
