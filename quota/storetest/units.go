package storetest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
)

// units checks that a budget's unit is recorded with its definition and
// read back (by List and Load, as quotactl reads it), that a budget defined
// without one reads as the default unit, and that two definitions that
// differ only in their unit are the same budget: redefining the unit
// replaces it, keeps the usage, and draws no warning of another program's
// definition.
func (s suite) units(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(T0)
	st := s.store(t)
	budgets := []quota.Budget{
		{Name: "tokens", Limit: 30000, Window: quota.Sliding(time.Minute), Unit: "tokens"},
		{Name: "spend", Limit: 500_000_000, Window: quota.Monthly(time.UTC), Unit: quota.UnitUSDMicro},
		{Name: "plain", Limit: 10, Window: quota.Sliding(time.Hour)},
	}
	l, err := quota.New(st, "openai", budgets, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	mustTake(t, l, key, quota.Charge{Units: map[string]int64{"tokens": 1234, "spend": 12_340_000, "plain": 1}})

	units := func(what string, want map[string]string) {
		t.Helper()
		apis, err := st.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, a := range apis {
			if a.Name == "openai" {
				for _, b := range a.Budgets {
					got[b.Name] = b.Unit + "/" + b.UnitOf()
				}
			}
		}
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%s: budget %s lists unit/UnitOf %q, want %q (all: %v)", what, name, got[name], w, got)
			}
		}
	}
	units("defined", map[string]string{"tokens": "tokens/tokens", "spend": "usd-micro/usd-micro", "plain": "/units"})

	loaded, err := quota.Load(ctx, st, "openai", quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range loaded.Budgets() {
		if want := map[string]string{"tokens": "tokens", "spend": quota.UnitUSDMicro, "plain": ""}[b.Name]; b.Unit != want {
			t.Errorf("Load: budget %s has unit %q, want %q", b.Name, b.Unit, want)
		}
	}

	// Another program counts the same budget in another unit: the same
	// budget, its usage kept, no warning (the unit decides nothing).
	log := &testkit.Buffer{}
	other := []quota.Budget{budgets[0]}
	other[0].Unit = "tok"
	l2, err := quota.New(st, "openai", other, quota.WithClock(clock.Now), quota.WithLogger(slog.New(slog.NewTextHandler(log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	r := mustTake(t, l2, key, quota.Units("tokens", 1))
	if r.Usage[0].Used != 1235 {
		t.Errorf("after a redefinition of the unit alone: used %d, want 1235", r.Usage[0].Used)
	}
	if log.String() != "" {
		t.Errorf("a definition differing only in its unit was warned of: %s", log.String())
	}
	units("redefined", map[string]string{"tokens": "tok/tok"})
}
