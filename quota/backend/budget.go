package backend

import (
	"time"
)

// Budget is a named pool of units with a limit over a window, such as the
// YouTube Data API's {Name: "units", Limit: 10000, Window: Daily(la)}.
// Budgets belong to one API, so two APIs may each have a budget called
// "units"; the CLI and stored data address one as "API/BUDGET".
type Budget struct {
	// Name is the budget's name: letters, digits, '.', '_' and '-', starting
	// with a letter or digit, at most 64 bytes.
	Name string `json:"name"`
	// Limit is how many units the window admits: 1 to MaxLimit.
	Limit int64 `json:"limit"`
	// Window is the span the limit applies to: Sliding(d), Daily(loc) or
	// Monthly(loc).
	Window Window `json:"window"`
	// Unit says what the budget counts, for people reading it: "requests",
	// "tokens", "points", UnitUSDMicro (micro-dollars, shown as dollars).
	// Empty: DefaultUnit. It is a name like a budget's (letters, digits,
	// '.', '_' and '-'). It changes no decision: two definitions that
	// differ only in their unit count the same, and stores written before
	// units existed read as DefaultUnit.
	Unit string `json:"unit,omitempty"`
}

// DefaultUnit is the unit of a budget that declares none: "units", as the
// YouTube Data API names its own.
const DefaultUnit = "units"

// UnitUSDMicro is the unit of a budget counted in micro-dollars (millionths
// of a US dollar), such as a spend budget: the tools show it as dollars.
const UnitUSDMicro = "usd-micro"

// UnitOf returns the unit b counts: Unit, or DefaultUnit when b declares
// none.
func (b Budget) UnitOf() string {
	if b.Unit == "" {
		return DefaultUnit
	}
	return b.Unit
}

// Validate reports whether b is a valid definition: a valid name, a limit
// from 1 to MaxLimit, a valid window and, when set, a valid unit. The error wraps ErrInvalid.
func (b Budget) Validate() error {
	if err := checkName("budget", b.Name); err != nil {
		return err
	}
	if b.Limit <= 0 {
		return invalidf("budget %q: limit is %d, must be > 0", b.Name, b.Limit)
	}
	if b.Limit > MaxLimit {
		return invalidf("budget %q: limit is %d, must be at most %d (2^53-1, the largest every store keeps exactly)", b.Name, b.Limit, int64(MaxLimit))
	}
	if err := b.Window.validate(); err != nil {
		return invalidf("budget %q: %v", b.Name, trimInvalid(err))
	}
	if b.Unit != "" {
		if err := checkName("unit", b.Unit); err != nil {
			return invalidf("budget %q: %v", b.Name, trimInvalid(err))
		}
	}
	return nil
}

// MaxLimit is the largest limit a Budget may have, on every store: 2^53-1,
// the largest integer the Redis store's Lua numbers (doubles) hold exactly.
// Costs and usage are at most the limit, so they stay exact too.
const MaxLimit = 1<<53 - 1

// MaxTimeMicro is the latest instant a store keeps, in µs since the Unix
// epoch: 2^53-1 (in the year 2255), exact in the Redis store's Lua numbers.
// Exhaust until a later instant marks the budget spent until then, on every
// store.
const MaxTimeMicro = 1<<53 - 1

// ClampTime returns t, or time.UnixMicro(MaxTimeMicro) when t is later: what
// a store keeps of an instant.
func ClampTime(t time.Time) time.Time {
	if m := time.UnixMicro(MaxTimeMicro); t.After(m) {
		return m
	}
	return t
}

// ValidateBudgets checks a set of budget definitions as New does: valid
// names, limits between 1 and MaxLimit, valid windows (a sliding window of
// a whole number of microseconds), no duplicate names.
func ValidateBudgets(budgets []Budget) error {
	if len(budgets) == 0 {
		return invalidf("no budgets")
	}
	seen := make(map[string]bool, len(budgets))
	for _, b := range budgets {
		if err := b.Validate(); err != nil {
			return err
		}
		if seen[b.Name] {
			return invalidf("duplicate budget name %q", b.Name)
		}
		seen[b.Name] = true
	}
	return nil
}

// CheckName reports whether s is a valid API or budget name: 1 to 64
// letters, digits, '.', '_' or '-', starting with a letter or digit. what
// names the kind of name in the error ("api", "budget").
func CheckName(what, s string) error { return checkName(what, s) }

func checkName(what, s string) error {
	if s == "" {
		return invalidf("empty %s name", what)
	}
	if len(s) > 64 {
		return invalidf("%s name %.20q...: longer than 64 bytes", what, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return invalidf("%s name %q: only letters, digits, '.', '_' and '-' allowed, starting with a letter or digit", what, s)
		}
	}
	return nil
}

func trimInvalid(err error) string {
	s := err.Error()
	p := ErrInvalid.Error() + ": "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
