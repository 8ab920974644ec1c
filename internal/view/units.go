package view

import (
	"strconv"
	"strings"

	"github.com/quotactl/quotactl/quota"
)

// Amounts are shown in one way by every tool (quotactl status, the
// dashboard), by the helpers below: digits grouped by thousands, the
// budget's unit after them ("1,234 tokens"), a budget counted in
// micro-dollars (quota.UnitUSDMicro) as dollars ("$12.34"). A budget in the
// default unit (quota.DefaultUnit, or none declared) shows the number
// alone, as the tools did before budgets had units.

// Amount shows n of unit: "1,234 tokens" ("1 token": a unit named in the
// plural, with an s, loses it for one), "$12.34" for micro-dollars,
// "1,234" in the default unit.
func Amount(n int64, unit string) string {
	switch unit {
	case quota.UnitUSDMicro:
		return Dollars(n)
	case "", quota.DefaultUnit:
		return Group(n)
	}
	return Group(n) + " " + one(n, unit)
}

// one is unit for n of it: "1 token" of the plural "tokens".
func one(n int64, unit string) string {
	if (n == 1 || n == -1) && len(unit) > 1 && strings.HasSuffix(unit, "s") && !strings.HasSuffix(unit, "ss") {
		return unit[:len(unit)-1]
	}
	return unit
}

// Quantity shows n of unit in a sentence, naming the default unit too:
// "1,234 tokens", "$12.34", "9,700 units".
func Quantity(n int64, unit string) string {
	if IsDefaultUnit(unit) {
		return Group(n) + " " + one(n, quota.DefaultUnit)
	}
	return Amount(n, unit)
}

// Scale shows n of unit in a narrow place (a chart's axis): dollars for
// micro-dollars, else the number alone.
func Scale(n int64, unit string) string {
	if unit == quota.UnitUSDMicro {
		return Dollars(n)
	}
	return Group(n)
}

// UsedOf shows used of limit in unit: "1,234 / 30,000 tokens", "$12.34 /
// $500.00", "9,700 / 10,000" in the default unit.
func UsedOf(used, limit int64, unit string) string {
	switch unit {
	case quota.UnitUSDMicro:
		return Dollars(used) + " / " + Dollars(limit)
	case "", quota.DefaultUnit:
		return Group(used) + " / " + Group(limit)
	}
	return Group(used) + " / " + Group(limit) + " " + unit
}

// IsDefaultUnit reports whether unit is the default one (quota.DefaultUnit,
// or none declared): the unit whose amounts show as bare numbers.
func IsDefaultUnit(unit string) bool { return unit == "" || unit == quota.DefaultUnit }

// Group shows n with its digits grouped by thousands: "1,234,567".
func Group(n int64) string {
	s := strconv.FormatInt(n, 10)
	digits := strings.TrimPrefix(s, "-")
	var b strings.Builder
	if len(digits) < len(s) {
		b.WriteByte('-')
	}
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Dollars shows micro-dollars as US dollars: to the cent, rounded half up
// ("$12.34", "$1,500.00"); an amount under a cent that is not zero to the
// micro-dollar, so that a small spend never reads as nothing ("$0.000150").
func Dollars(micro int64) string {
	sign := ""
	if micro < 0 {
		sign, micro = "-", -micro
	}
	if micro > 0 && micro < 10_000 {
		frac := strings.TrimRight(strconv.FormatInt(1_000_000+micro, 10)[1:], "0")
		for len(frac) < 2 {
			frac += "0"
		}
		return sign + "$0." + frac
	}
	cents := (micro + 5_000) / 10_000
	return sign + "$" + Group(cents/100) + "." + strconv.FormatInt(100+cents%100, 10)[1:]
}
