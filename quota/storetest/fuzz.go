package storetest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
