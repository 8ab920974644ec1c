package redisstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// maxExact is the largest count a Lua number (a float64) holds exactly:
// limits, costs and µs timestamps must stay below it.
const maxExact = 1<<53 - 1

// noNow is the now argument that tells a script to use Redis TIME.
const noNow = ""

var zero any = int64(0)

// dayBounds caches the four resets (local midnights, or midnights of the
// 1st for a monthly window) Window.Boundaries gives for any instant of one
// day or month, boxed for the script's arguments.
type dayBounds struct {
	lo, hi int64 // µs: the day the boundaries were computed for, [lo, hi)
	box    [4]any
}

// estimate returns the Go side's estimate of the script's now: the request's
// injected now, else the host clock corrected by any skew learned from
// Redis.
func (s *Store) estimate(now time.Time) time.Time {
	if !now.IsZero() {
		return now
	}
	return time.Now().Add(time.Duration(s.skew.Load()))
}

// learn records that Redis's clock reads serverUS (µs) now, after a script
// found the host's estimate more than a day off, and returns it as a time.
func (s *Store) learn(serverUS int64) time.Time {
	server := time.UnixMicro(serverUS)
	s.skew.Store(int64(server.Sub(time.Now())))
	return server
}

// bounds returns the resets of calendar window w around est, cached per
// window (at most maxBoxed; past that the cache restarts).
func (s *Store) bounds(w backend.Window, est time.Time) *dayBounds {
	us := est.UnixMicro()
	s.boxMu.RLock()
	d := s.days[w]
	s.boxMu.RUnlock()
	if d != nil && d.lo <= us && us < d.hi {
		return d
	}
	b := w.Boundaries(est)
	d = &dayBounds{lo: b[1].UnixMicro(), hi: b[2].UnixMicro()}
	for i, t := range b {
		d.box[i] = t.UnixMicro()
	}
	s.boxMu.Lock()
	if len(s.days) >= maxBoxed {
		clear(s.days)
	}
	s.days[w] = d
	s.boxMu.Unlock()
	return d
}

// appendSpec appends the 5-value window spec a script reads (see lua/lib/window.lua):
// WIN, B1..B4.
func (s *Store) appendSpec(args []any, w backend.Window, est time.Time) []any {
	if !w.IsCalendar() {
		return append(args, w.Duration().Microseconds(), zero, zero, zero, zero)
	}
	d := s.bounds(w, est)
	return append(args, zero, d.box[0], d.box[1], d.box[2], d.box[3])
}

// boxed holds a budget's limit, sliding window length and window id
// already converted to script arguments, so the hot path does not allocate
// them per call.
type boxed struct{ limit, win, id any }

// windowID returns the id scripts know window w by (see lua/lib/retain.lua): "S" and
// its length in µs for a sliding window, "D" and its zone for a daily one,
// "M" and its zone for a monthly one.
func windowID(w backend.Window) string {
	switch {
	case w.IsDaily():
		return "D" + w.Location().String()
	case w.IsMonthly():
		return "M" + w.Location().String()
	}
	return "S" + strconv.FormatInt(w.Duration().Microseconds(), 10)
}

// maxBoxed bounds the cache of boxed budgets; past it the cache restarts.
const maxBoxed = 1024

// box returns b's limit and window length as script arguments, cached.
func (s *Store) box(b backend.Budget) boxed {
	s.boxMu.RLock()
	v, ok := s.boxes[b]
	s.boxMu.RUnlock()
	if ok {
		return v
	}
	v = boxed{limit: b.Limit, win: b.Window.Duration().Microseconds(), id: windowID(b.Window)}
	s.boxMu.Lock()
	if len(s.boxes) >= maxBoxed {
		clear(s.boxes)
	}
	s.boxes[b] = v
	s.boxMu.Unlock()
	return v
}

// checkBudget validates what the scripts rely on.
func checkBudget(b backend.Budget) error {
	if err := backend.CheckName("budget", b.Name); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	if b.Limit <= 0 || b.Limit > maxExact {
		return invalid("budget %q: limit %d must be between 1 and 2^53-1", b.Name, b.Limit)
	}
	switch {
	case b.Window.IsZero():
		return invalid("budget %q: zero window", b.Name)
	case b.Window.IsCalendar():
		if b.Window.Location() == nil {
			return invalid("budget %q: %s window without a time zone", b.Name, strings.TrimSuffix(b.Window.String(), ":"))
		}
	case b.Window.Duration() < time.Microsecond:
		return invalid("budget %q: sliding window of %v: must be at least 1µs", b.Name, b.Window.Duration())
	}
	return nil
}

// checkCred validates an API name and credential fingerprint that go into a
// hash tag.
func checkCred(api, cred string) error {
	if err := backend.CheckName("api", api); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	if cred == "" {
		return invalid("empty credential fingerprint")
	}
	for i := 0; i < len(cred); i++ {
		if c := cred[i]; c == '{' || c == '}' {
			return invalid("credential fingerprint %q holds a brace", cred)
		}
	}
	return nil
}

func checkNonce(nonce string) error {
	if nonce == "" {
		return invalid("empty nonce")
	}
	for i := 0; i < len(nonce); i++ {
		if nonce[i] == ':' {
			return invalid("nonce %q holds ':'", nonce)
		}
	}
	return nil
}

// nowArg returns the now argument of a script: the injected now in µs, or
// noNow for Redis TIME.
func nowArg(now time.Time) any {
	if now.IsZero() {
		return noNow
	}
	return now.UnixMicro()
}
