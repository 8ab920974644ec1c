package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/internal/ytsim"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota/storeurl"
)

func la(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// testConfig returns a config on a fresh SQLite file and output file in a
// temporary directory, on clock.
func testConfig(t *testing.T, clock *testkit.Clock) config {
	t.Helper()
	dir := t.TempDir()
	return config{
		store:    storeurl.SQLiteURL(filepath.Join(dir, "quota.db")),
		out:      filepath.Join(dir, "trending.jsonl"),
		headroom: 10,
		clock:    clock.Now,
	}
}

func openApp(t *testing.T, cfg config, progress, logs *testkit.Buffer) *app {
	t.Helper()
	a, err := open(context.Background(), cfg, progress, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// lines reads the JSON lines output.
func lines(t *testing.T, path string) []item {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []item
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var it item
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			t.Fatalf("bad output line %q: %v", sc.Text(), err)
		}
		out = append(out, it)
	}
	return out
}

// TestSimulatedDay runs the job every 15 minutes for a day (96 ticks, one
// RunOnce each, as system cron would) against the simulator, with no
// headroom: the meter alone keeps the job inside the upstream's 40 units,
// so the upstream never refuses a request, and the units the meter charged
// are exactly what the upstream counted.
func TestSimulatedDay(t *testing.T) {
	t.Parallel()
	// 18:00 in Los Angeles: midnight, when YouTube's quota resets, is the 25th tick.
	clock := testkit.NewClock(time.Date(2026, 3, 10, 18, 0, 0, 0, la(t)))
	cfg := testConfig(t, clock)
	cfg.headroom = 0
	var progress, logs testkit.Buffer
	a := openApp(t, cfg, &progress, &logs)
	defer a.Close()
	ctx := context.Background()

	var outcomes []jobs.Outcome
	var spentUnits, spentSearch int64
	for tick := range 96 {
		rec, err := a.sched.RunOnce(ctx, "trending")
		if err != nil {
			t.Fatalf("tick %d: %v", tick, err)
		}
		outcomes = append(outcomes, rec.Outcome)
		spentUnits += rec.Spent[simAPI+"/units"]
		spentSearch += rec.Spent[simAPI+"/search"]
		clock.Add(15 * time.Minute)
	}

	// Day 1, 40 units: tick 1 fetches all 8 regions (32 pages), tick 2 the 8
	// pages of US and GB, then stops at DE; the rest of the day waits for
	// capacity without starting a run. After midnight: DE to CA (24 pages),
	// then US to FR (16), stop, and wait again.
	var want []jobs.Outcome
	for tick := range 96 {
		switch tick {
		case 0, 24:
			want = append(want, jobs.OK)
		case 1, 25:
			want = append(want, jobs.Exhausted)
		default:
			want = append(want, jobs.Waiting)
		}
	}
	if !slices.Equal(outcomes, want) {
		t.Errorf("outcomes per tick:\n%v\nwant\n%v", outcomes, want)
	}

	// The upstream never refused: every request it received, it charged.
	for _, b := range []string{"units", "search"} {
		if got, charged := a.sim.Received(simKey, b), a.sim.Charged(simKey, b); got != charged {
			t.Errorf("%s: upstream received %d requests but charged %d: it refused some", b, got, charged)
		}
	}
	if strings.Contains(logs.String(), "quotaExceeded") || strings.Contains(logs.String(), "level=WARN") || strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("warnings logged:\n%s", logs.String())
	}
	// The meter charged what the upstream counted.
	if got, want := spentUnits, a.sim.Charged(simKey, "units"); got != want || got != 80 {
		t.Errorf("meter charged %d units, upstream counted %d; want 80 both", got, want)
	}
	if got, want := spentSearch, a.sim.Charged(simKey, "search"); got != want || got != 20 {
		t.Errorf("meter charged %d searches, upstream counted %d; want 20 both", got, want)
	}

	// The history shows the runs that started, newest first: the ticks
	// that waited for capacity left no record.
	h, err := jobs.History(ctx, a.state, "trending", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 4 {
		t.Fatalf("history has %d runs, want 4", len(h))
	}
	for i, r := range h {
		tick := []int{25, 24, 1, 0}[i]
		if r.Outcome != want[tick] || !r.Start.Equal(time.Date(2026, 3, 10, 18, 0, 0, 0, la(t)).Add(time.Duration(tick)*15*time.Minute)) {
			t.Errorf("history[%d] = %s at %v, want tick %d: %s", i, r.Outcome, r.Start, tick, want[tick])
		}
		if r.Outcome == jobs.Exhausted && (r.Exhausted == nil || r.Exhausted.Budget != simAPI+"/units" || r.Exhausted.Left != 0) {
			t.Errorf("tick %d exhausted on %+v", tick, r.Exhausted)
		}
	}
	// Capacity returns at midnight in Los Angeles.
	if got, want := h[2].Exhausted.RetryAt, time.Date(2026, 3, 11, 0, 0, 0, 0, la(t)); !got.Equal(want) {
		t.Errorf("tick 2 says capacity returns %v, want %v", got, want)
	}
	if n := strings.Count(logs.String(), "waiting for capacity"); n != 2 {
		t.Errorf("%d log lines about waiting for capacity, want 2 (one per window):\n%s", n, logs.String())
	}

	// After midnight the job resumed where it stopped, at DE.
	if !strings.Contains(progress.String(), "resuming at DE page 1") {
		t.Errorf("no resume at DE in the progress:\n%s", progress.String())
	}
	cp, found, err := jobs.LoadCheckpoint(ctx, a.state, "trending")
	if err != nil || !found || string(cp.Cursor) != `{"region":"IN","page":0}` {
		t.Errorf("checkpoint %s, %v, %v; want IN page 0", cp.Cursor, found, err)
	}
	// Each page fetched is 50 lines of output.
	if got, want := len(lines(t, cfg.out)), 50*int(a.sim.Requests()); got != want {
		t.Errorf("%d output lines, want %d (50 per request)", got, want)
	}
}

// TestSeparateProcesses: three runs, each a fresh program (store handle,
// simulator, limiter, scheduler) on the same store file, as three `go run`
// would be. They share the budget and resume from the checkpoint, and
// together write each item once.
func TestSeparateProcesses(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Date(2026, 6, 2, 10, 0, 0, 0, la(t)))
	cfg := testConfig(t, clock)
	runOnce := func(headroom int64) (jobs.Record, string, int64) {
		t.Helper()
		cfg.headroom = headroom
		var progress, logs testkit.Buffer
		a := openApp(t, cfg, &progress, &logs)
		defer a.Close()
		rec, err := a.sched.RunOnce(context.Background(), "trending")
		if err != nil {
			t.Fatal(err)
		}
		clock.Add(time.Minute)
		return rec, progress.String(), a.sim.Requests()
	}

	// Run 1, 30 units metered (40 less 10 headroom): 7 regions and 2 pages of CA.
	rec, out, sent := runOnce(10)
	if rec.Outcome != jobs.Exhausted || rec.Spent[simAPI+"/units"] != 30 || sent != 37 {
		t.Errorf("run 1: %s, spent %v, %d requests", rec.Outcome, rec.Spent, sent)
	}
	if !strings.Contains(out, "AU  200 trending videos, 50 search results") ||
		!strings.Contains(out, "CA  100 trending videos, then out of budget: the next run resumes at CA page 3") {
		t.Errorf("run 1 progress:\n%s", out)
	}
	// Run 2: nothing left; it does not start, and sends no request.
	rec, out, sent = runOnce(10)
	if rec.Outcome != jobs.Waiting || len(rec.Spent) != 0 || sent != 0 || strings.Contains(out, "resuming") {
		t.Errorf("run 2: %s, spent %v, %d requests sent:\n%s", rec.Outcome, rec.Spent, sent, out)
	}
	// Run 3 releases the headroom: it resumes at CA page 3 and finishes.
	rec, out, sent = runOnce(0)
	if rec.Outcome != jobs.OK || rec.Spent[simAPI+"/units"] != 2 || sent != 3 || !strings.Contains(out, "all 8 regions done") {
		t.Errorf("run 3: %s, spent %v, %d requests:\n%s", rec.Outcome, rec.Spent, sent, out)
	}

	// One full cycle, each item exactly once.
	seen := map[string]int{}
	for _, it := range lines(t, cfg.out) {
		seen[fmt.Sprint(it.Region, it.Source, it.Rank)]++
	}
	if len(seen) != 8*250 {
		t.Errorf("%d distinct items, want %d", len(seen), 8*250)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("item %s written %d times", k, n)
		}
	}
}

// TestRealUpstreamMode points --upstream at a simulator standing in for the
// real API: the key comes from the environment, the budgets are the cost
// table's ("youtube", 10,000 units a day less the headroom).
func TestRealUpstreamMode(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 6, 2, 10, 0, 0, 0, la(t)))
	upstream := ytsim.New(ytsim.WithClock(clock.Now), ytsim.WithKeys("real-looking-key"))
	defer upstream.Close()
	t.Setenv("TEST_YT_KEY", "real-looking-key")
	cfg := testConfig(t, clock)
	// As people write it, with a trailing slash: the same base URL.
	cfg.upstream, cfg.keyEnv, cfg.headroom = upstream.URL()+"/", "TEST_YT_KEY", 500
	var progress, logs testkit.Buffer
	a := openApp(t, cfg, &progress, &logs)
	defer a.Close()
	if a.sim != nil || a.limiter.API() != "youtube" || a.limiter.Budgets()[0].Limit != 9500 {
		t.Errorf("api %q, budgets %+v", a.limiter.API(), a.limiter.Budgets())
	}
	rec, err := a.sched.RunOnce(context.Background(), "trending")
	if err != nil || rec.Outcome != jobs.OK || rec.Spent["youtube/units"] != 32 || upstream.Charged("real-looking-key", "units") != 32 {
		t.Errorf("run: %v, %+v", err, rec)
	}
	if strings.Contains(progress.String()+logs.String(), "real-looking-key") {
		t.Error("the API key appears in the output")
	}
}

func TestConfigErrors(t *testing.T) {
	clock := testkit.NewClock(time.Now())
	t.Setenv("EMPTY_KEY", "")
	t.Setenv("A_KEY", "k")
	for _, tc := range []struct {
		name string
		edit func(*config)
		want string
	}{
		{"key without upstream", func(c *config) { c.keyEnv = "YT_KEY" }, "--api-key-env needs --upstream"},
		{"upstream without key", func(c *config) { c.upstream = "http://127.0.0.1:1" }, "--api-key-env VAR"},
		{"empty key", func(c *config) { c.upstream, c.keyEnv = "http://127.0.0.1:1", "EMPTY_KEY" }, "--api-key-env VAR"},
		{"upstream without scheme", func(c *config) { c.upstream, c.keyEnv = "www.googleapis.com", "A_KEY" }, `--upstream "www.googleapis.com": want a base URL such as https://www.googleapis.com`},
		{"upstream bad host", func(c *config) { c.upstream, c.keyEnv = "https://*.googleapis.com", "A_KEY" }, "wildcards are not supported"},
		{"upstream with a query", func(c *config) { c.upstream, c.keyEnv = "https://www.googleapis.com/?alt=json", "A_KEY" }, `--upstream "https://www.googleapis.com/?alt=json": want a base URL`},
		{"headroom too big", func(c *config) { c.headroom = 40 }, "--headroom 40: must be from 0 to less than youtube-sim/units' limit of 40"},
		{"negative headroom", func(c *config) { c.headroom = -1 }, "--headroom -1"},
		{"bad schedule", func(c *config) { c.schedule = "every tuesday" }, "schedule"},
		{"bad store", func(c *config) { c.store = "ftp://x" }, "storeurl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, clock)
			tc.edit(&cfg)
			var w testkit.Buffer
			_, err := open(context.Background(), cfg, &w, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestScheduleMode: with --schedule, run blocks in the scheduler until its
// context is done, then stops cleanly.
func TestScheduleMode(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Date(2026, 6, 2, 10, 7, 0, 0, time.Local))
	cfg := testConfig(t, clock)
	cfg.schedule = "*/15 * * * *"
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // as if Ctrl-C came at once
	var stdout, stderr testkit.Buffer
	if err := run(ctx, cfg, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), `schedule "*/15 * * * *": next run 10:15:00`) || !strings.Contains(stderr.String(), "scheduler stopped") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}
