package quota_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
)

// TestOtherProgramsDefinitionWarned: two programs share a store and define
// one budget with different limits (a misconfigured deploy, a rollout half
// done). Each decides with its own, so the looser one admits up to its own
// limit: staged on SQLite with limits 100 and 300, the store ended at
// 300/300 and the process defining 100 saw its budget overspent, with
// nothing logged anywhere. The process that finds the other's definition
// recorded says so, once.
func TestOtherProgramsDefinitionWarned(t *testing.T) {
	ctx := context.Background()
	st := quota.NewMemoryStore()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := quota.WithClock(func() time.Time { return now })
	var logA, logB testkit.Buffer
	a, err := quota.New(st, "yt", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}}, clock,
		quota.WithLogger(slog.New(slog.NewTextHandler(&logA, nil))))
	if err != nil {
		t.Fatal(err)
	}
	b, err := quota.New(st, "yt", []quota.Budget{{Name: "units", Limit: 300, Window: quota.Sliding(time.Hour)}}, clock,
		quota.WithLogger(slog.New(slog.NewTextHandler(&logB, nil))))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "k", Label: "k"}
	for range 3 {
		if _, err := a.Take(ctx, cred, quota.Units("units", 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Take(ctx, cred, quota.Units("units", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(logA.String(), "defines this budget otherwise") {
		t.Errorf("the first program warned with nothing recorded before it: %s", logA.String())
	}
	warn := logB.String()
	if n := strings.Count(warn, "defines this budget otherwise"); n != 1 ||
		!strings.Contains(warn, "limit=300") || !strings.Contains(warn, "recorded_limit=100") || !strings.Contains(warn, "budget=units") {
		t.Errorf("second program's log: %q; want one warning naming the budget, its limit 300 and the recorded 100", warn)
	}
}

// TestOverrideKeepsUnit: an operator who sets a budget's limit (quotactl
// budget set, which names no unit) keeps the unit the program declared, in
// the catalog and in the definition in force; one that names a unit sets
// it.
func TestOverrideKeepsUnit(t *testing.T) {
	ctx := context.Background()
	st := quota.NewMemoryStore()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	l, err := quota.New(st, "openai", []quota.Budget{{Name: "tokens", Limit: 30000, Window: quota.Sliding(time.Minute), Unit: "tokens"}},
		quota.WithClock(func() time.Time { return now }), quota.WithOverrideRefresh(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx, quota.Credential{Secret: "k"}, quota.Units("tokens", 1)); err != nil {
		t.Fatal(err)
	}
	if err := quota.SetOverride(ctx, st, "openai", quota.Budget{Name: "tokens", Limit: 20000, Window: quota.Sliding(time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	apis, err := st.List(ctx)
	if err != nil || len(apis) != 1 || len(apis[0].Budgets) != 1 || apis[0].Budgets[0].Unit != "tokens" || apis[0].Budgets[0].Limit != 20000 {
		t.Fatalf("catalog after an override without a unit: %+v, %v; want limit 20000 in tokens", apis, err)
	}
	if _, err := l.Take(ctx, quota.Credential{Secret: "k"}, quota.Units("tokens", 1)); err != nil {
		t.Fatal(err)
	}
	if b := l.Budgets()[0]; b.Unit != "tokens" || b.Limit != 20000 {
		t.Errorf("definition in force %+v; want the override's limit in the program's unit", b)
	}
	over, err := quota.Overrides(ctx, st, "openai")
	if err != nil {
		t.Fatal(err)
	}
	bare := map[string]quota.Override{"tokens": {Budget: quota.Budget{Name: "tokens", Limit: 10, Window: quota.Sliding(time.Minute)}}}
	if got, _ := quota.ApplyOverrides(l.Budgets(), bare); got[0].Unit != "tokens" {
		t.Errorf("an override recorded before units: unit %q, want the program's", got[0].Unit)
	}
	if err := quota.SetOverride(ctx, st, "openai", quota.Budget{Name: "tokens", Limit: 20000, Window: quota.Sliding(time.Minute), Unit: "tok"}, now); err != nil {
		t.Fatal(err)
	}
	if over, err = quota.Overrides(ctx, st, "openai"); err != nil || over["tokens"].Unit != "tok" {
		t.Errorf("an override naming its unit: %+v, %v", over, err)
	}
}
