package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// The operations of a MatchesModel run, as data.

// Kinds of ModelOp.
const (
	OpTake    = "take"    // Limiter.Take of Units for Cred; its reservation is named ID
	OpAllow   = "allow"   // Limiter.Allow of Units for Cred
	OpRefund  = "refund"  // Limiter.Refund of the reservation of take Res (ByID: as ParseReservationID reads its ID)
	OpSettle  = "settle"  // settle take Res's reservation to Units (Reservation.Settle when it charged one budget)
	OpExhaust = "exhaust" // Limiter.Exhaust of Budget for Cred until the clock's now+D (Clear: until zero)
	OpAdjust  = "adjust"  // Limiter.Adjust of Budget for Cred to N
	OpForward = "forward" // the clock moves D forward
	OpBack    = "back"    // the clock steps D back, unless the rule of model.backFloor forbids it (then nothing)
	OpBurst   = "burst"   // N Limiter.Takes of Units for Cred at once, at one instant; their reservations are named ID*1000+j
)

// ModelOp is one step of a MatchesModel run. ModelCase.String prints a run
// as a Go literal that ReplayModel takes back. Refunds and settles name the
// take they refer to by its ID: one whose take was dropped (or refused) is
// skipped, so any subsequence of a run replays.
type ModelOp struct {
	Kind   string
	Cred   int              // take, allow, exhaust, adjust: credential 0 or 1
	ID     int              // take: names its reservation
	Res    int              // refund, settle: the ID of the take
	Units  map[string]int64 // take, allow: the charge; settle: the actual units per budget
	Budget string           // exhaust, adjust
	N      int64            // adjust: the usage set; burst: how many Takes
	D      time.Duration    // forward, back: the step; exhaust: until = now+D
	Clear  bool             // exhaust: until is zero
	ByID   bool             // refund: of the reservation known by its ID alone (every budget of the API)
}

// ModelCase is a run of MatchesModel: the clock's start and the operations.
type ModelCase struct {
	Start time.Time
	Ops   []ModelOp
}

// modelSpec is the run's budgets, in definition order: sliding windows of
// several lengths (one not a whole second), daily ones in four zones, two
// with DST, and monthly ones in two zones with DST, one whose DST jump
// skipped midnight of a 1st (America/Asuncion, 2023-10-01).
var modelSpec = []struct {
	name  string
	limit int64
	slide time.Duration
	zone  string
	month bool // Monthly(zone), not Daily(zone)
}{
	{"s1m", 10, time.Minute, "", false},
	{"s7m", 40, 7*time.Minute + 3*time.Microsecond, "", false},
	{"s1h", 100, time.Hour, "", false},
	{"s6h", 400, 6 * time.Hour, "", false},
	{"la", 1000, 0, "America/Los_Angeles", false},
	{"london", 300, 0, "Europe/London", false},
	{"tokyo", 150, 0, "Asia/Tokyo", false},
	{"utc", 60, 0, "UTC", false},
	{"mparis", 3000, 0, "Europe/Paris", true},
	{"masu", 800, 0, "America/Asuncion", true},
}

// modelCreds are the run's credentials (fast fingerprints: see modelRun).
var modelCreds = []quota.Credential{
	{Secret: "model-secret-0", Label: "m0"},
	{Secret: "model-secret-1", Label: "m1"},
}

// modelBudgets returns the budgets twice, built apart: as the model knows
// them and as the Limiter does.
func modelBudgets() ([]modelBudget, []quota.Budget, error) {
	var mb []modelBudget
	var qb []quota.Budget
	for _, s := range modelSpec {
		b := modelBudget{name: s.name, limit: s.limit, slide: s.slide, month: s.month}
		w := quota.Sliding(s.slide)
		if s.zone != "" {
			loc, err := time.LoadLocation(s.zone)
			if err != nil {
				return nil, nil, err
			}
			b.loc, w = loc, quota.Daily(loc)
			if s.month {
				w = quota.Monthly(loc)
			}
		}
		mb = append(mb, b)
		qb = append(qb, quota.Budget{Name: s.name, Limit: s.limit, Window: w})
	}
	return mb, qb, nil
}

// modelStarts are the instants runs start near (seed picks one): DST
// changes in Los Angeles and London, Tokyo's and UTC's midnights, the ends
// of months in Paris (one with a DST change) and Asuncion (where October
// 2023 began at 01:00, DST skipping midnight).
var modelStarts = []time.Time{
	T0,
	time.Date(2026, 3, 8, 7, 30, 0, 0, time.UTC),    // LA: 23:30 PST, the eve of spring forward (10:00 UTC)
	time.Date(2026, 11, 1, 6, 45, 0, 0, time.UTC),   // LA: 23:45 PDT, the eve of fall back (09:00 UTC)
	time.Date(2026, 3, 28, 23, 40, 0, 0, time.UTC),  // London: 23:40 GMT, BST begins at 01:00 UTC
	time.Date(2026, 10, 24, 22, 50, 0, 0, time.UTC), // London: 23:50 BST, GMT returns at 01:00 UTC
	time.Date(2026, 6, 30, 14, 55, 0, 0, time.UTC),  // Tokyo: 23:55 JST
	time.Date(2026, 12, 31, 23, 50, 0, 0, time.UTC), // UTC: the year's end
	time.Date(2026, 3, 31, 21, 50, 0, 0, time.UTC),  // Paris: 23:50 CEST, March (a DST month) ends at 22:00 UTC
	time.Date(2026, 10, 31, 22, 50, 0, 0, time.UTC), // Paris: 23:50 CET, October (25h longer day) ends at 23:00 UTC
	time.Date(2023, 10, 1, 3, 40, 0, 0, time.UTC),   // Asuncion: 23:40 on Sep 30; October begins at 01:00 -03 (04:00 UTC)
}

// String returns the op as a Go composite literal.
func (op ModelOp) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{Kind: %q", op.Kind)
	switch op.Kind {
	case OpTake, OpAllow, OpExhaust, OpAdjust, OpBurst:
		fmt.Fprintf(&b, ", Cred: %d", op.Cred)
	}
	if op.ID != 0 {
		fmt.Fprintf(&b, ", ID: %d", op.ID)
	}
	if op.Res != 0 {
		fmt.Fprintf(&b, ", Res: %d", op.Res)
	}
	if op.Units != nil {
		b.WriteString(", Units: map[string]int64{")
		i := 0
		for _, s := range modelSpec { // in definition order
			if n, ok := op.Units[s.name]; ok {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%q: %d", s.name, n)
				i++
			}
		}
		for _, name := range slices.Sorted(maps.Keys(op.Units)) { // names of no budget
			if specIndex(name) < 0 {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%q: %d", name, op.Units[name])
				i++
			}
		}
		b.WriteString("}")
	}
	if op.Budget != "" {
		fmt.Fprintf(&b, ", Budget: %q", op.Budget)
	}
	if op.Kind == OpAdjust || op.Kind == OpBurst || op.N != 0 {
		fmt.Fprintf(&b, ", N: %d", op.N)
	}
	if op.D != 0 {
		fmt.Fprintf(&b, ", D: %s", durationLiteral(op.D))
	}
	if op.Clear {
		b.WriteString(", Clear: true")
	}
	if op.ByID {
		b.WriteString(", ByID: true")
	}
	b.WriteString("}")
	return b.String()
}

// specIndex returns the index of the budget named name in modelSpec, or -1.
func specIndex(name string) int {
	for i, s := range modelSpec {
		if s.name == name {
			return i
		}
	}
	return -1
}

// durationLiteral writes d as Go source: 90*time.Second + 3*time.Microsecond.
func durationLiteral(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	neg := d < 0
	if neg {
		d = -d
	}
	var parts []string
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "time.Hour"}, {time.Minute, "time.Minute"}, {time.Second, "time.Second"}, {time.Microsecond, "time.Microsecond"}, {1, "time.Nanosecond"}} {
		if n := d / u.d; n > 0 {
			parts = append(parts, fmt.Sprintf("%d*%s", n, u.name))
			d -= n * u.d
		}
	}
	s := strings.Join(parts, " + ")
	if neg {
		return "-(" + s + ")"
	}
	return s
}

// String returns the case as a Go literal, for ReplayModel.
func (c ModelCase) String() string {
	var b strings.Builder
	u := c.Start.UTC()
	fmt.Fprintf(&b, "storetest.ModelCase{\n\tStart: time.Date(%d, %d, %d, %d, %d, %d, %d, time.UTC),\n\tOps: []storetest.ModelOp{\n",
		u.Year(), u.Month(), u.Day(), u.Hour(), u.Minute(), u.Second(), u.Nanosecond())
	for _, op := range c.Ops {
		b.WriteString("\t\t" + op.String() + ",\n")
	}
	b.WriteString("\t},\n}")
	return b.String()
}

// modelSim applies operations to the model, on the run's clock: what the
// generator steps along and what a run compares the store's answers with.
type modelSim struct {
	m       *model
	budgets []modelBudget
	index   map[string]int
	now     time.Time   // the clock, to the ns (decisions truncate it to the µs)
	resCred map[int]int // reservation -> its credential
	resIDs  []int       // reservations admitted, in order
	retry   time.Time   // the last refusal's RetryAt
	// margin, when > 0, keeps the clock from standing within margin
	// before an instant at which something the model holds changes (see
	// ServerClock)
	margin time.Duration
}

func newModelSim(budgets []modelBudget, start time.Time) *modelSim {
	s := &modelSim{m: newModel(budgets, len(modelCreds)), budgets: budgets, index: map[string]int{}, now: start, resCred: map[int]int{}}
	for i, b := range budgets {
		s.index[b.name] = i
	}
	return s
}

// decided returns a decision's instant: the clock to the µs.
func (s *modelSim) decided() time.Time { return s.now.Truncate(time.Microsecond) }

// modelOutcome is what the model expects of one operation.
type modelOutcome struct {
	skip   bool  // the op does nothing in this run (a refund of a take refused or dropped; a step back the rule forbids)
	err    error // nil, quota.ErrInvalid, ErrCostExceedsLimit, ErrExhausted, ErrNotFound
	cred   int   // whose usage the op changed; -1: every credential's may (the clock moved)
	now    time.Time
	debits []modelDebit
	usage  []modelUsage // take, allow: one per debit, in definition order
	worst  int          // refused: the debit that frees up last
	// burst: the usage of each admission, in order; err, usage and worst
	// are then those of the refusals that follow (all alike)
	admitted [][]modelUsage
}

// debitsOf returns the charge's debits in definition order, or the error
// the Limiter gives before asking the store (checked in that order).
func (s *modelSim) debitsOf(units map[string]int64) ([]modelDebit, error) {
	var ds []modelDebit
	for i, b := range s.budgets {
		n, ok := units[b.name]
		if !ok {
			continue
		}
		if n <= 0 {
			return nil, quota.ErrInvalid
		}
		if n > b.limit {
			return nil, quota.ErrCostExceedsLimit
		}
		ds = append(ds, modelDebit{i, n})
	}
	if len(ds) != len(units) || len(ds) == 0 {
		return nil, quota.ErrInvalid
	}
	return ds, nil
}

// burstIDs is how many reservations of one burst its ID names: ID*burstIDs+j.
const burstIDs = 1000

// worstOf returns the refusing debit that frees up last (the first of
// those on a tie), as the ExhaustedError names it.
func worstOf(us []modelUsage) int {
	worst := -1
	for i, u := range us {
		if !u.retry.IsZero() && (worst < 0 || u.retry.After(us[worst].retry)) {
			worst = i
		}
	}
	return worst
}

// apply applies op to the model and returns what it expects.
func (s *modelSim) apply(op ModelOp) modelOutcome {
	out := modelOutcome{cred: op.Cred, now: s.decided()}
	switch op.Kind {
	case OpTake, OpAllow:
		ds, err := s.debitsOf(op.Units)
		if err != nil {
			out.err = err
			break
		}
		id := -1
		if op.Kind == OpTake {
			id = op.ID
		}
		ok, us := s.m.take(op.Cred, ds, out.now, id)
		out.debits, out.usage = ds, us
		if !ok {
			out.err, out.worst = quota.ErrExhausted, worstOf(us)
			s.retry = us[out.worst].retry
		} else if id >= 0 {
			s.resCred[id] = op.Cred
			s.resIDs = append(s.resIDs, id)
		}
	case OpBurst:
		// Identical charges at one instant: in whatever order the store
		// decides them, the first admissions take what is left and every
		// later one is refused alike (usage only grows).
		ds, err := s.debitsOf(op.Units)
		if err != nil {
			out.err = err
			break
		}
		out.debits = ds
		for j := range int(op.N) {
			id := op.ID*burstIDs + j
			ok, us := s.m.take(op.Cred, ds, out.now, id)
			if !ok {
				out.err, out.usage, out.worst = quota.ErrExhausted, us, worstOf(us)
				s.retry = us[out.worst].retry
				break
			}
			out.admitted = append(out.admitted, us)
			s.resCred[id] = op.Cred
			s.resIDs = append(s.resIDs, id)
		}
	case OpRefund, OpSettle:
		cred, ok := s.resCred[op.Res]
		if !ok {
			out.skip = true
			break
		}
		out.cred = cred
		actual := map[int]int64{}
		if op.Kind == OpRefund {
			for _, c := range s.m.res[op.Res] {
				actual[c.b] = 0
			}
		} else {
			for name, n := range op.Units {
				actual[s.index[name]] = n
			}
		}
		if !s.m.settle(op.Res, actual, out.now) {
			out.err = quota.ErrNotFound
		}
	case OpExhaust:
		var until time.Time
		if !op.Clear {
			until = s.now.Add(op.D)
		}
		s.m.exhaust(op.Cred, s.index[op.Budget], until, out.now)
	case OpAdjust:
		b := s.index[op.Budget]
		if op.N < 0 || op.N > s.budgets[b].limit {
			out.err = quota.ErrInvalid
			break
		}
		s.m.adjust(op.Cred, b, op.N, out.now)
	case OpForward:
		s.now = s.now.Add(op.D)
		out.cred, out.now = -1, s.decided()
	case OpBack:
		next := s.now.Add(-op.D)
		if op.D <= 0 || next.Before(s.m.backFloor()) {
			out.skip = true
			break
		}
		s.now = next
		out.cred, out.now = -1, s.decided()
	default:
		panic("storetest: unknown ModelOp kind " + op.Kind)
	}
	s.m.at(out.now)
	return out
}

// errKind names the class of a Limiter error, for messages.
func errKind(err error) string {
	var ee *quota.ExhaustedError
	switch {
	case err == nil:
		return "nil"
	case errors.As(err, &ee):
		return "exhausted"
	case errors.Is(err, quota.ErrCostExceedsLimit):
		return "cost-exceeds-limit"
	case errors.Is(err, quota.ErrNotFound):
		return "not-found"
	case errors.Is(err, quota.ErrInvalid):
		return "invalid"
	}
	return "other"
}
