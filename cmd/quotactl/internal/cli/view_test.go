package cli

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/internal/view/jobview"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

// viewWorld seeds one SQLite file for the tests that hold quotactl's JSON,
// the dashboard's /api and /metrics against each other: yt-key-1 with
// youtube's units (10 a sliding hour) marked spent at 3 of 10, and a search
// (3 a day in Los Angeles); two keys of the project proj; github defined
// and never charged; a job with a plan. Now is 09:10:00.7, so what frees
// next is a fraction of a second off the whole.
func viewWorld(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.setup() // 09:00: yt-key-1 takes 1 of units
	e.ok("budget", "set", "github/core", "--limit", "5000", "--window", "1h")
	e.clock.Add(5 * time.Minute)
	e.ok("take", "youtube", "--label", "yt-key-1", "--cost", "2", "--budget", "units", "--method", "videos.list")
	e.ok("take", "youtube", "--label", "yt-key-1", "--cost", "1", "--budget", "search", "--method", "search.list")
	e.vars["P1"], e.vars["P2"] = "AIzaSy-proj-one", "AIzaSy-proj-two"
	e.ok("take", "youtube", "--credential-env", "P1", "--label", "p1", "--owner", "proj", "--cost", "4", "--budget", "units", "--method", "videos.list")
	e.ok("take", "youtube", "--credential-env", "P2", "--label", "p2", "--owner", "proj", "--cost", "1", "--budget", "search")
	e.ok("exhaust", "youtube", "--label", "yt-key-1", "--budget", "units", "--until", "2h")

	g, _, _ := e.g()
	l, err := quota.New(g.store, "youtube", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}}, quota.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	sched := jobs.New(g.store.(quota.StateStore), jobs.WithClock(e.clock.Now), jobs.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err := sched.Add("nightly", "0 3 * * *", func(ctx context.Context, run *jobs.Run) error {
		_, err := l.Take(ctx, quota.Credential{Secret: "AIzaSy-proj-one", Owner: "proj"}, quota.Units("units", 1))
		return err
	}, jobs.WithPlan("youtube", "", map[string]int64{"videos.list": 2})); err != nil {
		t.Fatal(err)
	}
	if rec, err := sched.RunOnce(context.Background(), "nightly"); err != nil || rec.Outcome != jobs.OK {
		t.Fatalf("nightly: %+v, %v", rec, err)
	}
	e.clock.Add(5*time.Minute + 700*time.Millisecond)
	return e
}

// serveWorld serves the dashboard of e's store on the env's clock.
func serveWorld(t *testing.T, e *env) string {
	t.Helper()
	g, _, _ := e.g()
	return startServe(t, &serveOptions{globals: g, Listen: "127.0.0.1:0", Refresh: time.Second})
}

func get200(t *testing.T, url string) string {
	t.Helper()
	code, body := fetch(t, url, "")
	if code != 200 {
		t.Fatalf("%s: %d %s", url, code, body)
	}
	return body
}

// TestStatusJSONIsAPIStatus: on one store at one instant, `quotactl status
// --json` and the dashboard's /api/status are the same bytes; history and
// jobs are the same values.
func TestStatusJSONIsAPIStatus(t *testing.T) {
	e := viewWorld(t)
	base := serveWorld(t, e)

	cli, api := e.ok("--json", "status"), get200(t, base+"/api/status")
	if cli != api {
		t.Errorf("status --json and /api/status differ:\n%s\n/api/status:\n%s", cli, api)
	}
	var rows []statusJSON
	decode(t, cli, &rows)
	if len(rows) != 5 { // github's core, whole; search and units of proj and of yt-key-1
		t.Errorf("%d rows in status --json, want 5:\n%s", len(rows), cli)
	}

	var charts, all []historyJSON
	decode(t, e.ok("--json", "history", "youtube", "--label", "yt-key-1"), &charts)
	decode(t, get200(t, base+"/api/history"), &all)
	if len(charts) != 2 {
		t.Fatalf("history --json: %d charts", len(charts))
	}
	for _, h := range charts {
		found := false
		for _, a := range all {
			if a.API == h.API && a.Owner == h.Owner && a.Budget == h.Budget {
				found = true
				if !reflect.DeepEqual(a, h) {
					t.Errorf("history of %s/%s: /api/history\n%+v\nhistory --json\n%+v", h.API, h.Budget, a, h)
				}
			}
		}
		if !found {
			t.Errorf("/api/history has no %s/%s of %s", h.API, h.Budget, h.Owner)
		}
	}

	var list, apiJobs []jobview.Job
	decode(t, e.ok("--json", "jobs"), &list)
	decode(t, get200(t, base+"/api/jobs"), &apiJobs)
	for i := range apiJobs {
		if len(apiJobs[i].Runs) == 0 {
			t.Errorf("/api/jobs: %s without its runs", apiJobs[i].Job)
		}
		apiJobs[i].Runs = nil // the dashboard lists recent runs; jobs without NAME does not
	}
	if len(list) != 1 || list[0].Expected == nil || !reflect.DeepEqual(list, apiJobs) {
		t.Errorf("jobs --json\n%+v\n/api/jobs\n%+v", list, apiJobs)
	}
	var one, apiOne jobview.Job
	decode(t, e.ok("--json", "jobs", "nightly"), &one)
	decode(t, get200(t, base+"/api/jobs/nightly"), &apiOne)
	if len(one.Runs) != 1 || !reflect.DeepEqual(one, apiOne) {
		t.Errorf("jobs nightly --json\n%+v\n/api/jobs/nightly\n%+v", one, apiOne)
	}
}

// series reads /metrics' quota_store_* gauges: name -> api/budget/owner ->
// value.
func series(t *testing.T, body string) map[string]map[string]float64 {
	t.Helper()
	re := regexp.MustCompile(`^(quota_store_\w+)\{api="([^"]*)",budget="([^"]*)",owner="([^"]*)"\} (\S+)$`)
	out := map[string]map[string]float64{}
	for l := range strings.Lines(body) {
		m := re.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[5], 64)
		if err != nil {
			t.Fatal(err)
		}
		if out[m[1]] == nil {
			out[m[1]] = map[string]float64{}
		}
		out[m[1]][m[2]+"/"+m[3]+"/"+m[4]] = v
	}
	return out
}

// ownerNames names every account of the store as /metrics labels it.
func ownerNames(t *testing.T, e *env) map[string]string {
	t.Helper()
	g, _, _ := e.g()
	apis, err := view.New(g.store).APIs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range apis {
		for _, o := range a.Owners {
			out[a.Name+"/"+o.Account] = o.Name
		}
	}
	return out
}

// TestSpentPercentEverywhere: a budget the upstream marked spent at 3 of
// 10 can pay for nothing: quotactl status --json, /api/status and the
// store gauges all say so, 100% used, and every row's percent is what the
// gauges give, 100 * (limit - remaining) / limit rounded down. Before the
// tools shared one rule, the dashboard said 100 and quotactl's own
// percentage 30.
func TestSpentPercentEverywhere(t *testing.T) {
	e := viewWorld(t)
	base := serveWorld(t, e)
	var cli, api []statusJSON
	decode(t, e.ok("--json", "status"), &cli)
	decode(t, get200(t, base+"/api/status"), &api)
	gauges := series(t, get200(t, base+"/metrics"))
	names := ownerNames(t, e)
	if len(cli) != len(api) || len(cli) == 0 {
		t.Fatalf("%d rows in status --json, %d in /api/status", len(cli), len(api))
	}
	spent := 0
	for i, s := range cli {
		if s.Percent != api[i].Percent {
			t.Errorf("%s/%s of %s: percent %d in status --json, %d in /api/status", s.API, s.Budget, s.Owner, s.Percent, api[i].Percent)
		}
		if s.Owner == "" {
			continue // never charged: no series
		}
		k := s.API + "/" + s.Budget + "/" + names[s.API+"/"+s.Owner]
		limit, remaining := gauges["quota_store_limit_units"][k], gauges["quota_store_remaining_units"][k]
		if _, ok := gauges["quota_store_remaining_units"][k]; !ok || limit == 0 {
			t.Errorf("no gauges for %s in /metrics", k)
			continue
		}
		if want := int64(100 * (limit - remaining) / limit); s.Percent != want {
			t.Errorf("%s: percent %d, the gauges say %d (limit %v, remaining %v)", k, s.Percent, want, limit, remaining)
		}
		if s.ExhaustedUntil != nil {
			spent++
			if s.Percent != 100 || gauges["quota_store_exhausted"][k] != 1 || remaining != 0 || s.Used != 3 {
				t.Errorf("%s marked spent at %d used: percent %d, exhausted %v, remaining %v; want 100, 1, 0", k, s.Used, s.Percent, gauges["quota_store_exhausted"][k], remaining)
			}
		}
	}
	if spent != 1 {
		t.Errorf("%d budgets marked spent, want 1 (yt-key-1's units)", spent)
	}
	// The page and the terminal show it spent: a full bar, "spent".
	if page := get200(t, base+"/"); !strings.Contains(page, `width="100" height="10" rx="2"/></svg><span class="pct" data-field="percent">spent</span>`) {
		t.Errorf("the page does not show yt-key-1's units spent")
	}
	e.tty = true
	if out := e.ok("status", "youtube", "--label", "yt-key-1"); !regexpLine(out, `^youtube\s.*yt-key-1\s+units\s+3/10\s+0\s+\[#+\] spent`) {
		t.Errorf("status on a terminal:\n%s", out)
	}
}

// TestResetSecondsEverywhere: the seconds until capacity next frees are
// the same whole number in status --json, /api/status and
// quota_store_reset_seconds, rounded up: with 54m59.3s to go, 3300, where
// the dashboard said 3299 (to the nearest) and the gauge 3299.3.
func TestResetSecondsEverywhere(t *testing.T) {
	e := viewWorld(t)
	base := serveWorld(t, e)
	var cli, api []statusJSON
	decode(t, e.ok("--json", "status"), &cli)
	decode(t, get200(t, base+"/api/status"), &api)
	gauges := series(t, get200(t, base+"/metrics"))
	names := ownerNames(t, e)
	checked := 0
	for i, s := range cli {
		if s.ResetSeconds != api[i].ResetSeconds || s.ResetSeconds != float64(int64(s.ResetSeconds)) {
			t.Errorf("%s/%s of %s: reset_seconds %v in status --json, %v in /api/status; want one whole number", s.API, s.Budget, s.Owner, s.ResetSeconds, api[i].ResetSeconds)
		}
		if s.Owner == "" {
			continue
		}
		name := names[s.API+"/"+s.Owner]
		k := s.API + "/" + s.Budget + "/" + name
		if g, ok := gauges["quota_store_reset_seconds"][k]; !ok || g != s.ResetSeconds {
			t.Errorf("%s: reset_seconds %v, quota_store_reset_seconds %v (present %v)", k, s.ResetSeconds, g, ok)
		}
		checked++
		// proj's oldest units (09:05) leave their hour at 10:05, 54m59.3s
		// after now; yt-key-1's units are marked spent until 11:05; search
		// resets at midnight in Los Angeles, 08:00 UTC.
		want := map[string]float64{"proj/units": 3300, "proj/search": 82200, "yt-key-1/search": 82200, "yt-key-1/units": 6900}[name+"/"+s.Budget]
		if s.ResetSeconds != want {
			t.Errorf("%s: reset_seconds %v, want %v", k, s.ResetSeconds, want)
		}
	}
	if checked != 4 {
		t.Errorf("%d rows held against /metrics, want 4", checked)
	}
}
