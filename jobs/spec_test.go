package jobs

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// badSpecs each make Add return an error naming the spec. The first ones
// panicked inside robfig/cron v3 (upstream issue #554).
var badSpecs = []string{
	"CRON_TZ=America/Los_Angeles",
	"TZ=0",
	"TZ=",
	"CRON_TZ=",
	"CRON_TZ=UTC\t",
	"TZ=UTC ",
	"CRON_TZ= * * * * *",
	"CRON_TZ=Mars/Olympus_Mons * * * * *",
	"CRON_TZ=UTC CRON_TZ=UTC * * * * *",
	"TZ=../../etc/passwd 0 * * * *",
	"   ",
	"@every",
	"@every -",
	"@fortnightly",
	"* * * *",
	"* * * * * * *",
	"61 * * * *",
	"*/0 * * * *",
	"5-3 * * * *",
	"1-2/0 * * * *",
	"*/99999999999999999999 * * * *",
	"0 0 32 * *",
	"0 0 * 13 *",
	"0 0 * * 8",
	"a b c d e",
	"@every 1h CRON_TZ=UTC",
	// robfig/cron runs these every second: a typo would spend the budget
	// at the fastest rate cron has.
	"@every -5m",
	"@every 0s",
	"@every 500ms",
	"CRON_TZ=UTC @every -1h",
}

func TestBadSpecs(t *testing.T) {
	s := New(quota.NewMemoryStore())
	noop := func(ctx context.Context, run *Run) error { return nil }
	for _, spec := range badSpecs {
		err := s.Add("job", spec, noop)
		if err == nil {
			t.Errorf("Add(%q) = nil, want an error", spec)
			continue
		}
		if !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), strconv.Quote(spec)) {
			t.Errorf("Add(%q) = %v, want ErrInvalid naming the spec", spec, err)
		}
	}
}

func TestGoodSpecsWithZones(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC) // 01:00 in LA
	for spec, want := range map[string]time.Time{
		"CRON_TZ=America/Los_Angeles 5 0 * * *":    time.Date(2026, 3, 3, 0, 5, 0, 0, la),
		"TZ=America/Los_Angeles\t5 0 * * *":        time.Date(2026, 3, 3, 0, 5, 0, 0, la),
		"  CRON_TZ=America/Los_Angeles   @daily  ": time.Date(2026, 3, 3, 0, 0, 0, 0, la),
		"CRON_TZ=UTC 30 */15 * * * *":              from.Add(30 * time.Second),
	} {
		sched, err := parseSpec(spec)
		if err != nil {
			t.Errorf("parseSpec(%q): %v", spec, err)
			continue
		}
		if got := sched.Next(from); !got.Equal(want) {
			t.Errorf("parseSpec(%q).Next = %v, want %v", spec, got, want)
		}
	}
}

// FuzzSpec: every spec either parses or returns an error naming it; none
// panics. The committed seeds in testdata/fuzz/FuzzSpec include the specs
// that panicked robfig/cron v3.
func FuzzSpec(f *testing.F) {
	for _, s := range badSpecs {
		f.Add(s)
	}
	for _, s := range []string{"*/15 * * * *", "30 */15 * * * *", "@hourly", "@every 15m", "CRON_TZ=Asia/Tokyo 0 9 * * *"} {
		f.Add(s)
	}
	from := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, spec string) {
		sched, err := parseSpec(spec)
		if err != nil {
			if !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), strconv.Quote(spec)) {
				t.Fatalf("parseSpec(%q) = %v, want ErrInvalid naming the spec", spec, err)
			}
			return
		}
		if sched == nil {
			t.Fatalf("parseSpec(%q) = nil schedule and no error", spec)
		}
		sched.Next(from)
	})
}
