package quota

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

var (
	// ErrExhausted is matched by every *ExhaustedError: the budget cannot pay
	// for the charge now. It is a normal outcome, not a failure: stop, and
	// try again after the error's RetryAfter.
	ErrExhausted = errors.New("quota: budget exhausted")

	// ErrCostExceedsLimit means a charge costs more than a budget's whole
	// limit, so it can never succeed. Fail loudly; never retry it.
	ErrCostExceedsLimit = backend.ErrCostExceedsLimit

	// ErrStoreUnavailable wraps the cause when the store could not be
	// reached or did not answer in time. Unless the limiter fails open, the
	// charge was refused.
	ErrStoreUnavailable = backend.ErrStoreUnavailable

	// ErrInvalid wraps every invalid argument: a cost <= 0, an empty
	// credential, an unknown budget, a bad limit, window or name. The message
	// names which.
	ErrInvalid = backend.ErrInvalid

	// ErrUnknownCredential is returned for a Credential given by label alone
	// when the store knows no credential with that label.
	ErrUnknownCredential = backend.ErrUnknownCredential

	// ErrForeignHost is wrapped by a Pricer's error for a request to a host
	// it does not price (a costs.Table declaring hosts, for a request to
	// another one): the request is no call of the Pricer's API and spends
	// none of its budgets. A Transport sends such a request unmetered when
	// it carries no credential it meters, and refuses it otherwise (see
	// Transport).
	ErrForeignHost = errors.New("quota: host not priced")

	// ErrNotFound is returned when a reservation, state value or other record
	// does not exist (for a reservation: never made, already refunded, or
	// already out of its window).
	ErrNotFound = backend.ErrNotFound

	// ErrPartialRefund is matched by every *PartialRefundError: a refund
	// gave back only part of a reservation, or none of it, because a
	// budget it charged is not defined for the limiter (`quotactl budget
	// delete` removed it). The units of that budget stay recorded.
	ErrPartialRefund = errors.New("quota: partial refund")
)

// PartialRefundError reports a refund that gave back only some budgets: those
// NotRefunded names are not defined for the limiter's API, so their units
// stay recorded. Define them again and refund again to give back the rest.
// errors.Is(err, ErrPartialRefund) matches it.
type PartialRefundError struct {
	API         string           // the limiter's API, e.g. "youtube"
	Reservation string           // the reservation's ID
	Refunded    map[string]int64 // units given back, per budget; empty when none
	NotRefunded []string         // the budgets charged and not given back, sorted
}

// Error names the reservation and the budgets not refunded, and what was.
func (e *PartialRefundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "quota: refund of %s incomplete: ", e.Reservation)
	for i, name := range e.NotRefunded {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.API + "/" + name)
	}
	if len(e.NotRefunded) == 1 {
		b.WriteString(" not refunded: no such budget is defined (deleted?), and its units stay recorded: define it again (quotactl budget set) and refund again")
	} else {
		b.WriteString(" not refunded: no such budgets are defined (deleted?), and their units stay recorded: define them again (quotactl budget set) and refund again")
	}
	if len(e.Refunded) == 0 {
		return b.String() + "; nothing else given back"
	}
	names := slices.Sorted(maps.Keys(e.Refunded))
	b.WriteString("; given back:")
	for _, name := range names {
		fmt.Fprintf(&b, " %s/%s %d", e.API, name, e.Refunded[name])
	}
	return b.String()
}

// Is reports whether target is ErrPartialRefund.
func (e *PartialRefundError) Is(target error) bool { return target == ErrPartialRefund }

// ExhaustedError reports a refused charge. errors.Is(err, ErrExhausted)
// matches it; errors.As gives the details.
type ExhaustedError struct {
	API        string        // the limiter's API, e.g. "youtube"
	Budget     string        // the budget that refused (the one that frees up last)
	Credential string        // the credential's label, or its fingerprint; never the secret
	Used       int64         // units counted in the window now
	Limit      int64         // the budget's limit
	Cost       int64         // what the refused charge asked of this budget
	RetryAfter time.Duration // how long until the charge could be paid, exactly
	RetryAt    time.Time     // the instant RetryAfter points at
	// ExhaustedUntil is set when the budget was marked spent (Exhaust), for
	// example because the upstream said so.
	ExhaustedUntil time.Time
}

// Error describes the refusal: which budget, its usage and when it frees up.
func (e *ExhaustedError) Error() string {
	s := fmt.Sprintf("quota: %s/%s exhausted for %s: used %d of %d, cost %d", e.API, e.Budget, e.Credential, e.Used, e.Limit, e.Cost)
	if !e.ExhaustedUntil.IsZero() {
		s += ", marked spent until " + e.ExhaustedUntil.UTC().Format(time.RFC3339)
	}
	return s + fmt.Sprintf("; retry after %v (at %s)", e.RetryAfter, e.RetryAt.UTC().Format(time.RFC3339Nano))
}

// Is reports whether target is ErrExhausted.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// trimInvalid returns err's message without ErrInvalid's prefix, to wrap
// it again in a message that says more.
func trimInvalid(err error) string {
	return strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")
}
