package backend

import (
	"errors"
	"fmt"
)

// The errors stores return. Package quota exports each under the same name
// (the same value), so errors.Is matches either.
var (
	// ErrStoreUnavailable wraps the cause when the store could not be
	// reached or did not answer in time. Unless the limiter fails open, the
	// charge was refused.
	ErrStoreUnavailable = errors.New("quota: store unavailable")

	// ErrInvalid wraps every invalid argument: a cost <= 0, an empty
	// credential, an unknown budget, a bad limit, window or name. The message
	// names which.
	ErrInvalid = errors.New("quota: invalid argument")

	// ErrUnknownCredential is returned for a Credential given by label alone
	// when the store knows no credential with that label.
	ErrUnknownCredential = errors.New("quota: unknown credential")

	// ErrNotFound is returned when a reservation, state value or other record
	// does not exist (for a reservation: never made, already refunded, or
	// already out of its window).
	ErrNotFound = errors.New("quota: not found")

	// ErrCostExceedsLimit means a charge costs more than a budget's whole
	// limit, so it can never succeed. Fail loudly; never retry it.
	ErrCostExceedsLimit = errors.New("quota: cost exceeds limit")

	// ErrLabelTaken is wrapped by the error UpdateCredential returns when a
	// label is already held by another credential of the API. Labels are
	// unique per API.
	ErrLabelTaken = errors.New("quota: label taken")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
