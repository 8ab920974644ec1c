//go:build browser

// The picture the README shows, docs/dashboard.png: the dashboard over a
// store seeded with a plausible day of an ingestion team, served by this
// package's own handler on 127.0.0.1 and photographed by headless Chromium.
//
//	go test -tags browser ./dashboard/ -run TestBrowserScreenshot -update-screenshot
//
// rewrites docs/dashboard.png; without -update-screenshot (as .ci/run runs
// it) the picture goes to the test's temporary directory, so the generator
// keeps working without touching the tree.

package dashboard

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
	"github.com/quotactl/quotactl/quota/storetest"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the screenshot to docs/dashboard.png")

// dayNow is the picture's "now": 14:30 in Los Angeles, where YouTube's day
// began at midnight.
var dayNow = time.Date(2026, 11, 22, 14, 30, 0, 0, la)

// seedDay fills an SQLite store with a day of an ingestion team, priced
// with the built-in YouTube cost table:
//
//   - the Cloud project acme-ingest (keys yt-key-1 and yt-key-2): a
//     trending job every 15 minutes, a keyword search every hour, comment
//     threads every hour, caption downloads twice and a metadata sync: 83%
//     of its 10,000 units and 90 of its 100 searches;
//   - the project acme-archive (yt-key-3): a channel backfill every four
//     hours until YouTube answered quotaExceeded at 10:46, which marked the
//     budget spent until midnight;
//   - a GitHub token of the release bot, on a sliding hour.
func seedDay(t testing.TB) (*sqlitestore.Store, *storetest.Clock) {
	t.Helper()
	st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "quota.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := storetest.NewClock(dayNow)
	ctx := context.Background()

	table, err := costs.Builtin("youtube")
	if err != nil {
		t.Fatal(err)
	}
	var budgets []quota.Budget // the two budgets these jobs spend
	for _, b := range table.Budgets {
		if b.Name == "units" || b.Name == "search" {
			budgets = append(budgets, b)
		}
	}
	youtube, err := quota.New(st, "youtube", budgets, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	github, err := quota.New(st, "github", []quota.Budget{
		{Name: "core", Limit: 5000, Window: quota.Sliding(time.Hour)},
	}, quota.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	key1 := quota.Credential{Secret: "AIzaSy-screenshot-key-one", Label: "yt-key-1", Owner: "acme-ingest"}
	key2 := quota.Credential{Secret: "AIzaSy-screenshot-key-two", Label: "yt-key-2", Owner: "acme-ingest"}
	key3 := quota.Credential{Secret: "AIzaSy-screenshot-key-three", Label: "yt-key-3", Owner: "acme-archive"}
	bot := quota.Credential{Secret: "ghp_screenshotreleasebot", Label: "release-bot", Owner: "acme-ci"}

	// call charges one API call as the metered client would, a moment
	// after the previous one.
	call := func(ctx context.Context, key quota.Credential, method string) error {
		ch, err := table.Charge(method)
		if err != nil {
			t.Fatal(err)
		}
		clock.Add(150 * time.Millisecond)
		_, err = youtube.Take(ctx, key, ch)
		return err
	}
	calls := func(ctx context.Context, key quota.Credential, method string, n int) error {
		for range n {
			if err := call(ctx, key, method); err != nil {
				return err
			}
		}
		return nil
	}

	sched := jobs.New(st, jobs.WithClock(clock.Now), jobs.WithLocation(la),
		jobs.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	add := func(name, spec string, fn jobs.Func) {
		t.Helper()
		if err := sched.Add(name, spec, fn); err != nil {
			t.Fatal(err)
		}
	}
	// 8 regions x 4 pages of trending videos.
	add("trending", "*/15 * * * *", func(ctx context.Context, run *jobs.Run) error {
		return calls(ctx, key1, "videos.list", 32)
	})
	add("keyword-search", "5 * * * *", func(ctx context.Context, run *jobs.Run) error {
		return calls(ctx, key1, "search.list", 6)
	})
	add("comments", "30 * * * *", func(ctx context.Context, run *jobs.Run) error {
		return calls(ctx, key2, "commentThreads.list", 280)
	})
	add("captions", "0 3,9 * * *", func(ctx context.Context, run *jobs.Run) error {
		if err := calls(ctx, key2, "captions.list", 2); err != nil {
			return err
		}
		return calls(ctx, key2, "captions.download", 5)
	})
	add("metadata-sync", "0 11 * * *", func(ctx context.Context, run *jobs.Run) error {
		if err := calls(ctx, key1, "videos.list", 4); err != nil {
			return err
		}
		return calls(ctx, key1, "videos.update", 8)
	})
	backfills := 0
	add("channel-backfill", "0 */4 * * *", func(ctx context.Context, run *jobs.Run) error {
		backfills++
		if err := calls(ctx, key3, "search.list", 4); err != nil { // the channels to page through
			return err
		}
		n := 3100
		if backfills == 3 {
			n = 3212 // YouTube says quotaExceeded after these
		}
		if err := calls(ctx, key3, "playlistItems.list", n); err != nil {
			return err
		}
		if backfills < 3 {
			return nil
		}
		// What the metered client does on a 403 quotaExceeded: the
		// budget is spent until YouTube's midnight, in every process.
		if err := youtube.Exhaust(ctx, key3, "units", time.Date(2026, 11, 23, 0, 0, 0, 0, la)); err != nil {
			t.Fatal(err)
		}
		return call(ctx, key3, "playlistItems.list")
	})

	// The day's ticks, in order.
	type tick struct {
		at  time.Time
		job string
	}
	var ticks []tick
	day := time.Date(2026, 11, 22, 0, 0, 0, 0, la)
	for m := 0; m < 14*60+30; m += 15 {
		ticks = append(ticks, tick{day.Add(time.Duration(m) * time.Minute), "trending"})
	}
	for h := 0; h <= 14; h++ {
		ticks = append(ticks, tick{day.Add(time.Duration(h)*time.Hour + 5*time.Minute), "keyword-search"})
		if h < 14 {
			ticks = append(ticks, tick{day.Add(time.Duration(h)*time.Hour + 30*time.Minute), "comments"})
		}
	}
	ticks = append(ticks,
		tick{day.Add(3*time.Hour + time.Minute), "captions"},
		tick{day.Add(9*time.Hour + time.Minute), "captions"},
		tick{day.Add(11*time.Hour + 2*time.Minute), "metadata-sync"},
		tick{day.Add(2 * time.Hour), "channel-backfill"},
		tick{day.Add(6 * time.Hour), "channel-backfill"},
		tick{day.Add(10 * time.Hour), "channel-backfill"},
	)
	slices.SortStableFunc(ticks, func(a, b tick) int { return a.at.Compare(b.at) })
	for _, tk := range ticks {
		clock.Set(tk.at)
		rec, err := sched.RunOnce(ctx, tk.job)
		if err != nil {
			t.Fatalf("%s at %v: %v", tk.job, tk.at, err)
		}
		want := jobs.OK
		if tk.job == "channel-backfill" && tk.at.Hour() == 10 {
			want = jobs.Exhausted
		}
		if rec.Outcome != want {
			t.Fatalf("%s at %v: %s (%s), want %s", tk.job, tk.at, rec.Outcome, rec.Error, want)
		}
	}

	// The release bot: bursts of API calls every five minutes of the last
	// hour, more around a release at 14:10.
	for i, n := range []int{60, 45, 80, 70, 55, 90, 240, 310, 120, 85, 60, 75} {
		clock.Set(dayNow.Add(-time.Hour + time.Duration(i)*5*time.Minute + 30*time.Second))
		for range n {
			if _, err := github.Take(ctx, bot, quota.Charge{Method: "repos.get", Units: map[string]int64{"core": 1}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	clock.Set(dayNow)
	return st, clock
}

// TestBrowserScreenshot takes the README's picture of the dashboard.
func TestBrowserScreenshot(t *testing.T) {
	st, clock := seedDay(t)
	h, err := New(st, WithClock(clock.Now), WithLocation(la),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h) // on 127.0.0.1
	t.Cleanup(srv.Close)

	ctx := openPage(t, srv.URL+"/")
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`document.getElementById("live").className === "dot ok" && document.getElementById("live-text").textContent === "live"`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the page never went live: %v", err)
	}
	// The picture shows the day seeded above: every owner, and the jobs.
	owners, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll("tr.budget")].map(tr => tr.dataset.api + "/" + tr.querySelector("td.owner .oname").textContent + "/" + tr.dataset.budget))`))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	if err := json.Unmarshal([]byte(owners), &rows); err != nil {
		t.Fatal(err)
	}
	want := []string{"github/acme-ci/core", "youtube/acme-archive/search", "youtube/acme-archive/units", "youtube/acme-ingest/search", "youtube/acme-ingest/units"}
	if !slices.Equal(rows, want) {
		t.Errorf("budget rows %q, want %q", rows, want)
	}
	jobRows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("tr.job").length`))
	if err != nil {
		t.Fatal(err)
	}
	if jobRows != 6 {
		t.Errorf("%d job rows, want 6", jobRows)
	}

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if *updateScreenshot {
		shot = filepath.Join("..", "docs", "dashboard.png")
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
}
