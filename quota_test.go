// End-to-end story of quotactl, told as tests at the root of the module:
// why a fixed-window counter lets a cron job blow its daily budget, and how
// the quota limiter holds the line on every backend.
package quotactl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

func TestMain(m *testing.M) {
	testkit.RunChild(map[string]func(string) int{
		"spend": childMain(spendChild), // reliability_test.go
		"lease": childMain(leaseChild), // leases_test.go
	})
	redistest.Main(m)
}

// childMain makes a child process's body a role for testkit.RunChild: an
// error it returns is printed on stderr, and the child exits 1.
func childMain(run func(arg string) error) func(string) int {
	return func(arg string) int {
		if err := run(arg); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		return 0
	}
}

// fixedWindow is the baseline most hand-rolled limiters are: a counter per
// calendar window (INCR key:hour in Redis), reset when the window turns.
type fixedWindow struct {
	limit  int64
	window time.Duration
	start  time.Time
	count  int64
}

func (f *fixedWindow) allow(now time.Time, cost int64) bool {
	if w := now.Truncate(f.window); !w.Equal(f.start) {
		f.start, f.count = w, 0
	}
	if f.count+cost > f.limit {
		return false
	}
	f.count += cost
	return true
}

// stores returns every backend, fresh, for one test.
func stores(t *testing.T) map[string]func(t *testing.T) quota.Store {
	return map[string]func(t *testing.T) quota.Store{
		"memory": func(t *testing.T) quota.Store { return quota.NewMemoryStore() },
		"redis": func(t *testing.T) quota.Store {
			return redisstore.New(redistest.Client(t), redisstore.WithPrefix(redistest.Prefix(t)))
		},
		"sqlite": func(t *testing.T) quota.Store {
			s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "quota.db"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

// TestBoundaryBurst: a job bursts its whole hourly budget at 10:59 and again
// at 11:00. The fixed-window counter admits both bursts (double the limit in
// 61 seconds); the sliding log admits exactly the limit in any hour.
func TestBoundaryBurst(t *testing.T) {
	const limit = 100
	t0 := time.Date(2026, 11, 22, 10, 59, 0, 0, time.UTC)
	bursts := []time.Time{t0, t0.Add(time.Minute), t0.Add(59*time.Minute + time.Second), t0.Add(time.Hour)}

	fw := &fixedWindow{limit: limit, window: time.Hour}
	var fixed []time.Time
	for _, at := range bursts[:2] {
		for range limit {
			if fw.allow(at, 1) {
				fixed = append(fixed, at)
			}
		}
	}
	if len(fixed) != 2*limit {
		t.Fatalf("baseline: the fixed window admitted %d across the boundary; the story expects %d", len(fixed), 2*limit)
	}
	t.Logf("fixed-window counter: %d units admitted between 10:59 and 11:00 against a limit of %d per hour", len(fixed), limit)

	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			now := t0
			l, err := quota.New(newStore(t), "youtube", []quota.Budget{{Name: "units", Limit: limit, Window: quota.Sliding(time.Hour)}},
				quota.WithClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			key := quota.Credential{Secret: "AIza-story-key", Label: "story"}
			var admitted []time.Time
			for _, at := range bursts {
				now = at
				for range limit {
					_, err := l.Take(context.Background(), key, quota.Units("units", 1))
					switch {
					case err == nil:
						admitted = append(admitted, at)
					case !errors.Is(err, quota.ErrExhausted):
						t.Fatalf("Take at %v: %v", at, err)
					}
				}
			}
			// In every trailing hour ending at a burst, at most the limit.
			for _, end := range bursts {
				var n int
				for _, a := range admitted {
					if a.After(end.Add(-time.Hour)) && !a.After(end) {
						n++
					}
				}
				if n > limit {
					t.Fatalf("%d units admitted in the hour ending %v, limit %d", n, end, limit)
				}
			}
			// And not one unit less than the limit allows: 100 at 10:59, none
			// at 11:00 or 11:58:01, 100 again at 11:59 when the first burst
			// leaves the window.
			if len(admitted) != 2*limit || !admitted[0].Equal(bursts[0]) || !admitted[limit].Equal(bursts[3]) {
				t.Fatalf("admitted %d units (first burst at %v, second at %v); want %d at 10:59 and %d at 11:59",
					len(admitted), admitted[0], admitted[min(limit, len(admitted)-1)], limit, limit)
			}
		})
	}
}

// TestWeightedCosts: a limiter that counts requests approves a 100-unit
// search like a 1-unit list and walks into the upstream's lockout; the quota
// limiter prices each call.
func TestWeightedCosts(t *testing.T) {
	const limit = 1000 // units per hour
	calls := []int64{100, 100, 1, 100, 100, 100, 100, 100, 100, 1, 100, 100, 100, 50}
	var spentByRequestCounter int64
	rc := &fixedWindow{limit: 20, window: time.Hour} // "20 requests per hour"
	for _, c := range calls {
		if rc.allow(time.Time{}, 1) {
			spentByRequestCounter += c
		}
	}
	if spentByRequestCounter <= limit {
		t.Fatalf("baseline: the request counter spent %d units, the story expects it to overspend %d", spentByRequestCounter, limit)
	}
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
			l, _ := quota.New(newStore(t), "youtube", []quota.Budget{{Name: "units", Limit: limit, Window: quota.Sliding(time.Hour)}},
				quota.WithClock(func() time.Time { return now }))
			key := quota.Credential{Secret: "AIza-story-key"}
			var spent int64
			var refused []int64
			for _, c := range calls {
				now = now.Add(time.Second)
				if _, err := l.Take(context.Background(), key, quota.Units("units", c)); err == nil {
					spent += c
				} else if errors.Is(err, quota.ErrExhausted) {
					refused = append(refused, c)
				} else {
					t.Fatal(err)
				}
			}
			// 100x9 + 1 + 1 = 902 … then 100 refused, 100 refused, 50 admitted.
			if spent > limit || spent != 952 || len(refused) != 2 {
				t.Fatalf("spent %d of %d, refused %v; want 952 spent and two 100-unit calls refused", spent, limit, refused)
			}
		})
	}
}
