package quota_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// Google bills YouTube quota per Cloud project: every key of one project
// shares its 10,000 units. Name the owner on each credential, or, with
// WithOwner, for every credential a limiter sees.
func ExampleWithOwner() {
	la, _ := time.LoadLocation("America/Los_Angeles")
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, la) // a fixed clock, for the example's output
	clock := quota.WithClock(func() time.Time { return now })
	store := quota.NewMemoryStore()
	budgets := []quota.Budget{{Name: "units", Limit: 10000, Window: quota.Daily(la)}}
	ctx := context.Background()

	k1 := quota.Credential{Secret: "AIza...1", Label: "yt-key-1", Owner: "acme-ingest"}
	k2 := quota.Credential{Secret: "AIza...2", Label: "yt-key-2", Owner: "acme-ingest"}
	limiter, err := quota.New(store, "youtube", budgets, clock)
	if err != nil {
		panic(err)
	}
	if _, err := limiter.Take(ctx, k1, quota.Units("units", 6000)); err != nil {
		panic(err)
	}
	_, err = limiter.Take(ctx, k2, quota.Units("units", 6000)) // the same project's units
	var exhausted *quota.ExhaustedError
	if errors.As(err, &exhausted) {
		fmt.Printf("%s refused: %d of %d used\n", exhausted.Credential, exhausted.Used, exhausted.Limit)
	}

	// Or, for every credential a limiter sees that names no owner itself:
	shared, err := quota.New(store, "youtube", budgets, clock, quota.WithOwner("acme-ingest"))
	if err != nil {
		panic(err)
	}
	res, err := shared.Take(ctx, quota.Credential{Secret: "AIza...3", Label: "yt-key-3"}, quota.Units("units", 1))
	if err != nil {
		panic(err)
	}
	fmt.Println("acme-ingest units left:", res.Remaining("units"))
	// Output:
	// yt-key-2 refused: 6000 of 10000 used
	// acme-ingest units left: 3999
}

// When the real cost is known only afterwards (the tokens an LLM used, a
// page that came back short), take the most it can cost, then settle: the
// entry shrinks to what was spent and the rest is free again.
func ExampleReservation_Settle() {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC) // a fixed clock, for the example's output
	limiter, err := quota.New(quota.NewMemoryStore(), "openai", []quota.Budget{
		{Name: "tokens", Limit: 30000, Window: quota.Sliding(time.Minute)},
	}, quota.WithClock(func() time.Time { return now }))
	if err != nil {
		panic(err)
	}
	key := quota.Credential{Secret: "sk-...", Label: "summarizer"}
	ctx := context.Background()

	res, err := limiter.Take(ctx, key, quota.Charge{Method: "chat.completions", Units: map[string]int64{"tokens": 4000}})
	if err != nil {
		panic(err)
	}
	fmt.Println("reserved the most it can cost; left:", res.Remaining("tokens"))
	used := int64(1250) // what the response says it used
	if err := res.Settle(ctx, used); err != nil {
		panic(err)
	}
	fmt.Println("settled; left:", res.Remaining("tokens"))
	// Output:
	// reserved the most it can cost; left: 26000
	// settled; left: 28750
}

// A YouTube project that passed a quota audit has 1,000,000 units a day,
// the others 10,000: give the audited owner its own limit. A smaller limit
// the upstream reports (LearnLimit, which the Transport calls) applies at
// once; a larger one only with WithLearnedRaises.
func ExampleWithOwnerLimits() {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC) // a fixed clock, for the example's output
	store := quota.NewMemoryStore()
	units := quota.Budget{Name: "units", Limit: 10_000, Window: quota.Daily(time.UTC)}
	limiter, err := quota.New(store, "youtube", []quota.Budget{units},
		quota.WithClock(func() time.Time { return now }),
		quota.WithOwnerLimits(map[string]map[string]int64{"audited-project": {"units": 1_000_000}}))
	if err != nil {
		panic(err)
	}
	audited := quota.Credential{Secret: "AIza...a", Label: "audited-key", Owner: "audited-project"}
	res, err := limiter.Take(ctx, audited, quota.Units("units", 50_000))
	if err != nil {
		panic(err)
	}
	fmt.Println("audited-project units left:", res.Remaining("units"))

	applied, err := limiter.LearnLimit(ctx, "audited-project", "units", 900_000)
	if err != nil {
		panic(err)
	}
	limit, err := limiter.LimitOf(ctx, "audited-project", "units")
	if err != nil {
		panic(err)
	}
	fmt.Println("learned 900000 applied:", applied, "- limit", limit.Limit, "from the", limit.Source)
	// Output:
	// audited-project units left: 950000
	// learned 900000 applied: true - limit 900000 from the upstream
}
