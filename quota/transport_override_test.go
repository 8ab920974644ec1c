package quota_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/ytsim"
	"github.com/quotactl/quotactl/quota"
)

// TestTransportUpstreamExhaustionUnderOverride: an operator redefined the
// budget (quotactl budget set: another zone's midnight); when the upstream
// says it is spent, the transport marks it spent until the reset of the
// definition in force, not the program's.
func TestTransportUpstreamExhaustionUnderOverride(t *testing.T) {
	e := newTrEnv(t, []ytsim.Option{ytsim.WithLimit("units", 3)})
	ctx := context.Background()
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	var units quota.Budget
	for _, b := range e.table.Budgets {
		if b.Name == "units" {
			units = b
		}
	}
	units.Window = quota.Daily(kolkata)
	if err := quota.SetOverride(ctx, e.store, e.table.API, units, e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	list := e.url("/youtube/v3/videos", "chart", "mostPopular", "regionCode", "FR")
	for i := range 3 {
		if resp, _, err := e.do(ctx, "GET", list, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	_, _, err = e.do(ctx, "GET", list, nil)
	var ex *quota.ExhaustedError
	if !errors.As(err, &ex) {
		t.Fatalf("err = %v, want an *ExhaustedError", err)
	}
	// 10:00 PDT on 2026-03-10 is 22:30 in Kolkata: its midnight is 1h30m away.
	midnight := time.Date(2026, 3, 11, 0, 0, 0, 0, kolkata)
	if !ex.ExhaustedUntil.Equal(midnight) || !ex.RetryAt.Equal(midnight) || ex.RetryAfter != 90*time.Minute {
		t.Fatalf("ExhaustedError = %+v, want units spent until %v (in 1h30m), the overriding zone's midnight", ex, midnight)
	}
	us, err := e.lim.Status(ctx, quota.Credential{Secret: trKey, Owner: trOwner})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if u.Budget == "units" && !u.ExhaustedUntil.Equal(midnight) {
			t.Fatalf("units marked spent until %v, want %v", u.ExhaustedUntil, midnight)
		}
	}
}
