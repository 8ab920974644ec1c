package view

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// t0 is the tests' now: 09:30 in Los Angeles.
var t0 = time.Date(2026, 11, 22, 17, 30, 0, 0, time.UTC)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestPercent: the share of the limit that cannot be spent, rounded down;
// a budget marked spent is 100% whatever its entries add up to.
func TestPercent(t *testing.T) {
	for _, tt := range []struct {
		name string
		u    quota.Usage
		want int64
	}{
		{"empty", quota.Usage{Limit: 10000, Remaining: 10000}, 0},
		{"97.6% is 97", quota.Usage{Limit: 10000, Used: 9760, Remaining: 240}, 97},
		{"used up", quota.Usage{Limit: 100, Used: 100}, 100},
		{"over the limit (lowered by an operator)", quota.Usage{Limit: 100, Used: 150}, 100},
		{"marked spent at 25%", quota.Usage{Limit: 10000, Used: 2500, Remaining: 0, ExhaustedUntil: t0.Add(time.Hour)}, 100},
		{"no limit", quota.Usage{}, 0},
	} {
		if got := Percent(tt.u); got != tt.want {
			t.Errorf("%s: Percent = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestResetSeconds: whole seconds rounded up, never 0 while capacity is
// still to come back; a mark holds capacity back until it ends.
func TestResetSeconds(t *testing.T) {
	la := zone(t, "America/Los_Angeles")
	now := t0.Add(400 * time.Millisecond)
	for _, tt := range []struct {
		name string
		u    quota.Usage
		want float64
	}{
		{"daily: the next midnight", quota.Usage{Window: quota.Daily(la), Reset: time.Date(2026, 11, 23, 0, 0, 0, 0, la)}, 14*3600 + 30*60},
		{"monthly: the next 1st", quota.Usage{Window: quota.Monthly(la), Reset: time.Date(2026, 12, 1, 0, 0, 0, 0, la)}, 8*24*3600 + 14*3600 + 30*60},
		{"sliding: the oldest entry leaves in 0.2s", quota.Usage{Window: quota.Sliding(time.Hour), Reset: now.Add(200 * time.Millisecond)}, 1},
		{"sliding: in 10m exactly", quota.Usage{Window: quota.Sliding(time.Hour), Reset: now.Add(10 * time.Minute)}, 600},
		{"sliding, marked spent for 3h", quota.Usage{Window: quota.Sliding(time.Hour), Reset: now.Add(10 * time.Minute), ExhaustedUntil: now.Add(3 * time.Hour)}, 3 * 3600},
		{"empty, marked spent", quota.Usage{Window: quota.Sliding(time.Hour), ExhaustedUntil: now.Add(time.Hour + time.Nanosecond)}, 3601},
		{"empty", quota.Usage{Window: quota.Sliding(time.Hour)}, 0},
		{"already past", quota.Usage{Window: quota.Sliding(time.Hour), Reset: now.Add(-time.Second)}, 0},
	} {
		if got := ResetSeconds(tt.u, now); got != tt.want {
			t.Errorf("%s: ResetSeconds = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestEvery: one bucket picker for every tool: at most 24 buckets of a
// round length, whole hours from an hour on.
func TestEvery(t *testing.T) {
	la := zone(t, "America/Los_Angeles")
	for _, tt := range []struct {
		w    quota.Window
		want time.Duration
	}{
		{quota.Daily(la), time.Hour},
		{quota.Monthly(la), 24 * time.Hour}, // a day a bucket: 28 to 31
		{quota.Sliding(24 * time.Hour), time.Hour},
		{quota.Sliding(time.Hour), 5 * time.Minute},
		{quota.Sliding(6 * time.Hour), 15 * time.Minute},
		{quota.Sliding(7 * 24 * time.Hour), 12 * time.Hour},
		{quota.Sliding(10 * time.Second), time.Second},
		{quota.Sliding(60 * 24 * time.Hour), 60 * time.Hour},
		{quota.Sliding(25*24*time.Hour + time.Second), 26 * time.Hour},
	} {
		if got := Every(tt.w); got != tt.want {
			t.Errorf("Every(%v) = %v, want %v", tt.w, got, tt.want)
		}
	}
}

// TestFirstBucket: bucket edges fall on the clock of the chart's zone.
func TestFirstBucket(t *testing.T) {
	la, kathmandu := zone(t, "America/Los_Angeles"), zone(t, "Asia/Kathmandu") // UTC+5:45
	hour := quota.Sliding(time.Hour)
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tt := range []struct {
		name  string
		w     quota.Window
		from  string
		every time.Duration
		loc   *time.Location
		want  string
	}{
		{"daily: its midnight", quota.Daily(la), "2026-11-22T08:00:00Z", 7 * time.Minute, la, "2026-11-22T08:00:00Z"},
		{"5m in UTC", hour, "2026-11-22T08:35:00.000001Z", 5 * time.Minute, time.UTC, "2026-11-22T08:35:00Z"},
		{"15m in UTC", hour, "2026-11-22T08:35:00.000001Z", 15 * time.Minute, time.UTC, "2026-11-22T08:30:00Z"},
		{"15m on Kathmandu's quarters", hour, "2026-11-22T08:35:00.000001Z", 15 * time.Minute, kathmandu, "2026-11-22T08:30:00Z"},
		{"1h on Kathmandu's hours", hour, "2026-11-22T08:35:00.000001Z", time.Hour, kathmandu, "2026-11-22T08:15:00Z"},
		{"7m as time.Truncate", hour, "2026-11-22T08:35:00.000001Z", 7 * time.Minute, la, "2026-11-22T08:29:00Z"},
		// 01:30 PST, the second 01:xx of the day clocks fall back.
		{"the repeated hour", quota.Sliding(24 * time.Hour), "2026-11-01T09:30:00Z", time.Hour, la, "2026-11-01T09:00:00Z"},
	} {
		if got := firstBucket(tt.w, at(tt.from), tt.every, tt.loc); !got.Equal(at(tt.want)) {
			t.Errorf("%s: first bucket %v, want %s", tt.name, got.UTC(), tt.want)
		}
	}
}

// TestOwners: one account per owner, named once for every tool, uniquely
// within the API.
func TestOwners(t *testing.T) {
	fp := func(s string) string { return quota.DefaultFingerprint(s) }
	k1, k3, old, rotated, bare := fp("secret-k1"), fp("secret-k3"), fp("secret-old"), fp("secret-new"), fp("secret-bare")
	got := Owners([]quota.CredentialInfo{
		{ID: k1, Label: "k1", Owner: k1},               // its own owner, labelled as a project is named
		{ID: k3, Label: "k3", Owner: "k1"},             // the project k1
		{ID: rotated, Label: "rot", Owner: old},        // a rotated key: the old key's account
		{ID: old, Owner: old},                          // the old key, unlabelled since
		{ID: bare, Owner: bare},                        // no label
		{ID: fp("secret-k4"), Label: "a", Owner: "k1"}, // the project's other key
	})
	names := map[string]string{}
	for _, o := range got {
		names[o.Account] = o.Name
	}
	want := map[string]string{"k1": "k1", k1: k1[:8], old: old[:8], bare: bare[:8]}
	if len(names) != len(want) {
		t.Fatalf("owners %+v", got)
	}
	for acct, name := range want {
		if names[acct] != name {
			t.Errorf("account %s named %q, want %q", acct, names[acct], name)
		}
	}
	i := slices.IndexFunc(got, func(o Owner) bool { return o.Account == "k1" })
	if c := got[i].Credentials; len(c) != 2 || c[0].Label != "a" || c[1].Label != "k3" {
		t.Errorf("project k1's credentials %+v: labelled first, by label", c)
	}
	i = slices.IndexFunc(got, func(o Owner) bool { return o.Account == old })
	if c := got[i].Credentials; len(c) != 2 || c[0].Label != "rot" {
		t.Errorf("the rotated account's credentials %+v", c)
	}
	if !slices.IsSortedFunc(got, func(a, b Owner) int { return compareStrings(a.Account, b.Account) }) {
		t.Errorf("owners not sorted by account")
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// world is a memory store with two owners of youtube, one of them marked
// spent, and github defined but never charged.
func world(t *testing.T) (*Reader, *quota.Limiter) {
	t.Helper()
	la := zone(t, "America/Los_Angeles")
	now := t0
	clock := func() time.Time { return now }
	st := quota.NewMemoryStore()
	l, err := quota.New(st, "youtube", []quota.Budget{
		{Name: "units", Limit: 10000, Window: quota.Daily(la)},
		{Name: "search", Limit: 100, Window: quota.Sliding(time.Hour)},
	}, quota.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k1 := quota.Credential{Secret: "AIza-one", Label: "yt-key-1"}
	k2 := quota.Credential{Secret: "AIza-two", Label: "yt-key-2", Owner: "proj"}
	take := func(c quota.Credential, at time.Time, method string, units map[string]int64) {
		t.Helper()
		now = at
		if _, err := l.Take(ctx, c, quota.Charge{Method: method, Units: units}); err != nil {
			t.Fatal(err)
		}
	}
	take(k1, t0.Add(-8*time.Hour), "videos.list", map[string]int64{"units": 4000})
	take(k1, t0.Add(-50*time.Minute), "search.list", map[string]int64{"search": 1, "units": 100})
	take(k1, t0.Add(-10*time.Minute), "videos.insert", map[string]int64{"units": 5600})
	take(k2, t0.Add(-2*time.Hour), "videos.list", map[string]int64{"units": 2500})
	now = t0
	if err := l.Exhaust(ctx, k2, "units", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := st.DefineBudgets(ctx, "github", []quota.Budget{{Name: "core", Limit: 5000, Window: quota.Sliding(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	return New(st, WithClock(clock), WithLocation(time.UTC)), l
}

// TestStatusRows: one row per owner and budget, sorted by API, owner name
// and budget, with the rules' figures; an API never charged has whole rows.
func TestStatusRows(t *testing.T) {
	r, _ := world(t)
	ctx := context.Background()
	apis, err := r.APIs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := r.Status(ctx, apis...)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		api, owner, budget   string
		used, remaining, pct int64
		reset                float64
		spent                bool
	}
	var got []row
	for _, s := range rows {
		got = append(got, row{s.API, s.OwnerName, s.Budget, s.Used, s.Remaining, s.Percent, s.ResetSeconds, s.Spent()})
	}
	want := []row{
		{"github", "", "core", 0, 5000, 0, 0, false},
		{"youtube", "proj", "search", 0, 100, 0, 0, false},
		{"youtube", "proj", "units", 2500, 0, 100, 14*3600 + 30*60, true},
		{"youtube", "yt-key-1", "search", 1, 99, 1, 600, false},
		{"youtube", "yt-key-1", "units", 9700, 300, 97, 14*3600 + 30*60, false},
	}
	if !slices.Equal(got, want) {
		t.Errorf("rows:\n%+v\nwant:\n%+v", got, want)
	}
	for _, s := range rows {
		if u := s.Usage(); Percent(u) != s.Percent || u.Window.String() != s.Window {
			t.Errorf("%s/%s: Usage() %+v does not give the row back", s.API, s.Budget, u)
		}
	}
}

// TestHistoryBuckets: buckets on the budget zone's hours, adding up to the
// window's entries, stacked by method; a bucket length that makes too many
// buckets is refused.
func TestHistoryBuckets(t *testing.T) {
	r, l := world(t)
	ctx := context.Background()
	b := l.Budgets()[0]
	if b.Name != "units" {
		t.Fatalf("budgets %v", l.Budgets())
	}
	acct := quota.DefaultFingerprint("AIza-one")
	h, err := r.History(ctx, "youtube", acct, b, 0)
	if err != nil {
		t.Fatal(err)
	}
	// 00:00 to 09:30 in Los Angeles: 10 hourly buckets.
	if h.Zone != "America/Los_Angeles" || h.EverySeconds != 3600 || len(h.Buckets) != 10 || h.Used != 9700 {
		t.Fatalf("history %+v", h)
	}
	var sum int64
	for _, bk := range h.Buckets {
		sum += bk.Units
	}
	if sum != h.Used || h.Buckets[1].Units != 4000 || h.Buckets[8].Methods["search.list"] != 100 || h.Buckets[9].Methods["videos.insert"] != 5600 ||
		h.Methods["videos.list"] != 4000 {
		t.Errorf("buckets %+v, methods %v", h.Buckets, h.Methods)
	}
	var tooMany *TooManyBucketsError
	if _, err := r.History(ctx, "youtube", acct, b, time.Second); !errors.As(err, &tooMany) || tooMany.Buckets <= MaxBuckets {
		t.Errorf("1s buckets over a day: %v", err)
	}
}

// TestStatusDrift: what true-ups added in a budget's current window is the
// row's drift; a true-up of a window that has since moved on is not.
func TestStatusDrift(t *testing.T) {
	r, l := world(t)
	ctx := context.Background()
	k1 := quota.Credential{Secret: "AIza-one", Label: "yt-key-1"}
	// the upstream counts 9,900 of the day's units; the store 9,700
	out, err := l.TrueUp(ctx, k1, quota.Report{Budget: "units", Used: 9900, Remaining: -1, Reset: t0.Add(time.Hour)})
	if err != nil || out.Added != 200 {
		t.Fatalf("TrueUp: %+v, %v", out, err)
	}
	apis, err := r.APIs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := r.Status(ctx, apis...)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, s := range rows {
		got[s.OwnerName+"/"+s.Budget] = s.Drift
	}
	want := map[string]int64{"yt-key-1/units": 200, "yt-key-1/search": 0, "proj/units": 0, "proj/search": 0, "/core": 0}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("drift of %s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}

// TestMonthlyHistory: a monthly budget's chart counts days from the 1st's
// midnight in the budget's own zone, whatever the display zone, with the
// entries of the month in their days.
func TestMonthlyHistory(t *testing.T) {
	paris := zone(t, "Europe/Paris")
	w := quota.Monthly(paris)
	if got := Zone(w, time.UTC); got != paris {
		t.Errorf("Zone = %v, want the budget's own", got)
	}
	st := quota.NewMemoryStore()
	now := t0 // November 22nd, 18:30 in Paris
	b := quota.Budget{Name: "tokens", Limit: 1000, Window: w}
	l, err := quota.New(st, "api", []quota.Budget{b}, quota.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "s", Label: "k"}
	for _, at := range []time.Time{time.Date(2026, 11, 1, 0, 0, 0, 0, paris), time.Date(2026, 11, 21, 23, 59, 0, 0, paris), t0} {
		now = at
		if _, err := l.Take(context.Background(), cred, quota.Units("tokens", 10)); err != nil {
			t.Fatal(err)
		}
	}
	r := New(st, WithClock(func() time.Time { return now }), WithLocation(time.UTC))
	h, err := r.History(context.Background(), "api", quota.DefaultFingerprint("s"), b, 0)
	if err != nil {
		t.Fatal(err)
	}
	first := time.Date(2026, 11, 1, 0, 0, 0, 0, paris)
	if h.EverySeconds != 24*3600 || h.Zone != "Europe/Paris" || !h.From.Equal(first) || len(h.Buckets) != 22 || h.Used != 30 {
		t.Fatalf("history: every %vs zone %s from %v, %d buckets, used %d", h.EverySeconds, h.Zone, h.From, len(h.Buckets), h.Used)
	}
	for i, want := range map[int]int64{0: 10, 20: 10, 21: 10, 10: 0} {
		if got := h.Buckets[i].Units; got != want {
			t.Errorf("bucket %d (%v): %d units, want %d", i, h.Buckets[i].Start.In(paris), got, want)
		}
	}
}
