//go:build browser

// The dashboard in a real headless Chromium (Debian's chromium package),
// driven over the DevTools protocol with chromedp. .ci/run installs chromium
// and runs `go test -tags browser ./dashboard/`; without the tag, `go test
// ./...` stays Go-only.

package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

// chromiumPath is Debian's chromium; $CHROMIUM overrides it.
func chromiumPath(t *testing.T) string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (apt-get install chromium): %v", err)
	}
	return p
}

// shownRow is a budget row as the page shows it.
type shownRow struct {
	API, Owner, Budget, Used, Limit, Remaining, Percent, Fill string
}

// TestBrowserShowsTheStore loads the dashboard over a seeded SQLite store in
// headless Chromium, checks every number the page shows against the store,
// saves a screenshot in the test's directory, then charges the store from
// "another process" and waits for the page to show it live. (The README's
// picture is TestBrowserScreenshot's, of a realistic day: this store's
// labels are made to test escaping.)
func TestBrowserShowsTheStore(t *testing.T) {
	w := seed(t)
	srv := serve(t, w, WithRefresh(100*time.Millisecond))

	ctx := openPage(t, srv.URL+"/")
	// The script connected to /events and swapped the live part in.
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`document.getElementById("live-text").textContent === "live"`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the page never went live: %v", err)
	}
	rowsJSON, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll("tr.budget")].map(tr => ({
			API: tr.dataset.api, Owner: tr.querySelector("td.owner .oname").textContent, Budget: tr.dataset.budget,
			Used: tr.querySelector('[data-field="used"]').textContent,
			Limit: tr.querySelector('[data-field="limit"]').textContent,
			Remaining: tr.querySelector('[data-field="remaining"]').textContent,
			Percent: tr.querySelector('[data-field="percent"]').textContent,
			Fill: tr.querySelector("rect.fill").getAttribute("width"),
		})))`))
	if err != nil {
		t.Fatal(err)
	}
	var rows []shownRow
	if err := json.Unmarshal([]byte(rowsJSON), &rows); err != nil {
		t.Fatal(err)
	}

	// The store's view, read through the limiters.
	bg := context.Background()
	want := map[string]quota.Usage{}
	for _, c := range []struct {
		l    *quota.Limiter
		cred quota.Credential
	}{{w.youtube, w.key1}, {w.youtube, w.key2}, {w.github, w.gh}} {
		us, err := c.l.Status(bg, c.cred)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			want[c.l.API()+"/"+c.cred.Label+"/"+u.Budget] = u
		}
	}
	if len(rows) != len(want) {
		t.Fatalf("the page shows %d budget rows, the store has %d: %+v", len(rows), len(want), rows)
	}
	number := func(s string) int64 {
		n, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
		if err != nil {
			t.Fatalf("shown number %q: %v", s, err)
		}
		return n
	}
	for _, r := range rows {
		u, ok := want[r.API+"/"+r.Owner+"/"+r.Budget]
		if !ok {
			t.Errorf("the page shows %s/%s for %q, which the store does not have", r.API, r.Budget, r.Owner)
			continue
		}
		if number(r.Used) != u.Used || number(r.Limit) != u.Limit || number(r.Remaining) != u.Remaining {
			t.Errorf("%s/%s %s: shown %s/%s, %s left; the store has %d/%d, %d left", r.API, r.Budget, r.Owner, r.Used, r.Limit, r.Remaining, u.Used, u.Limit, u.Remaining)
		}
		// Bar and percentage agree, honour the mark, never overflow.
		wantPct, wantFill := fmt.Sprintf("%d%%", u.Used*100/u.Limit), strconv.FormatInt(u.Used*100/u.Limit, 10)
		if !u.ExhaustedUntil.IsZero() || u.Remaining == 0 {
			wantPct, wantFill = "spent", "100"
		}
		if r.Percent != wantPct || r.Fill != wantFill {
			t.Errorf("%s/%s %s: shows %s with a bar %s%% wide; want %s, %s", r.API, r.Budget, r.Owner, r.Percent, r.Fill, wantPct, wantFill)
		}
	}

	// Everything the page loaded came from the dashboard itself: no CDN.
	foreign, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`performance.getEntriesByType("resource").map(e => e.name).filter(n => !n.startsWith(location.origin))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(foreign) > 0 {
		t.Errorf("the page loaded from elsewhere: %q", foreign)
	}

	// Charts: one per budget, the busiest hour's bar as the store's entries say.
	charts, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("figure.chart").length`))
	if err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('figure.chart[data-owner="yt-key-1"][data-budget="units"] rect.seg title')].map(t => t.textContent).filter(s => s.startsWith("09:00"))[0] || ""`))
	if err != nil {
		t.Fatal(err)
	}
	if charts != len(want) {
		t.Errorf("%d charts, want %d", charts, len(want))
	}
	if !strings.Contains(title, "09:00–10:00 PST: 1,650 units in 4 calls") {
		t.Errorf("09:00 bar of yt-key-1's units: %q", title)
	}

	// Jobs: the last run's outcome and units, as recorded.
	recs, err := jobs.History(bg, w.store, "trending", 1)
	if err != nil || len(recs) != 1 {
		t.Fatal(err, recs)
	}
	// Both cells in one evaluation: the live refresh replaces the page's
	// HTML between two separate reads, and a node read after it was
	// replaced has no text.
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const row = document.querySelector('tr.job[data-job="trending"]');
		const text = sel => { const e = row && row.querySelector(sel); return e ? e.textContent.trim() : ""; };
		return [text('[data-field="outcome"]'), text('[data-spent="youtube/search"] [data-field="units"]')];
	})()`))
	if err != nil || len(cells) != 2 {
		t.Fatal(err, cells)
	}
	outcome, units := cells[0], cells[1]
	if outcome != string(recs[0].Outcome) || number(units) != recs[0].Spent["youtube/search"] {
		t.Errorf("job shows %s, %s units; recorded %s, %d", outcome, units, recs[0].Outcome, recs[0].Spent["youtube/search"])
	}

	// The screenshot, in the test's own directory, to look at when the
	// test fails.
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))

	// Live: another process charges the store; the open page follows.
	if _, err := w.youtube.Take(bg, w.key1, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 100}}); err != nil {
		t.Fatal(err)
	}
	sel := `document.querySelector('tr.budget[data-owner="yt-key-1"][data-budget="units"]')`
	if _, err := chromedp.Run(ctx,
		chromedp.Poll[chromedp.Void](sel+`.querySelector('[data-field="used"]').textContent === "9,800" && `+sel+`.querySelector('[data-field="percent"]').textContent === "98%"`,
			chromedp.WithPollingTimeout(30*time.Second)),
	); err != nil {
		t.Errorf("the page did not show the new charge live: %v", err)
	}
}

// openPage opens url in a headless Chromium 1360 pixels wide (closed at
// the test's end) and waits for the budget rows.
func openPage(t *testing.T, url string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1360, 900),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("font-render-hinting", "none"),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`tr.budget`)),
	); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// TestBrowserShowsUnits: in Chromium, an enrichment job's budgets show in
// their units: tokens as tokens, its monthly spend in dollars, in the
// budget rows and the chart captions; YouTube's units stay bare numbers.
func TestBrowserShowsUnits(t *testing.T) {
	w := seed(t)
	chargeEnrich(t, w)
	srv := serve(t, w)
	ctx := openPage(t, srv.URL+"/")
	rowsJSON, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll("tr.budget")].map(tr => ({
			API: tr.dataset.api, Owner: tr.querySelector("td.owner .oname").textContent, Budget: tr.dataset.budget,
			Used: tr.querySelector('[data-field="used"]').textContent,
			Limit: tr.querySelector('[data-field="limit"]').textContent,
			Remaining: tr.querySelector('[data-field="remaining"]').textContent,
		})))`))
	if err != nil {
		t.Fatal(err)
	}
	var rows []shownRow
	if err := json.Unmarshal([]byte(rowsJSON), &rows); err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{}
	for _, r := range rows {
		shown[r.API+"/"+r.Owner+"/"+r.Budget] = r.Used + " | " + r.Limit + " | " + r.Remaining
	}
	for k, want := range map[string]string{
		"openai/enrich/tokens":   "1,234 tokens | 30,000 tokens | 28,766 tokens",
		"openai/enrich/spend":    "$12.34 | $500.00 | $487.66",
		"openai/enrich/requests": "1 request | 500 requests | 499 requests",
		"youtube/yt-key-1/units": "9,700 | 10,000 | 300",
	} {
		if shown[k] != want {
			t.Errorf("%s shows %q, want %q (all: %v)", k, shown[k], want, shown)
		}
	}
	captions, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('figure.chart[data-api="openai"] figcaption')].map(c => c.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(captions, "\n")
	for _, want := range []string{"1,234 tokens of 30,000 tokens (4%)", "$12.34 of $500.00 (2%)"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the openai charts' captions lack %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "units") {
		t.Errorf("an openai chart caption says units:\n%s", joined)
	}
}
