package storetest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// Program runs the program data encodes on a Limiter of api over st: the
// body of a fuzz target over the Limiter's public entry points (see
// quota's FuzzLimiter). api must be new to st (a store shared by the runs
// of a fuzz target is given a new api each time).
//
// data is read as a stream of bytes, zeros once it runs out: first 1 to 12
// budgets, each a limit (1, small, MaxLimit, any in range, or now and then
// an invalid one) and a window (Sliding of a usual length, of any whole
// number of µs or of any duration at all, Daily(UTC), Daily in two zones
// with daylight saving time, now and then Daily(nil)); then up to
// programOps operations, each one of: Take and Allow of a charge naming a
// subset of the budgets (and possibly unknown or invalid names, a name
// twice, costs of 0, negative, over a limit, math.MaxInt64), with one of
// five credentials (two of one owner, an empty one, one by label);
// Reservation.Settle and Limiter.Settle with any units (unknown budgets,
// negative, more than the cost) of a reservation taken (or of none, or of
// one read back from its ID); Refund; Status; Adjust; Exhaust; and moves
// of the limiter's clock (WithClock) forward and back, across daylight
// saving changes.
//
// It fails the test when an entry point panics, or returns an error of
// the wrong kind (an invalid argument must be ErrInvalid or
// ErrCostExceedsLimit, never ErrExhausted; a valid charge is admitted or
// refused with an *ExhaustedError, nothing else), or breaks an invariant:
// a refused or invalid charge changes no usage; an admitted one adds its
// cost to each budget it names and nothing to the others, and leaves
// 0 <= Used <= Limit; Refund and Settle lower usage by exactly what they
// give back, and a refund restores the usage before the charge; Adjust
// sets usage; usage is never negative, and while the clock has never
// stepped back never over a budget's limit.
func Program(t *testing.T, st quota.Store, api string, data []byte) {
	t.Helper()
	zonesOnce.Do(loadZones)
	if zonesErr != nil {
		t.Fatal(zonesErr)
	}
	p := &program{t: t, in: fuzzBytes{b: data}, ctx: context.Background()}
	p.run(st, api)
}

// programOps bounds the operations of one program, so that one run stays
// short whatever the input.
const programOps = 48

var (
	zonesOnce        sync.Once
	zonesErr         error
	laZone, howeZone *time.Location
)

func loadZones() {
	if laZone, zonesErr = time.LoadLocation("America/Los_Angeles"); zonesErr != nil {
		return
	}
	// a half-hour daylight saving shift
	howeZone, zonesErr = time.LoadLocation("Australia/Lord_Howe")
}

// fuzzBytes reads a fuzzer's input: bytes, then zeros once it runs out.
type fuzzBytes struct{ b []byte }

func (f *fuzzBytes) done() bool { return len(f.b) == 0 }

func (f *fuzzBytes) u8() byte {
	if len(f.b) == 0 {
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	return c
}

// n returns a number in [0, k).
func (f *fuzzBytes) n(k int) int { return int(f.u8()) % k }

func (f *fuzzBytes) u64() uint64 {
	var buf [8]byte
	n := copy(buf[:], f.b)
	f.b = f.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

func (f *fuzzBytes) i64() int64 { return int64(f.u64()) }

// T0 of the programs: an hour before the Los Angeles clocks spring forward
// (2026-03-08 02:00 PST).
var programT0 = time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)

// programClock bounds the instants the clock is moved to: from the epoch to
// the latest instant a store keeps (quota.MaxTimeMicro). A move out of
// them goes back to programT0.
var (
	programMin = time.Unix(0, 0)
	programMax = time.UnixMicro(backend.MaxTimeMicro)
)

type program struct {
	t   *testing.T
	in  fuzzBytes
	ctx context.Context
	l   *quota.Limiter

	budgets []quota.Budget
	now     time.Time
	stepped bool // the clock has stepped back once
	epoch   int  // bumped by each clock move and each Adjust
	res     []*held
	log     []string // what ran, for the failure message
}

// held is a reservation the program took, with what it knows of it.
type held struct {
	r        *quota.Reservation
	cred     int
	epoch    int  // the program's epoch when it was taken
	refunded bool // given back by Refund
	// stale: its entries were settled or refunded through another
	// Reservation (one read back from its ID), so its Usage's costs may
	// be more than its entries'
	stale bool
	// of, for a reservation read back from its ID, the one it was read from
	of *held
}

// the credentials a program charges: two of one owner, an empty one
// (invalid), and one given by the label of the first
var programCreds = []quota.Credential{
	{Secret: "fuzz-secret-0", Label: "k0"},
	{Secret: "fuzz-secret-1", Owner: "proj"},
	{Secret: "fuzz-secret-2", Owner: "proj"},
	{},
	{Label: "k0"},
}

// at returns the instant the limiter decides at: its clock, to the µs.
func (p *program) at() time.Time { return p.now.Truncate(time.Microsecond) }

func (p *program) fatalf(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("%s\nprogram:\n  %s", fmt.Sprintf(format, args...), strings.Join(p.log, "\n  "))
}

func (p *program) logf(format string, args ...any) {
	p.log = append(p.log, fmt.Sprintf(format, args...))
}

func (p *program) run(st quota.Store, api string) {
	n := 1 + p.in.n(12)
	valid := true
	for i := range n {
		b := quota.Budget{Name: fmt.Sprintf("b%d", i), Limit: p.limit(), Window: p.window()}
		p.budgets = append(p.budgets, b)
		p.logf("budget %s limit %d window %v", b.Name, b.Limit, b.Window)
		if b.Limit < 1 || b.Limit > quota.MaxLimit || b.Window.Location() == nil && (b.Window.Duration() < time.Microsecond || b.Window.Duration()%time.Microsecond != 0) {
			valid = false
		}
	}
	p.now = programT0
	l, err := quota.New(st, api, p.budgets, quota.WithClock(func() time.Time { return p.now }), quota.WithFingerprintKey([]byte("fuzz")))
	if !valid {
		if !errors.Is(err, quota.ErrInvalid) {
			p.fatalf("New with an invalid budget: %v, want ErrInvalid", err)
		}
		return
	}
	if err != nil {
		p.fatalf("New: %v", err)
	}
	p.l = l
	for i := 0; i < programOps && !p.in.done(); i++ {
		switch op := p.in.n(12); op {
		case 0, 1, 2:
			p.take(false)
		case 3:
			p.take(true)
		case 4:
			p.settleOne(p.pick())
		case 5:
			p.settle(p.pick(), p.actual())
		case 6:
			p.refund(p.pick())
		case 7:
			p.status(p.in.n(len(programCreds)))
		case 8, 9:
			p.move()
		case 10:
			p.adjust()
		case 11:
			p.exhaust()
		}
	}
	for c := range programCreds {
		p.status(c)
	}
	if testing.Verbose() {
		p.t.Logf("program:\n  %s", strings.Join(p.log, "\n  "))
	}
}

// ProgramSeeds are inputs of Program worth starting a fuzzer from: a
// charge refunded at once; two budgets (sliding, daily in Los Angeles)
// charged together, settled, across the spring-forward change; three
// budgets with an Adjust, an Exhaust and a refused charge. (Charges of
// many budgets are left for the fuzzer to find.)
var ProgramSeeds = [][]byte{
	// 1 budget (limit 10, 1h); Take b0:1 by k0, refunded at once; Status
	{0, 2, 2, 0, 0, 0, 0, 1, 0, 0, 1, 7, 0},
	// 2 budgets (10/1h, 1000/daily LA); Take b0:1 b1:2 by proj; Settle
	// b1 to 1; clock to spring forward; Take again; Refund it
	{1, 2, 2, 3, 9, 0, 1, 0, 0, 3, 0, 0, 4, 0, 5, 0, 1, 1, 2, 8, 9, 0, 1, 0, 1, 0, 0, 3, 0, 0, 0, 0, 6, 1},
	// 3 budgets (2/1s, 10/daily UTC, 1/1µs); Adjust b0 to 2; Exhaust b1
	// 30 minutes; Take b0:1 (refused); clock +1s; Take b0:1 b2:1; Allow
	// b1:1 (refused)
	{2, 1, 1, 2, 7, 0, 0, 10, 0, 0, 1, 11, 0, 1, 4, 30, 0, 0, 0, 0, 1, 0, 0, 8, 1, 0, 0, 0, 0, 5, 0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0},
}

// limit returns a budget's limit: mostly valid, now and then not.
func (p *program) limit() int64 {
	switch p.in.n(16) {
	case 0:
		return 1
	case 9:
		return 5
	case 10:
		return 100
	case 11:
		return 1 << 20
	case 1:
		return 2
	case 2:
		return 10
	case 3:
		return 1000
	case 4:
		return quota.MaxLimit
	case 5:
		return quota.MaxLimit - 1
	case 6:
		return 1 + int64(p.in.u64()%quota.MaxLimit) // any valid limit
	case 7:
		return 1 + int64(p.in.u8())
	case 8, 12, 13, 14:
		return 1 + int64(p.in.u64()%1e6)
	}
	// invalid ones, one time in sixteen
	return []int64{0, -1, quota.MaxLimit + 1, math.MaxInt64, math.MinInt64}[p.in.n(5)]
}

// window returns a budget's window: mostly valid, now and then not.
func (p *program) window() quota.Window {
	switch p.in.n(16) {
	case 0:
		return quota.Sliding(time.Microsecond)
	case 1:
		return quota.Sliding(time.Second)
	case 2:
		return quota.Sliding(time.Hour)
	case 3:
		return quota.Sliding(24 * time.Hour)
	case 4:
		// any whole number of µs
		return quota.Sliding(time.Duration(1+p.in.u64()%uint64(math.MaxInt64/1000)) * time.Microsecond)
	case 5:
		// up to a year and a bit, whole µs
		return quota.Sliding(time.Duration(1+p.in.u64()%(400*24*3600*1e6)) * time.Microsecond)
	case 6:
		// any duration: negative, zero and fractions of a µs are invalid
		return quota.Sliding(time.Duration(p.in.i64()))
	case 7, 8:
		return quota.Daily(time.UTC)
	case 9, 11, 12:
		return quota.Daily(laZone)
	case 10:
		return quota.Daily(howeZone)
	case 13:
		return quota.Sliding(time.Minute)
	case 14:
		return quota.Sliding(10 * time.Minute)
	}
	return quota.Daily(nil) // invalid
}

// charge returns a charge: the subset of the budgets a 16-bit mask
// names (bit i budget i), each with a cost, mostly one it can pay; now
// and then with a name of no budget, an invalid name, or a name given
// twice (the map keeps its last cost); or, one time in eight, up to 13
// names drawn at random, budgets or not, with any cost.
func (p *program) charge() quota.Charge {
	ch := quota.Charge{Units: map[string]int64{}}
	switch p.in.n(4) {
	case 1:
		ch.Method = "search.list"
	case 2:
		ch.Method = strings.Repeat("m", 300)
	case 3:
		ch.Method = "bad\x00\xff method/π"
	}
	mode := p.in.u8()
	if mode%8 == 7 {
		for range p.in.n(14) {
			name := p.name()
			ch.Units[name] = p.cost(name)
		}
		return ch
	}
	mask := uint16(p.in.u8()) | uint16(p.in.u8())<<8
	for i, b := range p.budgets {
		if mask&(1<<i) != 0 {
			ch.Units[b.Name] = p.cost(b.Name)
		}
	}
	switch mode >> 5 {
	case 5:
		ch.Units["nope"] = p.cost("nope")
	case 6:
		ch.Units["bad name/π"] = 1
	case 7:
		if len(ch.Units) > 0 {
			name := p.budgets[p.in.n(len(p.budgets))].Name
			ch.Units[name] = p.cost(name) // a second time: the last cost counts
		}
	}
	return ch
}

// name returns a budget's name, or one of no budget.
func (p *program) name() string {
	i := p.in.n(len(p.budgets) + 3)
	switch {
	case i < len(p.budgets):
		return p.budgets[i].Name
	case i == len(p.budgets):
		return "nope"
	case i == len(p.budgets)+1:
		return ""
	}
	return "bad name/π"
}

// limitOf returns the limit of budget name, or 0 when it is none.
func (p *program) limitOf(name string) int64 {
	for _, b := range p.budgets {
		if b.Name == name {
			return b.Limit
		}
	}
	return 0
}

func (p *program) cost(name string) int64 {
	lim := p.limitOf(name)
	switch p.in.n(20) {
	case 0, 1, 2, 3:
		return 1
	case 4:
		return 2
	case 5, 6:
		return lim
	case 7:
		return max(lim-1, 1)
	case 8:
		return max(lim/2, 1)
	case 9:
		return 1 + int64(p.in.u8())%max(lim, 1)
	case 10:
		return 1 + int64(p.in.u64()%uint64(max(lim, 1)))
	// the rest can be paid by no budget, or only by a large one
	case 11:
		return lim + 1
	case 12:
		return 0
	case 13:
		return -1
	case 14:
		return math.MaxInt64
	case 15:
		return math.MinInt64
	case 16:
		return quota.MaxLimit
	case 17:
		return quota.MaxLimit + 1
	case 18:
		return int64(p.in.u8())
	}
	return p.in.i64()
}

// actual returns units for Limiter.Settle.
func (p *program) actual() map[string]int64 {
	k := p.in.n(6)
	m := map[string]int64{}
	for range k {
		name := p.name()
		switch p.in.n(8) {
		case 0, 1:
			m[name] = 0
		case 2:
			m[name] = 1
		case 3:
			m[name] = -1
		case 4:
			m[name] = math.MaxInt64
		case 5:
			m[name] = math.MinInt64
		case 6:
			m[name] = int64(p.in.u8())
		default:
			m[name] = p.in.i64()
		}
	}
	return m
}

// usage returns cred's Status, or nil when it has none (an empty
// credential, a label not registered yet).
func (p *program) usage(cred int) []quota.Usage {
	p.t.Helper()
	us, err := p.l.Status(p.ctx, programCreds[cred])
	if err != nil {
		switch {
		case cred == 3 && errors.Is(err, quota.ErrInvalid):
		case cred == 4 && errors.Is(err, quota.ErrUnknownCredential):
		default:
			p.fatalf("Status(cred %d): %v", cred, err)
		}
		return nil
	}
	p.checkUsage(fmt.Sprintf("Status(cred %d)", cred), us)
	return us
}

// checkUsage checks a Status: one usage per budget, in order, in range.
func (p *program) checkUsage(what string, us []quota.Usage) {
	p.t.Helper()
	if len(us) != len(p.budgets) {
		p.fatalf("%s: %d usages for %d budgets", what, len(us), len(p.budgets))
	}
	for i, u := range us {
		b := p.budgets[i]
		if u.Budget != b.Name || u.Limit != b.Limit {
			p.fatalf("%s: usage %d is %+v, want budget %s limit %d", what, i, u, b.Name, b.Limit)
		}
		if u.Used < 0 || !p.stepped && u.Used > u.Limit {
			p.fatalf("%s: %s used %d of %d", what, u.Budget, u.Used, u.Limit)
		}
		if u.Remaining < 0 || u.Remaining > u.Limit || u.Remaining > max(u.Limit-u.Used, 0) {
			p.fatalf("%s: %s used %d of %d, remaining %d", what, u.Budget, u.Used, u.Limit, u.Remaining)
		}
	}
}

func (p *program) status(cred int) { p.logf("status cred %d", cred); p.usage(cred) }

// sameUsage checks that nothing changed but the budgets in delta, which
// moved by as much.
func (p *program) sameUsage(what string, before, after []quota.Usage, delta map[string]int64) {
	p.t.Helper()
	if before == nil || after == nil {
		return
	}
	for i := range before {
		name := before[i].Budget
		if want := before[i].Used + delta[name]; after[i].Used != want {
			p.fatalf("%s: %s used %d, want %d (%d before, %+d)", what, name, after[i].Used, want, before[i].Used, delta[name])
		}
	}
}

// judge classifies a charge: whether some name is no budget or some cost
// is <= 0 (ErrInvalid), whether some cost is over its budget's limit
// (ErrCostExceedsLimit).
func (p *program) judge(ch quota.Charge) (invalid, tooBig bool) {
	invalid = len(ch.Units) == 0
	for name, c := range ch.Units {
		lim := p.limitOf(name)
		switch {
		case lim == 0 || c <= 0:
			invalid = true
		case c > lim:
			tooBig = true
		}
	}
	return invalid, tooBig
}

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
	switch {
	case lim == 0 || used < 0 || used > lim || cred == 3:
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
