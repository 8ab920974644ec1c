package quota_test

import (
	"errors"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// TestChargeExcessBadInput: an unknown budget or an excess above MaxLimit
// is an error naming it, and records nothing; an excess of 0 or less
// records nothing either.
func TestChargeExcessBadInput(t *testing.T) {
	lim, err := quota.New(quota.NewMemoryStore(), "api", []quota.Budget{{Name: "tokens", Limit: 100, Window: quota.Sliding(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "k"}
	res, err := lim.Take(t.Context(), cred, quota.Charge{Method: "m", Units: map[string]int64{"tokens": 10}})
	if err != nil {
		t.Fatal(err)
	}
	for _, excess := range []map[string]int64{{"nope": 5}, {"tokens": quota.MaxLimit + 1}, {"tokens": 5, "nope": 1}} {
		if _, err := lim.ChargeExcess(t.Context(), res, excess); !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("ChargeExcess(%v) = %v; want ErrInvalid", excess, err)
		}
	}
	if us, err := lim.ChargeExcess(t.Context(), res, map[string]int64{"tokens": -3}); err != nil || len(us) != 0 {
		t.Errorf("ChargeExcess(-3) = %v, %v; want nothing recorded", us, err)
	}
	st, err := lim.Status(t.Context(), cred)
	if err != nil || st[0].Used != 10 {
		t.Fatalf("after bad excesses: %+v, %v; want the take's 10 alone", st, err)
	}
	us, err := lim.ChargeExcess(t.Context(), res, map[string]int64{"tokens": 95})
	if err != nil || len(us) != 1 || us[0].Used != 105 || res.Usage[0].Cost != 105 {
		t.Fatalf("ChargeExcess(95) = %+v, %v (reservation cost %d); want 105 used, above the limit", us, err, res.Usage[0].Cost)
	}
}
