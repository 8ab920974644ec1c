package backend

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

var (
	// ErrLeaseHeld is matched by every *StateLeaseHeldError: another holder's
	// lease on the key is live, so AcquireLease took nothing.
	ErrLeaseHeld = errors.New("quota: lease held")

	// ErrLeaseLost means the caller's lease is no longer the newest: it
	// expired, was released, or a newer lease on the key was granted (the
	// fencing token moved on). A renewal, release or fenced write with that
	// token changes nothing.
	ErrLeaseLost = errors.New("quota: lease lost")
)

// StateLease is one holder's claim on a key, as a StateStore keeps it: the
// jobs package's run leases (not to be confused with budget leases, which
// are reservations of units).
type StateLease struct {
	Key    string `json:"key"`
	Holder string `json:"holder"` // who holds it, e.g. "host:pid run-id"
	// Token is the fencing token: every grant of a lease on Key gets a
	// token greater than every earlier one, so a write fenced with an old
	// token is refused (StateStore.SaveStateFenced).
	Token   int64     `json:"token"`
	Expires time.Time `json:"expires"` // the lease ends then unless renewed
}

// StateLeaseHeldError reports that AcquireLease found another holder's live
// lease. errors.Is(err, ErrLeaseHeld) matches it.
type StateLeaseHeldError struct {
	Held StateLease // the live lease: who holds it and until when
}

// Error names the holder and when its lease expires.
func (e *StateLeaseHeldError) Error() string {
	return fmt.Sprintf("quota: lease %q held by %s until %s", e.Held.Key, e.Held.Holder, e.Held.Expires.UTC().Format(time.RFC3339Nano))
}

// Is reports whether target is ErrLeaseHeld.
func (e *StateLeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

// StateLeaseRequest asks a StateStore about a lease on Key.
type StateLeaseRequest struct {
	Key    string
	Holder string        // AcquireLease: who asks; non-empty
	Token  int64         // RenewLease, ReleaseLease: the token AcquireLease gave
	TTL    time.Duration // AcquireLease, RenewLease: how long from now the lease lives; >= 1ms
	// Now is the store's clock when zero (Redis TIME, the host clock);
	// non-zero, an injected test clock, as in TakeRequest.
	Now time.Time
}

// CheckStateLease validates what a StateStore's lease method op needs of req:
// a key with no '{' or '}' (Redis Cluster hash tags), a holder and a TTL of
// at least a millisecond to acquire or renew, a token to renew or release.
func CheckStateLease(op string, req *StateLeaseRequest) error {
	switch {
	case req == nil:
		return invalidf("%s: nil request", op)
	case req.Key == "" || strings.ContainsAny(req.Key, "{}"):
		return invalidf("%s: lease key %q: must be non-empty, without '{' or '}'", op, req.Key)
	}
	switch op {
	case "acquire lease":
		if req.Holder == "" {
			return invalidf("%s %q: empty holder", op, req.Key)
		}
	case "renew lease", "release lease":
		if req.Token <= 0 {
			return invalidf("%s %q: token %d: must be > 0", op, req.Key, req.Token)
		}
	}
	if (op == "acquire lease" || op == "renew lease") && req.TTL < time.Millisecond {
		return invalidf("%s %q: ttl %v: must be at least 1ms", op, req.Key, req.TTL)
	}
	return nil
}
