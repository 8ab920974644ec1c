package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// holdLimiter returns a Limiter over l's store for holds: API "<api>.holds",
// one budget per method that can be held, every credential its own owner
// (a hold belongs to the credential, such as a YouTube channel, not to its
// project), with l's clock, fingerprint key and logger.
func (l *Limiter) holdLimiter(budgets []Budget) *Limiter {
	opts := []Option{WithFingerprintKey(l.fpKey), WithLogger(l.log)}
	if l.clock != nil {
		opts = append(opts, WithClock(l.clock))
	}
	h, err := New(l.store, l.api+".holds", budgets, opts...)
	if err != nil {
		return nil // an API name of 64 bytes leaves no room for ".holds": no holds
	}
	return h
}

// checkHold refuses a request to a method held for cred (Verdict.Hold).
// A store error is logged and left to Take, which applies the limiter's
// failure policy.
func (t *Transport) checkHold(req *http.Request, cred Credential, ch Charge) error {
	if cred.Secret == "" {
		return nil // a credential known by label alone: its holds are found when the upstream answers
	}
	// A hold is kept under the credential's own fingerprint: read it
	// directly, without registering the credential with the holds API.
	us, err := t.holds.StatusOf(req.Context(), t.holdAccount(cred.Secret))
	if err != nil {
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrUnknownCredential) || cancelled(req.Context()) {
			return nil // a cancelled caller is no store failure: Take reports it
		}
		t.log.LogAttrs(req.Context(), slog.LevelWarn, "quota: transport: could not read holds",
			slog.String("api", t.limiter.api), slog.String("method", ch.Method), slog.Any("credential", cred),
			slog.String("error", strings.ReplaceAll(err.Error(), cred.Secret, "<redacted>")))
		return nil
	}
	for _, u := range us {
		if u.Budget != ch.Method || u.ExhaustedUntil.IsZero() {
			continue
		}
		now := t.holds.now()
		if now.IsZero() {
			now = time.Now()
		}
		who := cred.Label
		if who == "" {
			who = cred.String()
		}
		return fmt.Errorf("quota: transport: %s: held for this credential by the upstream: %w", ch.Method, &ExhaustedError{
			API: t.holds.api, Budget: ch.Method, Credential: who, Limit: u.Limit,
			RetryAfter: u.ExhaustedUntil.Sub(now), RetryAt: u.ExhaustedUntil, ExhaustedUntil: u.ExhaustedUntil,
		})
	}
	return nil
}

// hold records that the upstream refuses the methods v.Hold names to this
// credential for v.HoldFor, in the store, so that every process refuses
// them for it until then. The attempt's charge is kept: the upstream bills
// a refused request like any other. The owner's budgets are left alone.
func (a *attempt) hold(res *Reservation, v Verdict, status int) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), 10*time.Second)
	defer cancel()
	now := res.At
	if now.IsZero() {
		now = time.Now()
	}
	until := now.Add(v.HoldFor)
	who := res.Label
	if who == "" {
		who = res.Credential
	}
	var first *ExhaustedError
	for _, m := range v.Hold {
		if a.t.holds == nil || !a.t.held[m] {
			continue
		}
		if err := a.t.holds.Exhaust(ctx, Credential{Secret: a.cred.Secret, Label: a.cred.Label}, m, until); err != nil {
			a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: could not record a hold",
				slog.String("api", a.t.limiter.api), slog.String("method", m), slog.Any("credential", a.cred),
				slog.String("error", a.scrub(err.Error())))
		}
		a.t.log.LogAttrs(a.ctx, slog.LevelWarn, "quota: transport: upstream holds a method for this credential",
			slog.String("api", a.t.limiter.api), slog.String("method", m), slog.Any("credential", a.cred),
			slog.Int("status", status), slog.String("reason", v.Reason), slog.Time("until", until))
		if first == nil {
			first = &ExhaustedError{API: a.t.limiter.api + ".holds", Budget: m, Credential: who, Limit: 1, Cost: 1,
				RetryAfter: v.HoldFor, RetryAt: until, ExhaustedUntil: until}
		}
	}
	if first == nil {
		return a.errorf("upstream answered %d %s naming no method this transport can hold", status, v.Reason)
	}
	return a.errorf("upstream answered %d %s: %w", status, v.Reason, first)
}

// holdAccount returns the account a credential's holds are kept under: its
// fingerprint (a hold belongs to the credential, not to its owner).
//
// The main limiter derives it the same way (same key) and caches it: the
// default derivation is deliberately slow.
func (t *Transport) holdAccount(secret string) string { return t.limiter.Fingerprint(secret) }
