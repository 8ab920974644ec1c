package storetest

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

func (p *program) take(allow bool) {
	p.t.Helper()
	cred := p.in.n(len(programCreds))
	ch := p.charge()
	what := "Take"
	if allow {
		what = "Allow"
	}
	what = fmt.Sprintf("%s(cred %d, %q, %v)", what, cred, ch.Method, ch.Units)
	p.logf("%s at %v", what, p.now.Format(time.RFC3339Nano))
	before := p.usage(cred)
	var (
		r   *quota.Reservation
		err error
	)
	if allow {
		err = p.l.Allow(p.ctx, programCreds[cred], ch)
	} else {
		r, err = p.l.Take(p.ctx, programCreds[cred], ch)
	}
	after := p.usage(cred)
	p.logf("  -> %v, %v", r != nil, err)
	invalid, tooBig := p.judge(ch)
	switch {
	case invalid || tooBig:
		if err == nil {
			p.fatalf("%s admitted an invalid charge", what)
		}
		if errors.Is(err, quota.ErrExhausted) || errors.Is(err, quota.ErrStoreUnavailable) || errors.Is(err, quota.ErrNotFound) ||
			!(invalid && errors.Is(err, quota.ErrInvalid) || tooBig && errors.Is(err, quota.ErrCostExceedsLimit)) ||
			errors.Is(err, quota.ErrInvalid) && errors.Is(err, quota.ErrCostExceedsLimit) {
			p.fatalf("%s: error %v for an invalid charge (invalid %v, over a limit %v)", what, err, invalid, tooBig)
		}
		p.sameUsage(what+", refused as invalid", before, after, nil)
		return
	case cred == 3:
		if !errors.Is(err, quota.ErrInvalid) || errors.Is(err, quota.ErrExhausted) {
			p.fatalf("%s with an empty credential: %v, want ErrInvalid", what, err)
		}
		return
	case cred == 4 && before == nil:
		if !errors.Is(err, quota.ErrUnknownCredential) || errors.Is(err, quota.ErrExhausted) {
			p.fatalf("%s by an unknown label: %v, want ErrUnknownCredential", what, err)
		}
		return
	}
	if err != nil {
		var ee *quota.ExhaustedError
		if !errors.As(err, &ee) || !errors.Is(err, quota.ErrExhausted) || errors.Is(err, quota.ErrInvalid) {
			p.fatalf("%s: error %v, want nil or an *ExhaustedError", what, err)
		}
		c, ok := ch.Units[ee.Budget]
		if !ok || ee.Cost != c || ee.Limit != p.limitOf(ee.Budget) || ee.RetryAfter <= 0 || !ee.RetryAt.Equal(p.at().Add(ee.RetryAfter)) {
			p.fatalf("%s at %v: refused with %+v", what, p.now, *ee)
		}
		if ee.ExhaustedUntil.IsZero() && ee.Used+ee.Cost <= ee.Limit {
			p.fatalf("%s: refused with %+v, which could pay", what, *ee)
		}
		p.sameUsage(what+", refused", before, after, nil)
		return
	}
	p.sameUsage(what+", admitted", before, after, ch.Units)
	if allow {
		if r != nil {
			p.fatalf("%s returned a reservation", what)
		}
		return
	}
	if r == nil || len(r.Usage) != len(ch.Units) || !r.At.Equal(p.at()) || r.ID() == "" {
		p.fatalf("%s: reservation %+v", what, r)
	}
	for _, u := range r.Usage {
		c, ok := ch.Units[u.Budget]
		if !ok || u.Cost != c || u.Limit != p.limitOf(u.Budget) || u.Used < c || u.Used > u.Limit || u.Remaining != u.Limit-u.Used {
			p.fatalf("%s: reservation usage %+v", what, u)
		}
		if after != nil {
			for _, a := range after {
				if a.Budget == u.Budget && a.Used != u.Used {
					p.fatalf("%s: reservation says %s used %d, Status %d", what, u.Budget, u.Used, a.Used)
				}
			}
		}
	}
	h := &held{r: r, cred: cred, epoch: p.epoch}
	p.res = append(p.res, h)
	// give it back or settle it at once now and then: the usage must be
	// exactly what it was before the charge, or as settled
	switch p.in.n(4) {
	case 1:
		p.refund(h)
		p.sameUsage(what+", refunded at once", before, p.usage(cred), nil)
	case 2:
		p.settle(h, p.actual())
	case 3:
		p.settleOne(h)
	}
}

// pick returns a reservation the program took, one read back from its
// ID, or none.
func (p *program) pick() *held {
	i := p.in.n(len(p.res) + 2)
	switch {
	case i < len(p.res):
		return p.res[i]
	case i == len(p.res) && len(p.res) > 0:
		h := p.res[p.in.n(len(p.res))]
		r, err := quota.ParseReservationID(h.r.ID())
		if err != nil {
			p.fatalf("ParseReservationID(%q): %v", h.r.ID(), err)
		}
		return &held{r: r, cred: h.cred, epoch: h.epoch, refunded: h.refunded, of: h}
	}
	return nil
}

// costs returns what the reservation still charges per budget, as its
// Usage says; nil for one read back from its ID.
func costs(r *quota.Reservation) map[string]int64 {
	if len(r.Usage) == 0 {
		return nil
	}
	m := map[string]int64{}
	for _, u := range r.Usage {
		m[u.Budget] = u.Cost
	}
	return m
}

// live reports whether h's entries are surely still counted: taken in the
// program's epoch (no clock move or Adjust since), not refunded, with some
// cost left in one of budgets (any, when nil).
func (p *program) live(h *held, budgets map[string]int64) bool {
	if h.epoch != p.epoch || h.refunded || h.stale || len(h.r.Usage) == 0 {
		return false
	}
	for _, u := range h.r.Usage {
		if _, ok := budgets[u.Budget]; (budgets == nil || ok) && u.Cost > 0 {
			return true
		}
	}
	return false
}

func (p *program) settleOne(h *held) {
	p.t.Helper()
	var actual int64
	switch p.in.n(5) {
	case 0:
		actual = 0
	case 1:
		actual = 1
	case 2:
		actual = -1
	case 3:
		actual = math.MaxInt64
	default:
		actual = p.in.i64()
	}
	p.logf("Reservation.Settle(%d) %v", actual, h != nil)
	if h == nil {
		var r *quota.Reservation
		if err := r.Settle(p.ctx, actual); !errors.Is(err, quota.ErrInvalid) {
			p.fatalf("Settle of a nil reservation: %v, want ErrInvalid", err)
		}
		return
	}
	before := p.usage(h.cred)
	old := costs(h.r)
	err := h.r.Settle(p.ctx, actual)
	after := p.usage(h.cred)
	switch {
	case len(h.r.Usage) == 0 && h.r.ID() != "":
		// read back from its ID: not from a Limiter
		if !errors.Is(err, quota.ErrInvalid) {
			p.fatalf("Settle of a parsed reservation: %v, want ErrInvalid", err)
		}
	case len(h.r.Usage) != 1 || actual < 0:
		if !errors.Is(err, quota.ErrInvalid) {
			p.fatalf("Reservation.Settle(%d) of %d budgets: %v, want ErrInvalid", actual, len(h.r.Usage), err)
		}
	default:
		p.settled(fmt.Sprintf("Reservation.Settle(%d)", actual), h, map[string]int64{h.r.Usage[0].Budget: actual}, old, before, after, err)
		return
	}
	p.sameUsage("Settle refused", before, after, nil)
}

func (p *program) settle(h *held, actual map[string]int64) {
	p.t.Helper()
	what := fmt.Sprintf("Limiter.Settle(%v)", actual)
	p.logf("%s %v", what, h != nil)
	if h == nil {
		if err := p.l.Settle(p.ctx, nil, actual); !errors.Is(err, quota.ErrInvalid) {
			p.fatalf("%s of a nil reservation: %v, want ErrInvalid", what, err)
		}
		return
	}
	before := p.usage(h.cred)
	old := costs(h.r)
	err := p.l.Settle(p.ctx, h.r, actual)
	after := p.usage(h.cred)
	invalid := len(actual) == 0
	for name, n := range actual {
		if _, charged := old[name]; p.limitOf(name) == 0 || n < 0 || old != nil && !charged {
			invalid = true
		}
	}
	if invalid {
		if !errors.Is(err, quota.ErrInvalid) || errors.Is(err, quota.ErrNotFound) {
			p.fatalf("%s: %v, want ErrInvalid", what, err)
		}
		p.sameUsage(what+", invalid", before, after, nil)
		return
	}
	p.settled(what, h, actual, old, before, after, err)
}

// settled checks a Settle of h to actual with valid arguments: nil, or
// ErrNotFound for a reservation no longer counted; the usage lowered by
// what the reservation's costs lost.
func (p *program) settled(what string, h *held, actual, old map[string]int64, before, after []quota.Usage, err error) {
	p.t.Helper()
	if err != nil {
		if !errors.Is(err, quota.ErrNotFound) || errors.Is(err, quota.ErrInvalid) {
			p.fatalf("%s: %v, want nil or ErrNotFound", what, err)
		}
		if p.live(h, actual) {
			p.fatalf("%s of a reservation just taken: %v", what, err)
		}
		p.sameUsage(what+", not found", before, after, nil)
		return
	}
	if h.refunded {
		p.fatalf("%s of a refunded reservation succeeded", what)
	}
	if h.of != nil {
		h.of.stale = true
	}
	if old == nil {
		// read back from its ID: what it gave back is not known
		for i := range before {
			if before != nil && after != nil && after[i].Used > before[i].Used {
				p.fatalf("%s raised %s from %d to %d", what, after[i].Budget, before[i].Used, after[i].Used)
			}
		}
		return
	}
	delta := map[string]int64{}
	for _, u := range h.r.Usage {
		n, named := actual[u.Budget]
		if u.Cost < 0 || u.Cost > old[u.Budget] || !h.stale && named && u.Cost > n && u.Cost != old[u.Budget] {
			p.fatalf("%s: %s cost %d -> %d", what, u.Budget, old[u.Budget], u.Cost)
		}
		if !named && u.Cost != old[u.Budget] {
			p.fatalf("%s changed the cost of %s, not named, from %d to %d", what, u.Budget, old[u.Budget], u.Cost)
		}
		if named && p.live(h, nil) && u.Cost != min(old[u.Budget], n) {
			p.fatalf("%s: %s cost %d -> %d, want %d", what, u.Budget, old[u.Budget], u.Cost, min(old[u.Budget], n))
		}
		delta[u.Budget] = u.Cost - old[u.Budget]
	}
	p.sameUsage(what, before, after, delta)
}

func (p *program) refund(h *held) {
	p.t.Helper()
	p.logf("Refund %v", h != nil)
	if h == nil {
		if err := p.l.Refund(p.ctx, nil); !errors.Is(err, quota.ErrInvalid) {
			p.fatalf("Refund(nil): %v, want ErrInvalid", err)
		}
		return
	}
	before := p.usage(h.cred)
	err := p.l.Refund(p.ctx, h.r)
	after := p.usage(h.cred)
	if err != nil {
		if !errors.Is(err, quota.ErrNotFound) || errors.Is(err, quota.ErrInvalid) || errors.Is(err, quota.ErrPartialRefund) {
			p.fatalf("Refund: %v, want nil or ErrNotFound", err)
		}
		if p.live(h, nil) {
			p.fatalf("Refund of a reservation just taken: %v", err)
		}
		p.sameUsage("Refund, not found", before, after, nil)
		return
	}
	if h.refunded {
		p.fatalf("a second Refund succeeded")
	}
	for i := range before {
		if before != nil && after != nil && after[i].Used > before[i].Used {
			p.fatalf("Refund raised %s from %d to %d", after[i].Budget, before[i].Used, after[i].Used)
		}
	}
	if old := costs(h.r); old != nil && p.live(h, nil) {
		delta := map[string]int64{}
		for name, c := range old {
			delta[name] = -c
		}
		p.sameUsage("Refund", before, after, delta)
	}
	h.refunded = true
	for _, o := range p.res {
		if o.r.ID() == h.r.ID() {
			o.refunded = true
		}
	}
}

// move moves the clock: forward and back, by a little or a lot, or to a
// daylight saving change.
func (p *program) move() {
	var d time.Duration
	switch p.in.n(12) {
	case 0:
		d = time.Microsecond
	case 1:
		d = time.Second
	case 2:
		d = time.Hour
	case 3:
		d = 24 * time.Hour
	case 4:
		d = -time.Microsecond
	case 5:
		d = -time.Hour
	case 6:
		d = -25 * time.Hour
	case 7:
		d = time.Duration(int64(int32(p.in.u64()))) * time.Millisecond // ± 24 days
	case 8:
		d = time.Duration(p.in.i64()) // anything, to the ns
	case 9:
		// a µs before or after LA's spring forward or fall back
		at := []time.Time{
			time.Date(2026, 3, 8, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC),
			time.Date(2026, 4, 4, 15, 0, 0, 0, time.UTC), time.Date(2026, 10, 3, 15, 30, 0, 0, time.UTC), // Lord Howe
		}[p.in.n(4)]
		d = at.Add(time.Duration(p.in.n(3)-1) * time.Microsecond).Sub(p.now)
	case 10:
		d = programT0.Sub(p.now)
	default:
		d = time.Duration(p.in.u8()) * time.Minute
	}
	next := p.now.Add(d)
	if next.Before(programMin) || next.After(programMax) {
		next = programT0
	}
	if next.Truncate(time.Microsecond).Before(p.at()) {
		p.stepped = true
	}
	p.logf("clock %v -> %v", p.now.Format(time.RFC3339Nano), next.Format(time.RFC3339Nano))
	p.now = next
	p.epoch++
}

func (p *program) adjust() {
	p.t.Helper()
	cred := p.in.n(len(programCreds))
	name := p.name()
	lim := p.limitOf(name)
	var used int64
	switch p.in.n(6) {
	case 0:
		used = 0
	case 1:
		used = lim
	case 2:
		used = lim + 1
	case 3:
		used = -1
	case 4:
		used = int64(p.in.u8())
	default:
		used = p.in.i64()
	}
	p.logf("Adjust(cred %d, %q, %d)", cred, name, used)
	before := p.usage(cred)
	err := p.l.Adjust(p.ctx, programCreds[cred], name, used)
	after := p.usage(cred)
	// Adjust checks used against the limit of the credential's owner (a
	// limit per owner may differ from the budget's: LimitOf), so only once
	// it knows the credential: by an unknown label, used over the budget's
	// limit is ErrUnknownCredential, not ErrInvalid.
	switch {
	case lim == 0 || used < 0 || cred == 3:
		if !errors.Is(err, quota.ErrInvalid) {
			p.fatalf("Adjust(cred %d, %q, %d): %v, want ErrInvalid", cred, name, used, err)
		}
		p.sameUsage("Adjust refused", before, after, nil)
		return
	case cred == 4 && before == nil:
		if !errors.Is(err, quota.ErrUnknownCredential) {
			p.fatalf("Adjust by an unknown label: %v, want ErrUnknownCredential", err)
		}
		return
	case used > lim:
		if !errors.Is(err, quota.ErrInvalid) {
			p.fatalf("Adjust(cred %d, %q, %d): %v, want ErrInvalid", cred, name, used, err)
		}
		p.sameUsage("Adjust refused", before, after, nil)
		return
	}
	if err != nil {
		p.fatalf("Adjust(cred %d, %q, %d): %v", cred, name, used, err)
	}
	p.epoch++
	if after == nil {
		return
	}
	for i, u := range after {
		switch {
		case u.Budget == name && (u.Used != used || !u.ExhaustedUntil.IsZero()):
			p.fatalf("after Adjust(%q, %d): %+v", name, used, u)
		case u.Budget != name && before != nil && u.Used != before[i].Used:
			p.fatalf("Adjust(%q) moved %s from %d to %d", name, u.Budget, before[i].Used, u.Used)
		}
	}
}

func (p *program) exhaust() {
	p.t.Helper()
	cred := p.in.n(len(programCreds))
	name := p.name()
	var until time.Time
	switch p.in.n(5) {
	case 0: // clears the mark
	case 1:
		until = p.now.Add(time.Duration(int64(int32(p.in.u64()))) * time.Microsecond)
	case 2:
		until = p.now.Add(time.Duration(p.in.i64()))
	case 3:
		until = time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)
	default:
		until = p.now.Add(time.Duration(p.in.u8()) * time.Minute)
	}
	p.logf("Exhaust(cred %d, %q, %v)", cred, name, until)
	before := p.usage(cred)
	err := p.l.Exhaust(p.ctx, programCreds[cred], name, until)
	after := p.usage(cred)
	switch {
	case p.limitOf(name) == 0 || cred == 3:
		if !errors.Is(err, quota.ErrInvalid) {
			p.fatalf("Exhaust(cred %d, %q): %v, want ErrInvalid", cred, name, err)
		}
		return
	case cred == 4 && before == nil:
		if !errors.Is(err, quota.ErrUnknownCredential) {
			p.fatalf("Exhaust by an unknown label: %v, want ErrUnknownCredential", err)
		}
		return
	}
	if err != nil {
		p.fatalf("Exhaust(cred %d, %q, %v): %v", cred, name, until, err)
	}
	p.sameUsage("Exhaust", before, after, nil)
	for _, u := range after {
		if u.Budget != name {
			continue
		}
		marked := backend.ClampTime(until).Truncate(time.Microsecond)
		if marked.After(p.at()) {
			if u.Remaining != 0 || !u.ExhaustedUntil.Equal(marked) {
				p.fatalf("after Exhaust(%q, %v) at %v: %+v", name, until, p.now, u)
			}
		} else if !u.ExhaustedUntil.IsZero() {
			p.fatalf("after Exhaust(%q, %v) at %v, not after now: %+v", name, until, p.now, u)
		}
	}
}
