package overspend_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/internal/testkit/overspend"
	"github.com/quotactl/quotactl/quota"
)

func TestCheck(t *testing.T) {
	budgets := overspend.Budgets(100, 3)
	for _, tc := range []struct {
		name string
		used map[string]int64
		s    overspend.Spend
		want []string // a prefix of each problem, in order
	}{
		{"right", map[string]int64{"units": 90, "calls": 2},
			overspend.Spend{Accepted: []int64{40, 50}, Refused: []overspend.Refusal{{Cost: 11, Budget: "units"}}}, nil},
		{"calls full", map[string]int64{"units": 30, "calls": 3},
			overspend.Spend{Accepted: []int64{10, 10, 10}, Refused: []overspend.Refusal{{Cost: 1, Budget: "calls"}}}, nil},
		{"overspend", map[string]int64{"units": 120, "calls": 2},
			overspend.Spend{Accepted: []int64{60, 60}}, []string{"overspend: callers were granted 120 units"}},
		{"unrecorded", map[string]int64{"units": 40, "calls": 1},
			overspend.Spend{Accepted: []int64{40, 50}}, []string{"the store reports 40 units and 1 calls used"}},
		{"wrongful refusal", map[string]int64{"units": 40, "calls": 1},
			overspend.Spend{Accepted: []int64{40}, Refused: []overspend.Refusal{{Cost: 60, Budget: "units"}}},
			[]string{"a charge of 60 units was refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := overspend.Check(budgets, tc.used, tc.s)
			ok := len(got) == len(tc.want)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.HasPrefix(got[i], tc.want[i])
			}
			if !ok {
				t.Fatalf("Check = %q, want problems starting %q", got, tc.want)
			}
		})
	}
	var r overspend.Spend
	r.Record(5, nil)
	r.Record(7, fmt.Errorf("take: %w", &quota.ExhaustedError{Budget: "calls"}))
	r.Record(9, errors.New("down"))
	if fmt.Sprint(r) != "{[5] [{7 calls}] [down]}" {
		t.Fatalf("Record: %v", r)
	}

	var s overspend.Spend
	s.Add(overspend.Spend{Accepted: []int64{1}, Errors: []string{"e"}})
	s.Add(overspend.Spend{Accepted: []int64{2}, Refused: []overspend.Refusal{{Cost: 3}}})
	if len(s.Accepted) != 2 || len(s.Refused) != 1 || len(s.Errors) != 1 {
		t.Fatalf("Add merged %+v", s)
	}
}
