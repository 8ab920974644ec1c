package quota

import (
	"log/slog"
	"time"
)

// Option configures a Limiter in New or Load.
type Option func(*Limiter)

// WithClock makes the limiter pass clock's time to the store as "now" with
// every request, instead of the store using its own clock (Redis TIME, the
// host clock). For tests: a fake clock moves time without sleeping.
func WithClock(clock func() time.Time) Option { return func(l *Limiter) { l.clock = clock } }

// WithFingerprintKey makes credential fingerprints a fast HMAC keyed with
// key (Fingerprint). Default: DefaultFingerprint, a deliberately slow
// derivation with no key. Every process sharing a store must use the same
// key. A private key keeps a guessable (low-entropy) token from being
// confirmed by hashing guesses against the stored fingerprint, at any cost.
func WithFingerprintKey(key []byte) Option {
	return func(l *Limiter) { l.fpKey = append([]byte(nil), key...) }
}

// WithOwner names the owner of every credential the limiter sees that does
// not name one itself (Credential.Owner): all of them share one account's
// budgets, as the keys of one Google Cloud project share its quota. Owner
// names follow the rules of API names; New rejects a bad one.
func WithOwner(owner string) Option { return func(l *Limiter) { l.owner = owner } }

// FailOpen sets the failure policy for when the store is unreachable:
// charges whose largest per-budget cost is at most maxCost go ahead
// unmetered, each logged at Warn and counted (Limiter.Unmetered); larger ones
// are refused with ErrStoreUnavailable. A caller that cancelled is never
// admitted unmetered. Default: fail closed.
func FailOpen(maxCost int64) Option { return func(l *Limiter) { l.failOpen = maxCost } }

// WithLogger sets where the limiter logs unmetered decisions. Default:
// slog.Default() at the time New is called.
func WithLogger(log *slog.Logger) Option { return func(l *Limiter) { l.log = log } }
