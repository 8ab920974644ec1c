package view

import (
	"math"
	"testing"

	"github.com/quotactl/quotactl/quota"
)

// TestAmounts: every tool shows amounts this way: grouped digits and the
// unit; micro-dollars as dollars; the default unit as the number alone.
func TestAmounts(t *testing.T) {
	for _, c := range []struct {
		n    int64
		unit string
		want string
	}{
		{1234, "tokens", "1,234 tokens"},
		{0, "requests", "0 requests"},
		{1, "requests", "1 request"},
		{1, "ss", "1 ss"},
		{1234567, "points", "1,234,567 points"},
		{9700, quota.DefaultUnit, "9,700"},
		{9700, "", "9,700"},
		{12_340_000, quota.UnitUSDMicro, "$12.34"},
		{500_000_000, quota.UnitUSDMicro, "$500.00"},
		{1_500_000_000, quota.UnitUSDMicro, "$1,500.00"},
		{12_345_000, quota.UnitUSDMicro, "$12.35"}, // half a cent up
		{12_344_999, quota.UnitUSDMicro, "$12.34"},
		{9_999, quota.UnitUSDMicro, "$0.009999"}, // under a cent: never "$0.00"
		{150, quota.UnitUSDMicro, "$0.00015"},
		{10_000, quota.UnitUSDMicro, "$0.01"},
		{0, quota.UnitUSDMicro, "$0.00"},
		{-2_500_000, quota.UnitUSDMicro, "-$2.50"},
		{-1234, "tokens", "-1,234 tokens"},
		{math.MaxInt64 / 1000, quota.UnitUSDMicro, "$9,223,372,036.85"},
	} {
		if got := Amount(c.n, c.unit); got != c.want {
			t.Errorf("Amount(%d, %q) = %q, want %q", c.n, c.unit, got, c.want)
		}
	}
	for _, c := range []struct {
		used, limit int64
		unit, want  string
	}{
		{1234, 30000, "tokens", "1,234 / 30,000 tokens"},
		{12_340_000, 500_000_000, quota.UnitUSDMicro, "$12.34 / $500.00"},
		{9700, 10000, quota.DefaultUnit, "9,700 / 10,000"},
	} {
		if got := UsedOf(c.used, c.limit, c.unit); got != c.want {
			t.Errorf("UsedOf(%d, %d, %q) = %q, want %q", c.used, c.limit, c.unit, got, c.want)
		}
	}
	if got := Quantity(9700, "") + ", " + Quantity(1, ""); got != "9,700 units, 1 unit" {
		t.Errorf("Quantity in the default unit = %q", got)
	}
	if got := Quantity(1234, "tokens"); got != "1,234 tokens" {
		t.Errorf("Quantity of tokens = %q", got)
	}
	if got, want := Scale(250_000_000, quota.UnitUSDMicro)+" "+Scale(15000, "tokens"), "$250.00 15,000"; got != want {
		t.Errorf("Scale = %q, want %q", got, want)
	}
}
