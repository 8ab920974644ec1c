//go:build clients

// The proxy's clients in other languages: python3 (standard library) and
// curl, run as real processes. Behind the build tag "clients", as the
// dashboard's browser tests are behind "browser", so that go test ./...
// needs Go alone; .ci/run installs both programs and runs these with
// -tags clients, and a missing program fails them.

package proxy_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/internal/ytsim"
	"github.com/quotactl/quotactl/proxy"
	"github.com/quotactl/quotactl/quota"
)

// need returns the path of a program the test runs as a client; a missing
// one fails the test (.ci/run installs python3 and curl).
func need(t *testing.T, prog string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("%s is not on PATH: these tests (-tags clients) run it as a client of the proxy; install it", prog)
	}
	return p
}

// ytProxy serves a proxy in front of a YouTube simulator whose project has
// limit units a day, metered with the same limit; held is the key the
// proxy holds ("" for none).
func ytProxy(t *testing.T, limit int64, held string, keys ...string) (*ytsim.Server, string) {
	t.Helper()
	sim := ytsim.New(ytsim.WithLimit("units", limit), ytsim.WithKeys(keys...))
	t.Cleanup(sim.Close)
	table, err := youtubeWithLimit(limit)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := quota.New(quota.NewMemoryStore(), table.API, table.Budgets)
	if err != nil {
		t.Fatal(err)
	}
	p, err := proxy.New(proxy.Config{Upstream: sim.URL(), Table: table, Limiter: lim, Owner: "my-project", Credential: held,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return sim, srv.URL
}

// youtubeAPIEnv is the variable the Python clients read the proxy's base
// URL from.
const youtubeAPIEnv = "YOUTUBE_API"

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// A Python job (standard library urllib, no key of its own) spends the
// budget through the proxy and stops cleanly on the proxy's refusal; the
// upstream never answers a quota error.
func TestPythonJobThroughProxy(t *testing.T) {
	py := need(t, "python3")
	const key = "AIzaSy-python-job-held"
	sim, base := ytProxy(t, 10, key, key)
	cmd := exec.CommandContext(context.Background(), py, "testdata/trending.py", "US", "GB", "FR")
	cmd.Env = append(os.Environ(), youtubeAPIEnv+"="+base)
	out, err := cmd.CombinedOutput()
	t.Logf("python3 testdata/trending.py:\n%s", out)
	if err != nil {
		t.Fatalf("the job failed: %v", err)
	}
	if !regexp.MustCompile(`(?m)^stopped: .*quotactl proxy: youtube/units: 10 of 10 units used`).Match(out) ||
		!strings.Contains(string(out), "10 calls, 500 videos this run") {
		t.Errorf("the job did not stop on the proxy's refusal:\n%s", out)
	}
	if sim.QuotaExceeded() != 0 || sim.Used(key, "units") != 10 {
		t.Errorf("upstream: %d quota errors, %d units used; want 0 and 10", sim.QuotaExceeded(), sim.Used(key, "units"))
	}
}

// curl spends the budget through the proxy, then gets the refusal.
func TestCurlThroughProxy(t *testing.T) {
	curl := need(t, "curl")
	const key = "AIzaSy-curl-held"
	sim, base := ytProxy(t, 5, key, key)
	for i := range 6 {
		out, err := exec.Command(curl, "-sS", "-i", base+"/youtube/v3/videos?part=id&id=abc").CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v\n%s", err, out)
		}
		status := strings.SplitN(string(out), "\r\n", 2)[0]
		switch {
		case i < 5 && status != "HTTP/1.1 200 OK":
			t.Fatalf("call %d: %s", i, out)
		case i == 5 && (status != "HTTP/1.1 403 Forbidden" || !strings.Contains(string(out), `"reason":"quotaExceeded"`) ||
			!regexp.MustCompile(`(?i)\r\nretry-after: \d+\r\n`).MatchString(string(out))):
			t.Fatalf("call %d, past the budget: %s", i, out)
		}
	}
	if sim.QuotaExceeded() != 0 || sim.Used(key, "units") != 5 {
		t.Errorf("upstream: %d quota errors, %d units used; want 0 and 5", sim.QuotaExceeded(), sim.Used(key, "units"))
	}
}
