package backend

import (
	"context"
	"fmt"
	"time"
)

// UnmeteredMethod is the Breakdown method under which a store records the
// units a true-up added (or, lowering, removed): what the upstream counted
// that no metered call of this store had charged.
const UnmeteredMethod = "(unmetered)"

// TrueUpper is implemented by a Store that can bring a budget's count in
// line with what the upstream reports (quota.Report). Every store in this
// module implements it.
type TrueUpper interface {
	// TrueUp atomically compares the budget's count for the owner at now
	// with req.Used. When Used is greater, it records one entry of the
	// difference that counts until req.Until (see TrueUpRequest) and adds
	// it to Breakdown under UnmeteredMethod. It never refuses: the units
	// were already spent upstream. With req.Lower (opt-in) it may also lower
	// the count (see TrueUpRequest.Lower). A budget marked exhausted keeps
	// its mark.
	TrueUp(ctx context.Context, req *TrueUpRequest) (*TrueUpResult, error)
}

// TrueUpRequest brings one budget's count up to the upstream's.
type TrueUpRequest struct {
	API    string
	Owner  string // as in TakeRequest
	Budget Budget
	// Used is what the upstream counts spent in its window at the report
	// (>= 0).
	Used int64
	// Until is the upstream's next reset: the entry added counts until
	// then, as far as the budget's window allows. For a sliding window of d
	// the entry is stamped at Until-d, clamped to [now-d+1µs, now] (so it
	// counts until Until when now < Until <= now+d, else until now+d); for a
	// daily or monthly window it is stamped at now and counts until the
	// window's next reset. A zero Until, or one at or before now, adds
	// nothing: the upstream has reset since it reported.
	Until time.Time
	Nonce string // unique per true-up; the entry's nonce
	Now   time.Time
	// Lower (opt-in) also lowers the count when the upstream counts less:
	// when Used is below the units of the counted entries stamped before
	// Since that are not held, those entries are replaced by one entry of
	// Used (stamped as above; none when Used is 0), so the calls admitted
	// since Since, which the report may not have seen, stay counted. Held
	// entries (open leases' blocks) are always kept and never lower the
	// count. A zero Until, or one at or before now, lowers nothing either.
	Lower bool
	Since time.Time
	// Add (a call's cost above what was charged for it: Limiter.ChargeExcess)
	// adds Used units as they are, whatever the count: one entry stamped at
	// now, counted as an admission at now would be, recorded in Breakdown
	// under Method and Job rather than UnmeteredMethod. Until, Lower and
	// Since are ignored; Used 0 adds nothing.
	Add         bool
	Method, Job string
}

// TrueUpResult says what a TrueUp did.
type TrueUpResult struct {
	At      time.Time // the store's now
	Counted int64     // the budget's count before the true-up
	// Added is the units added (> 0), removed (< 0, only with Lower), or 0.
	Added int64
	Usage Usage // the budget's standing after
}

// CheckTrueUp reports whether req is a request every store can carry out:
// an owner, a valid budget, Used from 0 to MaxLimit and a nonce. The error
// wraps ErrInvalid and names what is wrong.
func CheckTrueUp(req *TrueUpRequest) error {
	switch {
	case req == nil:
		return invalidf("true-up: nil request")
	case req.Owner == "":
		return invalidf("true-up: empty owner (credential)")
	}
	if err := req.Budget.Validate(); err != nil {
		return fmt.Errorf("true-up: %w", err)
	}
	switch {
	case req.Used < 0:
		return invalidf("true-up: used %d for budget %q: must be >= 0", req.Used, req.Budget.Name)
	case req.Used > MaxLimit:
		return invalidf("true-up: used %d for budget %q: must be at most %d", req.Used, req.Budget.Name, int64(MaxLimit))
	case req.Nonce == "":
		return invalidf("true-up: empty nonce for budget %q", req.Budget.Name)
	case req.Add && req.Lower:
		return invalidf("true-up: add and lower for budget %q: an added excess never lowers", req.Budget.Name)
	case !req.Add && (req.Method != "" || req.Job != ""):
		return invalidf("true-up: method or job for budget %q: only an add is recorded under its call's method", req.Budget.Name)
	}
	return nil
}

// TrueUpAt returns the instant a store stamps a true-up's entry at, for a
// budget of window w, at now, for an upstream that resets at until (see
// TrueUpRequest.Until), and false when the true-up records nothing (until
// zero, or at or before now).
// Stores call TrueUpStamp, which also covers an add.
func TrueUpAt(w Window, now, until time.Time) (time.Time, bool) {
	n := now.UnixMicro()
	if until.IsZero() {
		return time.Time{}, false
	}
	u := ClampTime(until).UnixMicro()
	if u <= n {
		return time.Time{}, false
	}
	if w.kind != kindSliding {
		return time.UnixMicro(n), true
	}
	d := w.d.Microseconds()
	return time.UnixMicro(min(max(u-d, n-d+1), n)), true
}

// TrueUpStamp is TrueUpAt for req: an add (TrueUpRequest.Add) is stamped
// at now, and records nothing only when it adds no units.
func TrueUpStamp(req *TrueUpRequest, now time.Time) (time.Time, bool) {
	if req.Add {
		return time.UnixMicro(now.UnixMicro()), req.Used > 0
	}
	return TrueUpAt(req.Budget.Window, now, req.Until)
}
