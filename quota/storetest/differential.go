package storetest

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// EnvModelSeeds and EnvModelSteps size the MatchesModel runs of ModelSeeds.
const (
	EnvModelSeeds = "QUOTA_MODEL_SEEDS"
	EnvModelSteps = "QUOTA_MODEL_STEPS"
)

// ModelSeeds returns the seeds of the MatchesModel runs a test makes and
// the steps of each: seeds 1 to seeds of steps operations, unless the
// environment says otherwise: $QUOTA_MODEL_SEEDS is a count N (seeds 1 to
// N), a range A-B, or a list A,B,C; $QUOTA_MODEL_STEPS a count. A soak:
//
//	QUOTA_MODEL_SEEDS=1000-1999 QUOTA_MODEL_STEPS=2000 go test -run MatchesModel ./quota/...
func ModelSeeds(t testing.TB, seeds, steps int) ([]uint64, int) {
	t.Helper()
	if v := os.Getenv(EnvModelSteps); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("$%s=%q: want a count of steps", EnvModelSteps, v)
		}
		steps = n
	}
	v := os.Getenv(EnvModelSeeds)
	if v == "" {
		v = strconv.Itoa(seeds)
	}
	bad := func() { t.Fatalf("$%s=%q: want a count N, a range A-B or a list A,B,C", EnvModelSeeds, v) }
	var out []uint64
	switch lo, hi, isRange := strings.Cut(v, "-"); {
	case isRange:
		a, err1 := strconv.ParseUint(lo, 10, 64)
		b, err2 := strconv.ParseUint(hi, 10, 64)
		if err1 != nil || err2 != nil || a > b {
			bad()
		}
		for s := a; s <= b; s++ {
			out = append(out, s)
		}
	case strings.Contains(v, ","):
		for _, f := range strings.Split(v, ",") {
			s, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				bad()
			}
			out = append(out, s)
		}
	default:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			bad()
		}
		for s := uint64(1); s <= n; s++ {
			out = append(out, s)
		}
	}
	return out, steps
}

// MatchesModel drives a store, through the public Limiter API on a fake
// clock, with steps random operations drawn from seed, and requires the
// answers of a reference model of the limiter's semantics (model.go), one
// that shares no code with any store: the outcome of every Take and Allow
// (admitted, the *quota.ExhaustedError with its budget, usage, RetryAt and
// RetryAfter, ErrCostExceedsLimit, ErrInvalid) and the reservation's
// usage; whether each Refund and Settle finds its reservation; and after
// every step the Status of the credential it touched (of both, when the
// clock moved): used, limit, remaining, reset and exhaustion mark of eight
// budgets (sliding windows of 1m, 7m+3µs, 1h and 6h; daily in
// America/Los_Angeles, Europe/London, Asia/Tokyo and UTC), and every
// tenth step one budget's entries.
//
// The operations: charges naming 1 to 8 budgets, of 1 unit, a random
// amount, exactly what is left, one more, the whole limit and more;
// refunds (of the Reservation, and by its ID alone); settles below, at and
// above the cost; exhausts until the future, the past or cleared; adjusts
// to 0, a random usage, the limit and past it; the clock moving forward by
// seconds, minutes or hours, or to a local midnight, a DST change, an
// expiry, a mark's end or a refusal's RetryAt (and a µs either side), and
// stepping back by seconds to minutes as far as model.backFloor allows
// (after a step back a store may rightly have tidied away what expired in
// between, or not: the clock never steps back over such an instant). Runs
// start near DST changes of Los Angeles and London, Tokyo's midnight and
// the year's end, by seed. For a real Redis, pass ServerClock.
//
// On a mismatch it shrinks the run (delta debugging: chunks and single
// operations dropped, each candidate replayed on a fresh store from
// newStore) to a short sequence that still fails the same way, and fails
// the test printing it as a Go literal for ReplayModel, with the seed.
func MatchesModel(t *testing.T, newStore func(t *testing.T) quota.Store, seed uint64, steps int, opts ...ModelOption) {
	t.Helper()
	MatchesModelMoving(t, still(newStore), seed, steps, opts...)
}

// MatchesModelMoving is MatchesModel for a store with a clock of its own
// that expires keys (miniredis): newStore returns the store and a function
// called with the run's now at its start and whenever it moves, to move the
// server's clock along.
func MatchesModelMoving(t *testing.T, newStore func(t *testing.T) (quota.Store, func(now time.Time)), seed uint64, steps int, opts ...ModelOption) {
	t.Helper()
	var cfg modelConfig
	for _, o := range opts {
		o(&cfg)
	}
	mb, _, err := modelBudgets()
	if err != nil {
		t.Fatal(err)
	}
	what := fmt.Sprintf("seed %d, %d steps", seed, steps)
	if cfg.margin > 0 {
		what += fmt.Sprintf(", server clock (margin %v)", cfg.margin)
	}
	checkModel(t, newStore, genModelCase(mb, seed, steps, cfg.margin), what)
}

// A ModelOption changes how MatchesModel draws its runs.
type ModelOption func(*modelConfig)

type modelConfig struct {
	margin time.Duration
}

// ServerClock is for a store whose keys expire on a clock of its own that
// the run cannot move: a real Redis server. Such a store computes key
// lifetimes from the run's clock (a request's Now) and the server counts
// them down on its own, which runs on while the run's clock stands still:
// a key that must live until an entry expires, 1µs after the run's now,
// lives 1ms of the server's time, and the next operation made at the same
// now finds it gone (the store then rightly reports lost state). So the
// run's clock never stands within margin before an instant at which
// something the model holds changes (a local midnight, an expiry, a mark's
// end): it moves to that instant instead, and steps back only to instants
// clear of one. Every lifetime the store computes is then at least margin,
// and the run's clock passes it well before the server's does (a run moves
// its clock by minutes every few operations). The boundaries themselves
// stay in the run; only the last moments before them go.
func ServerClock(margin time.Duration) ModelOption {
	return func(c *modelConfig) { c.margin = margin }
}

// ReplayModel runs c, a sequence MatchesModel printed, on a fresh store
// from newStore, and fails as MatchesModel does (shrinking further).
func ReplayModel(t *testing.T, newStore func(t *testing.T) quota.Store, c ModelCase) {
	t.Helper()
	checkModel(t, still(newStore), c, "replay")
}

// ReplayModelMoving is ReplayModel for MatchesModelMoving's stores.
func ReplayModelMoving(t *testing.T, newStore func(t *testing.T) (quota.Store, func(now time.Time)), c ModelCase) {
	t.Helper()
	checkModel(t, newStore, c, "replay")
}

func still(newStore func(t *testing.T) quota.Store) func(t *testing.T) (quota.Store, func(time.Time)) {
	return func(t *testing.T) (quota.Store, func(time.Time)) { return newStore(t), nil }
}

// maxShrinkRuns bounds the runs shrinking makes.
const maxShrinkRuns = 1500

func checkModel(t *testing.T, newStore func(t *testing.T) (quota.Store, func(time.Time)), c ModelCase, what string) {
	t.Helper()
	mm, stats := runModelCase(t, newStore, c)
	if mm == nil {
		t.Logf("%s: matches the model: %s", what, stats)
		if len(c.Ops) >= 200 && (stats.admitted < len(c.Ops)/20 || stats.refused < len(c.Ops)/20) {
			t.Errorf("%s: %s: too few admissions or refusals to mean much", what, stats)
		}
		return
	}
	t.Logf("%s: step %d of %d differs (%s); shrinking", what, mm.step+1, len(c.Ops), mm.sig)
	runs := 0
	fails := func(k ModelCase) bool {
		runs++
		got, _ := runModelCase(t, newStore, k)
		return got != nil && got.sig == mm.sig
	}
	small := shrinkModelCase(ModelCase{Start: c.Start, Ops: c.Ops[:mm.step+1]}, fails, maxShrinkRuns)
	final, _ := runModelCase(t, newStore, small)
	if final == nil || final.sig != mm.sig {
		t.Fatalf("%s: step %d of %d differs from the model: %s\n%s\n(the shrunk run did not fail again: flaky?)\nthe run:\n%s",
			what, mm.step+1, len(c.Ops), mm.sig, mm.detail, annotate(c))
	}
	t.Fatalf("%s: step %d of %d differs from the model: %s\n\nshrunk (%d runs) to %d ops; step %d fails:\n%s\n\nreplay with storetest.ReplayModel(t, newStore, c), c :=\n%s",
		what, mm.step+1, len(c.Ops), mm.sig, runs, len(small.Ops), final.step+1, final.detail, annotate(small))
}

// annotate returns c as ModelCase.String does, each op followed by a
// comment: the clock, and what the model expects.
func annotate(c ModelCase) string {
	mb, _, err := modelBudgets()
	if err != nil {
		return c.String()
	}
	s := newModelSim(mb, c.Start)
	lines := strings.Split(c.String(), "\n")
	var b strings.Builder
	k := 0
	for _, line := range lines {
		b.WriteString(line)
		if strings.HasPrefix(line, "\t\t{") && k < len(c.Ops) {
			op := c.Ops[k]
			k++
			out := s.apply(op)
			fmt.Fprintf(&b, " // %s: ", fmtTime(s.decided()))
			switch {
			case out.skip:
				b.WriteString("skipped")
			case out.err == quota.ErrExhausted:
				d, u := out.debits[out.worst], out.usage[out.worst]
				fmt.Fprintf(&b, "refused by %s (used %d, retry at %s)", mb[d.b].name, u.used, fmtTime(u.retry))
			case out.err != nil:
				b.WriteString(errKind(out.err))
			case op.Kind == OpTake || op.Kind == OpAllow:
				b.WriteString("admitted")
			default:
				b.WriteString("ok")
			}
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// shrinkModelCase returns a shorter case that still fails (delta
// debugging, Zeller's ddmin: drop one of n chunks, n growing from 2 to one
// op each), then drops single operations until none can go, within runs
// runs of fails.
func shrinkModelCase(c ModelCase, fails func(ModelCase) bool, runs int) ModelCase {
	ops := c.Ops
	try := func(cand []ModelOp) bool {
		if runs <= 0 {
			return false
		}
		runs--
		return fails(ModelCase{Start: c.Start, Ops: cand})
	}
	without := func(from, to int) []ModelOp {
		return append(slices.Clone(ops[:from]), ops[to:]...)
	}
	n := 2
	for len(ops) >= 2 && runs > 0 {
		size := (len(ops) + n - 1) / n
		reduced := false
		for from := 0; from < len(ops); from += size {
			if cand := without(from, min(from+size, len(ops))); try(cand) {
				ops, reduced = cand, true
				n = max(n-1, 2)
				break
			}
		}
		if !reduced {
			if n >= len(ops) {
				break
			}
			n = min(2*n, len(ops))
		}
	}
	for changed := true; changed && runs > 0; {
		changed = false
		for i := len(ops) - 1; i >= 0; i-- {
			if cand := without(i, i+1); try(cand) {
				ops, changed = cand, true
			}
		}
	}
	return ModelCase{Start: c.Start, Ops: ops}
}
