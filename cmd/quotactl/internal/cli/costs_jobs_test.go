package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

func TestCostsShow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tty = true
	out := e.ok("costs", "show")
	for _, want := range []string{"TABLE", "youtube-legacy", "units=10000 search=100 uploads=100 stats=10000"} {
		if !strings.Contains(out, want) {
			t.Errorf("costs show does not list %q:\n%s", want, out)
		}
	}
	out = e.ok("costs", "show", "youtube")
	for _, want := range []string{"Cost table youtube for API youtube", "Hosts: www.googleapis.com, youtube.googleapis.com, youtube.mtls.googleapis.com\n",
		"search   100    daily:America/Los_Angeles", "GET /youtube/v3/search"} {
		if !strings.Contains(out, want) {
			t.Errorf("costs show youtube does not say %q:\n%s", want, out)
		}
	}
	if !regexpLine(out, `^search\.list\s+search=1\s+GET /youtube/v3/search$`) || !regexpLine(out, `^captions\.update\s+units=450\s`) {
		t.Errorf("costs show youtube: method lines wrong:\n%s", out)
	}
	legacy := e.ok("costs", "show", "--table", "youtube-legacy")
	if !regexpLine(legacy, `^search\.list\s+units=100\s`) {
		t.Errorf("legacy table: search.list is not 100 units:\n%s", legacy)
	}

	var shown struct {
		Table, API string
		Hosts      []string
		Budgets    []quota.Budget
		Methods    []costs.Method
	}
	decode(t, e.ok("--json", "costs", "show", "youtube"), &shown)
	tb, _ := costs.Builtin("youtube")
	if shown.Table != "youtube" || shown.API != "youtube" || len(shown.Hosts) != 3 || len(shown.Budgets) != 4 || len(shown.Methods) != len(tb.Methods()) {
		t.Errorf("costs show --json: %s/%s, hosts %q, %d budgets, %d methods", shown.Table, shown.API, shown.Hosts, len(shown.Budgets), len(shown.Methods))
	}

	// A table file; a bad one names its line and field.
	dir := t.TempDir()
	good := filepath.Join(dir, "vimeo.yaml")
	os.WriteFile(good, []byte("api: vimeo\nbudgets:\n  - {name: calls, limit: 1000, window: sliding:1h}\nmethods:\n  videos.get: {routes: [\"GET /videos/{id}\"], cost: {calls: 1}}\n"), 0o600)
	out = e.ok("costs", "show", "vimeo", "--table", good)
	if !regexpLine(out, `^videos\.get\s+calls=1\s+GET /videos/\{id\}$`) || !strings.Contains(out, "Hosts: any (the table names none)\n") {
		t.Errorf("costs show --table FILE:\n%s", out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("api: vimeo\nbudgets:\n  - {name: calls, limit: 1000, window: sliding:1h}\nmethods:\n  videos.get: {routes: [\"GET /videos/{id}\"], cost: {cals: 1}}\n"), 0o600)
	r := e.run("costs", "show", "--table", bad)
	if r.code != ExitUsage {
		t.Errorf("bad table: exit %d", r.code)
	}
	oneLine(t, r.errOut, "bad.yaml:5", "cals")
	r = e.run("costs", "show", "youtube", "--table", good)
	if r.code != ExitUsage {
		t.Errorf("table of another API: exit %d", r.code)
	}
	oneLine(t, r.errOut, `is for API "vimeo", not "youtube"`)
}

// TestCostsShowOwnerDeprecated: costs show says what the budgets are kept
// per (the table's owner kind, "project" for YouTube) and which methods are
// deprecated upstream, in JSON, on a terminal and piped.
func TestCostsShowOwnerDeprecated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type shownJSON struct {
		Owner   *string
		Methods []costs.Method
	}
	for _, name := range []string{"youtube", "youtube-2025-12", "youtube-legacy"} {
		var shown shownJSON
		decode(t, e.ok("--json", "costs", "show", "--table", name), &shown)
		if shown.Owner == nil || *shown.Owner != "project" {
			t.Errorf("costs show --table %s --json: owner %v, want \"project\"", name, shown.Owner)
		}
		found := false
		for _, m := range shown.Methods {
			if m.Name == "comments.markAsSpam" {
				found = true
				if !strings.Contains(m.Deprecated, "no longer supported") {
					t.Errorf("costs show --table %s --json: comments.markAsSpam deprecated %q", name, m.Deprecated)
				}
			} else if m.Deprecated != "" {
				t.Errorf("costs show --table %s --json: %s deprecated %q", name, m.Name, m.Deprecated)
			}
		}
		if !found {
			t.Errorf("costs show --table %s --json: no comments.markAsSpam", name)
		}
	}
	var list []struct{ Table, Owner string }
	decode(t, e.ok("--json", "costs", "show"), &list)
	owners := map[string]string{"anthropic": "organization", "openai": "project", "shopify-admin": "", "github": "user", "ratelimit-headers": ""}
	for _, l := range list {
		want, ok := owners[l.Table]
		if !ok {
			want = "project" // the YouTube tables
		}
		if l.Owner != want {
			t.Errorf("costs show --json: table %s owner %q, want %q", l.Table, l.Owner, want)
		}
	}

	// Piped: a column says what each budget is kept per; a deprecated
	// method's cost says so.
	out := e.ok("costs", "show", "youtube")
	if !strings.Contains(out, "units\t10000\tdaily:America/Los_Angeles\tproject\n") {
		t.Errorf("costs show youtube, piped: no owner kind in the budget rows:\n%s", out)
	}
	if !strings.Contains(out, "comments.markAsSpam\tunits=50 (deprecated)\tPOST /youtube/v3/comments/markAsSpam\n") ||
		!regexpLine(out, `^comments\.list\tunits=1\t`) {
		t.Errorf("costs show youtube, piped: deprecated method not marked (or another one marked):\n%s", out)
	}
	e.tty = true
	out = e.ok("costs", "show", "youtube")
	for _, want := range []string{
		"Owner: project (the budgets are kept per project: every credential of one project shares them)\n",
		"KEPT PER",
		"Deprecated upstream (a Transport refuses them; estimates still price them):\n  comments.markAsSpam: Google: 'This method has been deprecated and is no longer supported.'",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("costs show youtube does not say %q:\n%s", want, out)
		}
	}
	if !regexpLine(out, `^units\s+10000\s+daily:America/Los_Angeles\s+project$`) || !regexpLine(out, `^comments\.markAsSpam\s+units=50 \(deprecated\)\s+POST `) {
		t.Errorf("costs show youtube: budget or method lines wrong:\n%s", out)
	}

	// A table that names no owner kind: budgets per credential, no owner
	// in the JSON, and no deprecated methods.
	dir := t.TempDir()
	file := filepath.Join(dir, "vimeo.yaml")
	if err := os.WriteFile(file, []byte("api: vimeo\nbudgets:\n  - {name: calls, limit: 1000, window: sliding:1h}\nmethods:\n  videos.get: {routes: [\"GET /videos/{id}\"], cost: {calls: 1}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out = e.ok("costs", "show", "--table", file)
	if !strings.Contains(out, "Owner: none (the table names no owner kind: each credential has budgets of its own)\n") ||
		!regexpLine(out, `^calls\s+1000\s+sliding:1h0m0s\s+credential$`) ||
		strings.Contains(out, "Deprecated upstream") || strings.Contains(out, "(deprecated)") {
		t.Errorf("costs show of a table with no owner kind:\n%s", out)
	}
	var plain shownJSON
	decode(t, e.ok("--json", "costs", "show", "--table", file), &plain)
	if plain.Owner != nil {
		t.Errorf("costs show --json of a table with no owner kind: owner %q, want none", *plain.Owner)
	}
}

func regexpLine(text, re string) bool {
	for _, l := range strings.Split(text, "\n") {
		if matchString(re, l) {
			return true
		}
	}
	return false
}

func TestCostsEstimate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tb, err := costs.Builtin("youtube")
	if err != nil {
		t.Fatal(err)
	}
	// A service has used the table's budgets: 9,000 units and 95 searches.
	g, _, _ := e.g()
	l, err := quota.New(g.store, tb.API, tb.Budgets, quota.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "AIzaSy-key-one", Label: "yt-key-1"}
	ctx := context.Background()
	if _, err := l.Take(ctx, key, quota.Charge{Units: map[string]int64{"units": 9000, "search": 95}}); err != nil {
		t.Fatal(err)
	}

	// Fits: 500 units of 1000 left (2x the run), 2 searches of 5 (2.5x).
	var est estimateJSON
	decode(t, e.ok("--json", "costs", "estimate", "youtube", "videos.list=500", "search.list=2", "--label", "yt-key-1"), &est)
	if !est.Fits || est.RunsOutFirst != "units" || est.Credential != "yt-key-1" || len(est.Budgets) != 2 ||
		est.Budgets[0] != (estimateBudgetJSON{Budget: "units", Cost: 500, Left: 1000, Limit: 10000, After: 500, Fits: true, Unit: quota.DefaultUnit, Reset: est.Budgets[0].Reset}) ||
		est.Budgets[1].Budget != "search" || est.Budgets[1].After != 3 {
		t.Errorf("estimate that fits: %+v", est)
	}
	// The only credential is picked without --label; the terminal output
	// says what runs out first.
	e.tty = true
	out := e.ok("costs", "estimate", "youtube", "videos.list=500", "search.list=2")
	for _, want := range []string{"for yt-key-1", "units   500   1000  10000  500    yes", "Fits. Tightest budget: units (what is left pays for 2.0x the run)."} {
		if !strings.Contains(out, want) {
			t.Errorf("estimate output does not say %q:\n%s", want, out)
		}
	}

	// Does not fit: 10 searches, 5 left. Exit 3 names the budget and its reset.
	r := e.run("costs", "estimate", "youtube", "videos.list=100", "search.list=10", "--label", "yt-key-1")
	if r.code != ExitExhausted || !strings.Contains(r.out, "Does not fit: search runs out first, after 50% of the run.") {
		t.Errorf("estimate that does not fit: exit %d\n%s", r.code, r.out)
	}
	oneLine(t, r.errOut, "youtube/search cannot pay for the run: it costs 10, 5 left", "frees up in 23h (2026-11-23 08:00:00 UTC)")

	// Never fits: more searches than the bucket holds.
	r = e.run("costs", "estimate", "youtube", "search.list=101")
	if r.code != ExitNeverFits {
		t.Errorf("estimate over the limit: exit %d", r.code)
	}
	oneLine(t, r.errOut, "youtube/search: the run costs 101 but the limit is 100")

	// The legacy table prices search.list in units.
	e.tty = false
	decode(t, e.ok("--json", "costs", "estimate", "youtube", "search.list=5", "--table", "youtube-legacy"), &est)
	if len(est.Budgets) != 1 || est.Budgets[0].Budget != "units" || est.Budgets[0].Cost != 500 || est.Budgets[0].Left != 1000 {
		t.Errorf("legacy estimate: %+v", est)
	}
}

func TestCostsEstimateWholeBudgets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var est estimateJSON
	decode(t, e.ok("--json", "costs", "estimate", "youtube", "videos.insert=3", "videos.list=20"), &est)
	if !est.Fits || est.Fingerprint != "" || len(est.Budgets) != 2 || est.Budgets[0].Left != 10000 || est.Budgets[1].Budget != "uploads" || est.Budgets[1].Left != 100 {
		t.Errorf("estimate with nothing recorded: %+v", est)
	}
}

func TestJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, _, _ := e.g()
	ss := g.store.(quota.StateStore)
	ctx := context.Background()
	l, err := quota.New(g.store, "youtube", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}}, quota.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	sched := jobs.New(ss, jobs.WithClock(e.clock.Now), jobs.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	key := quota.Credential{Secret: "AIzaSy-key-one", Label: "yt-key-1"}
	if err := sched.Add("trending", "", func(ctx context.Context, run *jobs.Run) error {
		for page := 0; ; page++ {
			if _, err := l.Take(ctx, key, quota.Units("units", 3)); err != nil {
				_ = run.Save(ctx, map[string]int{"page": page})
				return err
			}
			e.clock.Add(time.Second)
		}
	}, jobs.WithPlan("youtube", "", map[string]int64{"videos.list": 5, "search.list": 2})); err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}, 1), make(chan struct{}, 1)
	if err := sched.Add("hourly", "0 * * * *", func(ctx context.Context, run *jobs.Run) error {
		started <- struct{}{}
		<-release
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := sched.Add("broken", "", func(ctx context.Context, run *jobs.Run) error {
		e.clock.Add(1234567 * time.Nanosecond) // shown rounded: 1ms
		return errors.New("upstream answered 500:\n  backend error")
	}); err != nil {
		t.Fatal(err)
	}
	if rec, err := sched.RunOnce(ctx, "trending"); err != nil || rec.Outcome != jobs.Exhausted {
		t.Fatalf("trending: %+v, %v", rec, err)
	}
	e.clock.Add(time.Minute)
	if _, err := sched.RunOnce(ctx, "broken"); err == nil {
		t.Fatal("broken: no error")
	}
	e.clock.Add(time.Minute)
	// hourly ran once; its second run holds the job's lease meanwhile.
	release <- struct{}{}
	if rec, err := sched.RunOnce(ctx, "hourly"); err != nil || rec.Outcome != jobs.OK {
		t.Fatalf("hourly: %+v, %v", rec, err)
	}
	<-started
	held := make(chan jobs.Record)
	go func() { rec, _ := sched.RunOnce(ctx, "hourly"); held <- rec }()
	<-started
	e.clock.Add(5 * time.Second)

	e.tty = true
	e.vars["COLUMNS"] = "1000" // the full table
	out := e.ok("jobs")
	// NEXT says when the next tick comes, or that the job waits for the
	// spent budget; NEXT RUN COST prices trending's plan (5 videos.list, 2
	// search.list) against what is left.
	if !regexpLine(out, `^broken\s+1m5s ago \(2026-11-22 09:01:03 UTC\)\s+failed\s+1ms\s+-\s+-\s+on demand\s+-\s+-\s+upstream answered 500: backend error$`) ||
		!regexpLine(out, `^hourly\s+5s ago \(2026-11-22 09:02:03 UTC\)\s+ok\s+0s\s+-\s+\S+:\d+ run 20261122T090203\.\d{3}Z-[0-9a-f]{6}, expires in 25s\s+in 57m52s \(2026-11-22 10:00:00 UTC\)\s+-\s+-\s+-$`) ||
		!regexpLine(out, `^trending\s+2m8s ago \(2026-11-22 09:00:00 UTC\)\s+exhausted\s+3s\s+youtube/units=9\s+-\s+waiting for capacity until 2026-11-22 10:00:00 UTC\s+does not fit: units 5 of 1 left, search 2 of 100 left\s+saved 2m5s ago \{"page":3\}\s+youtube/units spent \(9 of 10 used, 1 left\); capacity back in 57m52s$`) {
		t.Errorf("jobs:\n%s", out)
	}
	// Another process's scheduler finds the lease held: its run is skipped.
	other := jobs.New(ss, jobs.WithClock(e.clock.Now), jobs.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err := other.Add("hourly", "0 * * * *", func(context.Context, *jobs.Run) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if rec, err := other.RunOnce(ctx, "hourly"); err != nil || rec.Outcome != jobs.Skipped {
		t.Fatalf("hourly from another scheduler: %+v, %v", rec, err)
	}
	out = e.ok("jobs", "hourly")
	if !regexpLine(out, `^now \(2026-11-22 09:02:08 UTC\)\s+once\s+skipped\s+0s\s+-\s+another run held the lease: \S+:\d+ run 20261122T090203\.\d{3}Z-[0-9a-f]{6} until 2026-11-22 09:02:33 UTC$`) {
		t.Errorf("jobs hourly:\n%s", out)
	}
	close(release)
	if rec := <-held; rec.Outcome != jobs.OK {
		t.Errorf("the held hourly run: %+v", rec)
	}
	e.clock.Add(-5 * time.Second)
	out = e.ok("jobs", "trending")
	if !strings.Contains(out, "checkpoint: saved 2m ago {\"page\":3}\nwaiting for capacity until 2026-11-22 10:00:00 UTC (youtube/units is spent)") || !regexpLine(out, `^2m3s ago \(2026-11-22 09:00:00 UTC\)\s+\S+\s+exhausted\s+3s\s+youtube/units=9\s`) {
		t.Errorf("jobs trending:\n%s", out)
	}

	var list []struct {
		Job        string
		Last       *jobs.Record
		Checkpoint *jobs.Checkpoint
		Lease      *backend.StateLease
		Waiting    *jobs.WaitingMark
		Next       *time.Time
		Expected   []struct {
			Budget     string
			Cost, Left int64
			Fits       bool
		}
	}
	decode(t, e.ok("--json", "jobs"), &list)
	if len(list) != 3 || list[0].Job != "broken" || list[0].Last.Outcome != jobs.Failed || list[0].Checkpoint != nil ||
		list[2].Last.Spent["youtube/units"] != 9 || list[2].Last.Exhausted == nil || list[2].Checkpoint == nil || compactJSON(list[2].Checkpoint.Cursor) != `{"page":3}` ||
		list[2].Waiting == nil || list[2].Waiting.Budget != "youtube/units" || len(list[2].Expected) != 2 || list[2].Expected[0].Cost != 5 || list[2].Expected[0].Fits ||
		list[1].Job != "hourly" || list[1].Next == nil || list[1].Lease != nil {
		t.Errorf("jobs --json = %+v", list)
	}
	var one struct {
		Job  string
		Runs []jobs.Record
	}
	decode(t, e.ok("--json", "jobs", "broken", "--limit", "5"), &one)
	if one.Job != "broken" || len(one.Runs) != 1 || !strings.Contains(one.Runs[0].Error, "backend error") {
		t.Errorf("jobs broken --json = %+v", one)
	}
	if r := e.run("jobs", "--limit", "0"); r.code != ExitUsage {
		t.Errorf("--limit 0: exit %d", r.code)
	}
}

func compactJSON(b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return err.Error()
	}
	return buf.String()
}

// jobsWorld is a store whose job table is wide: a job waiting for capacity
// with a plan and a checkpoint, one that failed with a long error, one whose
// lease another run holds (and whose second run was skipped). It returns
// when the held run is released.
func jobsWorld(t *testing.T) (*env, func()) {
	t.Helper()
	e := newEnv(t)
	g, _, _ := e.g()
	ss := g.store.(quota.StateStore)
	ctx := context.Background()
	l, err := quota.New(g.store, "youtube", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}}, quota.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	quiet := jobs.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	sched := jobs.New(ss, jobs.WithClock(e.clock.Now), quiet)
	key := quota.Credential{Secret: "AIzaSy-key-one", Label: "yt-key-1"}
	if err := sched.Add("trending-videos-backfill", "*/15 * * * *", func(ctx context.Context, run *jobs.Run) error {
		for page := 0; ; page++ {
			if _, err := l.Take(ctx, key, quota.Units("units", 3)); err != nil {
				_ = run.Save(ctx, map[string]any{"page": page, "region": "US", "token": "CAoQAA-next-page-token"})
				return err
			}
		}
	}, jobs.WithPlan("youtube", "", map[string]int64{"videos.list": 5, "search.list": 2})); err != nil {
		t.Fatal(err)
	}
	if err := sched.Add("broken", "", func(ctx context.Context, run *jobs.Run) error {
		return errors.New("upstream answered 500: backend error while listing the most popular videos of every region")
	}); err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}, 1), make(chan struct{})
	if err := sched.Add("hourly", "0 * * * *", func(ctx context.Context, run *jobs.Run) error {
		started <- struct{}{}
		<-release
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"trending-videos-backfill", "broken"} {
		sched.RunOnce(ctx, name)
		e.clock.Add(time.Minute)
	}
	held := make(chan struct{})
	go func() { sched.RunOnce(ctx, "hourly"); close(held) }()
	<-started
	other := jobs.New(ss, jobs.WithClock(e.clock.Now), quiet)
	if err := other.Add("hourly", "0 * * * *", func(context.Context, *jobs.Run) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if rec, err := other.RunOnce(ctx, "hourly"); err != nil || rec.Outcome != jobs.Skipped {
		t.Fatalf("hourly from another scheduler: %+v, %v", rec, err)
	}
	e.tty = true
	return e, func() { close(release); <-held }
}

// TestJobsFitsEveryWidth: on a terminal, jobs and jobs NAME fit the width
// ($COLUMNS, else the terminal's, else 80) as status does, every job shown:
// the full table where there is room, relative times, then one block per
// job; piped, rows keep their full times.
func TestJobsFitsEveryWidth(t *testing.T) {
	e, done := jobsWorld(t)
	defer done()
	names := []string{"trending-videos-backfill", "broken", "hourly"}
	check := func(w int, args ...string) string {
		t.Helper()
		out := e.ok(args...)
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if n := utf8.RuneCountInString(l); n > w {
				t.Errorf("jobs %v at %d columns: a line of %d: %q", args, w, n, l)
			}
		}
		return out
	}
	for w := 40; w <= 200; w += 4 {
		e.vars["COLUMNS"] = strconv.Itoa(w)
		out := check(w, "jobs")
		for _, n := range names {
			if !strings.Contains(out, n) {
				t.Errorf("%d columns: job %s missing:\n%s", w, n, out)
			}
		}
		if words := strings.Join(strings.Fields(out), " "); !strings.Contains(words, "waiting for capacity") || !strings.Contains(words, "backend error") {
			t.Errorf("%d columns: the wait or the error is missing:\n%s", w, out)
		}
		if out := check(w, "jobs", "hourly"); !strings.Contains(out, "skipped") {
			t.Errorf("%d columns: jobs hourly misses the skipped run:\n%s", w, out)
		}
	}
	// No $COLUMNS: IO.Width, else 80.
	delete(e.vars, "COLUMNS")
	check(80, "jobs")
	e.vars["COLUMNS"] = "1000"
	if out := e.ok("jobs"); !regexpLine(out, `^broken\s+\S+ ago \(2026-11-22 09:01:00 UTC\)\s+failed\s`) {
		t.Errorf("a wide terminal has the full table:\n%s", out)
	}
	e.tty = false
	delete(e.vars, "COLUMNS")
	if out := e.ok("jobs"); !regexpLine(out, "^broken\t\\S+ ago \\(2026-11-22 09:01:00 UTC\\)\tfailed\t") {
		t.Errorf("piped, rows keep their full times:\n%s", out)
	}
}

// A job's expected cost is held against what its credential's owner has
// left: with a named owner, usage is kept under the owner's name, not the
// credential's fingerprint, and several keys of it are one owner.
func TestJobsExpectedCostOfNamedOwner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, _, _ := e.g()
	ss := g.store.(quota.StateStore)
	ctx := context.Background()
	l, err := quota.New(g.store, "youtube", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}}, quota.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "AIzaSy-key-one", Label: "yt-key-1", Owner: "my-project"}
	sched := jobs.New(ss, jobs.WithClock(e.clock.Now), jobs.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err := sched.Add("trending", "", func(ctx context.Context, run *jobs.Run) error {
		_, err := l.Take(ctx, key, quota.Units("units", 7))
		return err
	}, jobs.WithPlan("youtube", "", map[string]int64{"videos.list": 5})); err != nil {
		t.Fatal(err)
	}
	if rec, err := sched.RunOnce(ctx, "trending"); err != nil || rec.Outcome != jobs.OK {
		t.Fatalf("trending: %+v, %v", rec, err)
	}
	var list []struct {
		Expected []estimateBudgetJSON
	}
	decode(t, e.ok("--json", "jobs"), &list)
	if len(list) != 1 || len(list[0].Expected) != 1 {
		t.Fatalf("jobs --json: %+v", list)
	}
	if x := list[0].Expected[0]; x.Budget != "units" || x.Cost != 5 || x.Left != 3 || x.After != -2 || x.Fits {
		t.Errorf("expected cost of trending with 7 of 10 units spent by my-project: %+v; want 5 of 3 left, does not fit", x)
	}
	// A second key of the same project: still one account to price against.
	if _, err := l.Take(ctx, quota.Credential{Secret: "AIzaSy-key-two", Label: "yt-key-2", Owner: "my-project"}, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	list = nil
	decode(t, e.ok("--json", "jobs"), &list)
	if x := list[0].Expected[0]; x.Left != 2 || x.Fits {
		t.Errorf("expected cost of trending with 8 of 10 units spent by my-project's two keys: %+v; want 5 of 2 left, does not fit", x)
	}
}
