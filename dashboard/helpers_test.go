package dashboard

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// t0 is the tests' "now": 09:30 in Los Angeles (17:30 UTC), so a daily
// Los Angeles budget's window began at 08:00 UTC.
var t0 = time.Date(2026, 11, 22, 17, 30, 0, 0, time.UTC)

// la is America/Los_Angeles.
var la = mustZone("America/Los_Angeles")

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

// The secrets the seed charges with: none may appear in anything served.
var secrets = []string{"AIzaSy-dashboard-secret-one", "AIzaSy-dashboard-secret-two", "ghp_dashboardsecretthree"}

// nastyLabel is a label that must be escaped in HTML.
const nastyLabel = `<img src=x onerror=alert(1)>&"ci"`

// world is a seeded SQLite store and the limiters that filled it.
type world struct {
	store   *sqlitestore.Store
	clock   *testkit.Clock
	youtube *quota.Limiter
	github  *quota.Limiter
	key1    quota.Credential
	key2    quota.Credential
	gh      quota.Credential
}

// seed fills a real SQLite file: youtube's units (10,000 a day in Los
// Angeles) and search (100 a day) for two keys, charged at several local
// hours by several methods; github's core (5,000 a sliding hour) for a
// credential with a label that needs escaping; and job runs (ok, then
// exhausted) through the jobs scheduler.
func seed(t testing.TB) *world {
	t.Helper()
	st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "quota.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w := &world{store: st, clock: testkit.NewClock(t0)}
	w.key1 = quota.Credential{Secret: secrets[0], Label: "yt-key-1"}
	w.key2 = quota.Credential{Secret: secrets[1], Label: "yt-key-2"}
	w.gh = quota.Credential{Secret: secrets[2], Label: nastyLabel}
	w.youtube, err = quota.New(st, "youtube", []quota.Budget{
		{Name: "units", Limit: 10000, Window: quota.Daily(la)},
		{Name: "search", Limit: 100, Window: quota.Daily(la)},
	}, quota.WithClock(w.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	w.github, err = quota.New(st, "github", []quota.Budget{
		{Name: "core", Limit: 5000, Window: quota.Sliding(time.Hour)},
	}, quota.WithClock(w.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	day := time.Date(2026, 11, 22, 0, 0, 0, 0, la) // the window's start
	charge := func(l *quota.Limiter, c quota.Credential, at time.Time, method string, units map[string]int64) {
		t.Helper()
		w.clock.Set(at)
		if _, err := l.Take(ctx, c, quota.Charge{Method: method, Units: units}); err != nil {
			t.Fatalf("seed take %s at %v: %v", method, at, err)
		}
	}
	// yt-key-1: 9,700 of 10,000 units (97%) over the night and morning.
	for i, h := range []int{1, 2, 3, 5, 6, 7, 8, 9} {
		at := day.Add(time.Duration(h)*time.Hour + time.Duration(i)*time.Minute)
		charge(w.youtube, w.key1, at, "videos.list", map[string]int64{"units": 400})
		charge(w.youtube, w.key1, at.Add(time.Minute), "captions.update", map[string]int64{"units": 450})
		charge(w.youtube, w.key1, at.Add(2*time.Minute), "videos.update", map[string]int64{"units": 300})
		charge(w.youtube, w.key1, at.Add(3*time.Minute), "search.list", map[string]int64{"search": 1})
	}
	// 8 hours x 1,150 = 9,200; 500 more at 09:10.
	charge(w.youtube, w.key1, day.Add(9*time.Hour+10*time.Minute), "videos.insert", map[string]int64{"units": 500})
	// yt-key-2: 2,500 units, then marked spent by the upstream until the reset.
	charge(w.youtube, w.key2, day.Add(4*time.Hour), "videos.list", map[string]int64{"units": 2500})
	w.clock.Set(t0)
	if err := w.youtube.Exhaust(ctx, w.key2, "units", time.Date(2026, 11, 23, 0, 0, 0, 0, la)); err != nil {
		t.Fatal(err)
	}
	// github: 1,234 of 5,000 in the last hour.
	charge(w.github, w.gh, t0.Add(-50*time.Minute), "repos.get", map[string]int64{"core": 1000})
	charge(w.github, w.gh, t0.Add(-10*time.Minute), "search.code", map[string]int64{"core": 234})

	// Jobs: "trending" ran ok, then stopped on search's spent bucket.
	sched := jobs.New(st, jobs.WithClock(w.clock.Now), jobs.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	calls := 0
	err = sched.Add("trending", "*/15 * * * *", func(ctx context.Context, run *jobs.Run) error {
		calls++
		n := 3
		if calls == 2 {
			n = 200 // more than search has left
		}
		for range n {
			if _, err := w.youtube.Take(ctx, w.key1, quota.Charge{Method: "search.list", Units: map[string]int64{"search": 1}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w.clock.Set(t0.Add(-20 * time.Minute))
	if rec, err := sched.RunOnce(ctx, "trending"); err != nil || rec.Outcome != jobs.OK {
		t.Fatalf("seed run 1: %v %+v", err, rec)
	}
	w.clock.Set(t0.Add(-5 * time.Minute))
	if rec, err := sched.RunOnce(ctx, "trending"); err != nil || rec.Outcome != jobs.Exhausted {
		t.Fatalf("seed run 2: %v %+v", err, rec)
	}
	w.clock.Set(t0)
	return w
}

// serve starts the dashboard over w's store on an httptest server.
func serve(t testing.TB, w *world, opts ...Option) *httptest.Server {
	t.Helper()
	h, err := New(w.store, append([]Option{WithClock(w.clock.Now), WithLocation(la), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// get fetches path and returns the status and body.
func get(t testing.TB, srv *httptest.Server, path string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
