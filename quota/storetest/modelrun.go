package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// A run of a ModelCase on one store, compared step by step with the model.

// modelStats counts what a run did.
type modelStats struct {
	admitted, refused, rejected, found, notFound, skipped int
}

func (s modelStats) String() string {
	return fmt.Sprintf("%d admitted, %d refused, %d rejected (invalid, cost over limit), %d refunds/settles found, %d not found, %d steps skipped",
		s.admitted, s.refused, s.rejected, s.found, s.notFound, s.skipped)
}

// modelMismatch is where a run first differs from the model: sig says how
// (the operation and the field, without values), for shrinking to keep.
type modelMismatch struct {
	step   int
	sig    string
	detail string
}

// modelRun is one run of a case on one store.
type modelRun struct {
	ctx     context.Context
	lim     *quota.Limiter
	clock   *Clock
	move    func(time.Time)
	sim     *modelSim
	budgets []quota.Budget
	res     map[int]*quota.Reservation
	stats   modelStats
}

// runModelCase runs c on a fresh store and returns the first mismatch.
func runModelCase(t *testing.T, newStore func(t *testing.T) (quota.Store, func(time.Time)), c ModelCase) (*modelMismatch, modelStats) {
	t.Helper()
	mb, qb, err := modelBudgets()
	if err != nil {
		t.Fatal(err)
	}
	st, move := newStore(t)
	defer st.Close()
	clock := NewClock(c.Start)
	var logged bytes.Buffer // what the limiter logs (a store loss found) goes in a mismatch's detail
	// a fast fingerprint: the default is slow on purpose
	lim, err := quota.New(st, "api", qb, quota.WithClock(clock.Now), quota.WithFingerprintKey([]byte("storetest-model")),
		quota.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	if err != nil {
		t.Fatalf("quota.New: %v", err)
	}
	if move != nil {
		move(c.Start)
	}
	r := &modelRun{ctx: context.Background(), lim: lim, clock: clock, move: move, sim: newModelSim(mb, c.Start), budgets: qb, res: map[int]*quota.Reservation{}}
	for i, op := range c.Ops {
		if mm := r.step(i, op); mm != nil {
			if logged.Len() > 0 {
				mm.detail += "\nthe limiter logged:\n" + logged.String()
			}
			return mm, r.stats
		}
	}
	return nil, r.stats
}

func (r *modelRun) step(i int, op ModelOp) (mm *modelMismatch) {
	defer func() {
		if p := recover(); p != nil {
			mm = r.mismatch(i, op, op.Kind+": panic", fmt.Sprintf("panic: %v\n%s", p, debug.Stack()))
		}
	}()
	want := r.sim.apply(op)
	if want.skip {
		r.stats.skipped++
		return nil
	}
	ctx := r.ctx
	switch op.Kind {
	case OpForward, OpBack:
		r.clock.Set(r.sim.now)
		if r.move != nil {
			r.move(r.sim.now)
		}
	case OpTake:
		res, err := r.lim.Take(ctx, modelCreds[op.Cred], quota.Charge{Method: "m", Units: op.Units})
		if mm = r.checkTake(i, op, want, res, err); mm == nil && err == nil {
			r.res[op.ID] = res
		}
	case OpBurst:
		mm = r.burst(i, op, want)
	case OpAllow:
		mm = r.checkTake(i, op, want, nil, r.lim.Allow(ctx, modelCreds[op.Cred], quota.Charge{Method: "m", Units: op.Units}))
	case OpRefund, OpSettle:
		res := r.res[op.Res]
		var err error
		switch {
		case op.Kind == OpRefund && op.ByID:
			var byID *quota.Reservation
			if byID, err = quota.ParseReservationID(res.ID()); err == nil {
				err = r.lim.Refund(ctx, byID)
			}
		case op.Kind == OpRefund:
			err = r.lim.Refund(ctx, res)
		case len(res.Usage) == 1 && len(op.Units) == 1:
			for _, n := range op.Units {
				err = res.Settle(ctx, n)
			}
		default:
			err = r.lim.Settle(ctx, res, op.Units)
		}
		mm = r.checkErr(i, op, want.err, err)
		if err == nil {
			r.stats.found++
		} else {
			r.stats.notFound++
		}
	case OpExhaust:
		var until time.Time
		if !op.Clear {
			until = r.clock.Now().Add(op.D)
		}
		mm = r.checkErr(i, op, want.err, r.lim.Exhaust(ctx, modelCreds[op.Cred], op.Budget, until))
	case OpAdjust:
		mm = r.checkErr(i, op, want.err, r.lim.Adjust(ctx, modelCreds[op.Cred], op.Budget, op.N))
	}
	if mm != nil {
		return mm
	}
	creds := []int{want.cred}
	if want.cred < 0 {
		creds = []int{0, 1}
	}
	for _, c := range creds {
		if mm := r.checkStatus(i, op, c, want.now); mm != nil {
			return mm
		}
	}
	if i%10 == 9 {
		return r.checkEntries(i, op, creds[0], (i/10)%len(r.budgets), want.now)
	}
	return nil
}

func (r *modelRun) mismatch(i int, op ModelOp, sig, detail string) *modelMismatch {
	return &modelMismatch{step: i, sig: sig, detail: fmt.Sprintf("step %d at %s: %s\n%s", i+1, fmtTime(r.sim.decided()), op, detail)}
}

func (r *modelRun) checkErr(i int, op ModelOp, want, got error) *modelMismatch {
	if want == nil && got == nil || want != nil && errors.Is(got, want) && (want == quota.ErrExhausted || !errors.Is(got, quota.ErrExhausted)) {
		return nil
	}
	return r.mismatch(i, op, fmt.Sprintf("%s: model %s, store %s", op.Kind, errKind(want), errKind(got)),
		fmt.Sprintf("model: %s\nstore: %v", errKind(want), got))
}

// checkTake compares a Take's or Allow's answer (res is nil for Allow).
func (r *modelRun) checkTake(i int, op ModelOp, want modelOutcome, res *quota.Reservation, err error) *modelMismatch {
	switch {
	case want.err == nil:
		r.stats.admitted++
	case want.err == quota.ErrExhausted:
		r.stats.refused++
	default:
		r.stats.rejected++
	}
	if mm := r.checkErr(i, op, want.err, err); mm != nil {
		if want.err == quota.ErrExhausted {
			mm.detail += "\nmodel refusal: " + r.describe(want.debits[want.worst], want.usage[want.worst])
		}
		return mm
	}
	switch {
	case want.err == quota.ErrExhausted:
		var ee *quota.ExhaustedError
		if !errors.As(err, &ee) {
			return r.mismatch(i, op, op.Kind+": refusal is no *ExhaustedError", fmt.Sprintf("store: %T %v", err, err))
		}
		d, u := want.debits[want.worst], want.usage[want.worst]
		cred := modelCreds[op.Cred]
		var field string
		switch {
		case ee.Budget != r.budgets[d.b].Name:
			field = "Budget"
		case ee.Used != u.used:
			field = "Used"
		case ee.Limit != u.limit:
			field = "Limit"
		case ee.Cost != d.cost:
			field = "Cost"
		case !ee.RetryAt.Equal(u.retry):
			field = "RetryAt"
		case ee.RetryAfter != u.retry.Sub(want.now):
			field = "RetryAfter"
		case !ee.ExhaustedUntil.Equal(u.exhausted):
			field = "ExhaustedUntil"
		case ee.API != "api" || ee.Credential != cred.Label:
			field = "API or Credential"
		default:
			return nil
		}
		var all []string
		for j, d := range want.debits {
			all = append(all, r.describe(d, want.usage[j]))
		}
		return r.mismatch(i, op, op.Kind+": refusal "+field, fmt.Sprintf(
			"model: refused by %s, used %d of %d, cost %d, retry at %s after %v, marked until %s\nstore: refused by %s, used %d of %d, cost %d, retry at %s after %v, marked until %s\nmodel, every budget:\n\t%s",
			r.budgets[d.b].Name, u.used, u.limit, d.cost, fmtTime(u.retry), u.retry.Sub(want.now), fmtTime(u.exhausted),
			ee.Budget, ee.Used, ee.Limit, ee.Cost, fmtTime(ee.RetryAt), ee.RetryAfter, fmtTime(ee.ExhaustedUntil),
			strings.Join(all, "\n\t")))
	case want.err == nil && op.Kind == OpTake:
		if res == nil || !res.At.Equal(want.now) || len(res.Usage) != len(want.debits) {
			return r.mismatch(i, op, op.Kind+": reservation", fmt.Sprintf("store: %+v; want At %s and %d budgets", res, fmtTime(want.now), len(want.debits)))
		}
		for j, d := range want.debits {
			if mm := r.checkUsage(i, op, "reservation", op.Cred, d.b, want.usage[j], res.Usage[j]); mm != nil {
				return mm
			}
		}
	}
	return nil
}

// burst makes op.N identical Takes at once and compares their answers, as
// a set, with the model's: the admissions (by usage), then the refusals.
func (r *modelRun) burst(i int, op ModelOp, want modelOutcome) *modelMismatch {
	type answer struct {
		res *quota.Reservation
		err error
	}
	answers := make([]answer, op.N)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for j := range answers {
		wg.Go(func() {
			<-start
			res, err := r.lim.Take(r.ctx, modelCreds[op.Cred], quota.Charge{Method: "m", Units: op.Units})
			answers[j] = answer{res, err}
		})
	}
	close(start)
	wg.Wait()
	var admitted []*quota.Reservation
	var refused []error
	for _, a := range answers {
		if a.err == nil {
			admitted = append(admitted, a.res)
		} else {
			refused = append(refused, a.err)
		}
	}
	if len(admitted) != len(want.admitted) {
		var errs []string
		for _, err := range refused {
			errs = append(errs, err.Error())
		}
		return r.mismatch(i, op, op.Kind+": admissions", fmt.Sprintf("model: %d admitted of %d\nstore: %d admitted; refusals:\n\t%s",
			len(want.admitted), op.N, len(admitted), strings.Join(errs, "\n\t")))
	}
	slices.SortFunc(admitted, func(x, y *quota.Reservation) int { return int(x.Usage[0].Used - y.Usage[0].Used) })
	for j, res := range admitted {
		r.stats.admitted++
		if res == nil || !res.At.Equal(want.now) || len(res.Usage) != len(want.debits) {
			return r.mismatch(i, op, op.Kind+": reservation", fmt.Sprintf("store: %+v; want At %s and %d budgets", res, fmtTime(want.now), len(want.debits)))
		}
		for k, d := range want.debits {
			if mm := r.checkUsage(i, op, "reservation", op.Cred, d.b, want.admitted[j][k], res.Usage[k]); mm != nil {
				return mm
			}
		}
		r.res[op.ID*burstIDs+j] = res // alike but for their usage: any order names them
	}
	for _, err := range refused {
		if mm := r.checkTake(i, op, want, nil, err); mm != nil {
			return mm
		}
	}
	return nil
}

// describe prints what the model expects of one debit.
func (r *modelRun) describe(d modelDebit, u modelUsage) string {
	s := fmt.Sprintf("%s: cost %d, used %d of %d", r.budgets[d.b].Name, d.cost, u.used, u.limit)
	if !u.retry.IsZero() {
		s += ", retry at " + fmtTime(u.retry)
	}
	if !u.exhausted.IsZero() {
		s += ", marked until " + fmtTime(u.exhausted)
	}
	return s
}

// checkUsage compares one budget's usage.
func (r *modelRun) checkUsage(i int, op ModelOp, what string, cred, b int, want modelUsage, got quota.Usage) *modelMismatch {
	qb := r.budgets[b]
	var field string
	switch {
	case got.Budget != qb.Name:
		field = "Budget"
	case got.Window.String() != qb.Window.String():
		field = "Window"
	case got.Limit != want.limit:
		field = "Limit"
	case got.Used != want.used:
		field = "Used"
	case got.Remaining != want.remaining:
		field = "Remaining"
	case got.Cost != want.cost:
		field = "Cost"
	case !got.Reset.Equal(want.reset):
		field = "Reset"
	case !got.ExhaustedUntil.Equal(want.exhausted):
		field = "ExhaustedUntil"
	case !got.RetryAt.IsZero() || got.StoreLoss:
		field = "RetryAt or StoreLoss"
	default:
		return nil
	}
	return r.mismatch(i, op, fmt.Sprintf("%s: %s %s", op.Kind, what, field), fmt.Sprintf(
		"%s of %s, budget %s:\nmodel: used %d of %d, remaining %d, cost %d, reset %s, marked until %s\nstore: used %d of %d, remaining %d, cost %d, reset %s, marked until %s, retry at %s, store loss %v",
		what, modelCreds[cred].Label, qb.Name,
		want.used, want.limit, want.remaining, want.cost, fmtTime(want.reset), fmtTime(want.exhausted),
		got.Used, got.Limit, got.Remaining, got.Cost, fmtTime(got.Reset), fmtTime(got.ExhaustedUntil), fmtTime(got.RetryAt), got.StoreLoss))
}

// checkStatus compares Status of credential cred with the model at now.
func (r *modelRun) checkStatus(i int, op ModelOp, cred int, now time.Time) *modelMismatch {
	us, err := r.lim.Status(r.ctx, modelCreds[cred])
	if err != nil || len(us) != len(r.budgets) {
		return r.mismatch(i, op, op.Kind+": status error", fmt.Sprintf("Status of %s: %d budgets, %v", modelCreds[cred].Label, len(us), err))
	}
	for b := range r.budgets {
		if mm := r.checkUsage(i, op, "status", cred, b, r.sim.m.usage(cred, b, now), us[b]); mm != nil {
			return mm
		}
	}
	return nil
}

// checkEntries compares the entries budget b of cred counts at now, as
// instants and costs (nonces are the store's or the limiter's).
func (r *modelRun) checkEntries(i int, op ModelOp, cred, b int, now time.Time) *modelMismatch {
	es, err := r.lim.Entries(r.ctx, modelCreds[cred], r.budgets[b].Name)
	if err != nil {
		return r.mismatch(i, op, op.Kind+": entries error", err.Error())
	}
	type ec struct {
		at   int64
		cost int64
	}
	var got, want []ec
	for _, e := range es {
		got = append(got, ec{e.At.UnixMicro(), e.Cost})
	}
	for _, e := range r.sim.m.counted(cred, b, now) {
		want = append(want, ec{e.at.UnixMicro(), e.cost})
	}
	cmp := func(x, y ec) int {
		if x.at != y.at {
			return int(x.at - y.at)
		}
		return int(x.cost - y.cost)
	}
	slices.SortFunc(got, cmp)
	slices.SortFunc(want, cmp)
	if slices.Equal(got, want) {
		return nil
	}
	show := func(s []ec) string {
		var b strings.Builder
		for _, e := range s {
			fmt.Fprintf(&b, " %s=%d", fmtTime(time.UnixMicro(e.at)), e.cost)
		}
		return b.String()
	}
	return r.mismatch(i, op, op.Kind+": entries", fmt.Sprintf("entries of %s, budget %s:\nmodel:%s\nstore:%s",
		modelCreds[cred].Label, r.budgets[b].Name, show(want), show(got)))
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}
