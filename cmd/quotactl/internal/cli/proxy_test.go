package cli

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/internal/ytsim"
)

// startProxy runs proxy on opts until the test ends and returns its base
// URL and its admin URL ("" without --admin).
func startProxy(t *testing.T, opts *proxyOptions) (string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	type addrs struct{ addr, admin string }
	ready := make(chan addrs, 1)
	opts.ready = func(a, admin string) { ready <- addrs{a, admin} }
	done := make(chan error, 1)
	go func() { done <- proxyRun(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy stopped with %v", err)
		}
	})
	select {
	case a := <-ready:
		admin := ""
		if a.admin != "" {
			admin = "http://" + a.admin
		}
		return "http://" + a.addr, admin
	case err := <-done:
		t.Fatalf("proxy: %v", err)
	}
	return "", ""
}

// quotactl proxy in front of the YouTube simulator: a held key, an owner,
// a refusal in YouTube's shape, metrics on the admin address, and the
// store recording the owner's usage for quotactl status.
func TestProxyCommand(t *testing.T) {
	const key = "AIzaSy-cli-proxy-key-77"
	sim := ytsim.New(ytsim.WithKeys(key))
	defer sim.Close()
	e := newEnv(t)
	e.vars["YT_KEY"] = key
	g, out, errOut := e.g()
	base, admin := startProxy(t, &proxyOptions{globals: g, Table: "youtube", Upstream: sim.URL(), Listen: "127.0.0.1:0",
		Admin: "127.0.0.1:0", Owner: "proj-1", CredEnv: "YT_KEY", Label: "yt-key-1", TokenEnv: proxyTokenEnv})
	if !strings.Contains(out.String(), "quotactl: proxy on http://127.0.0.1:") || !strings.Contains(out.String(), "holding the credential") {
		t.Errorf("proxy said %q", out.String())
	}
	for range 100 {
		code, body := fetch(t, base+"/youtube/v3/search?part=id&q=go", "")
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	code, body := fetch(t, base+"/youtube/v3/search?part=id&q=go", "")
	if code != http.StatusForbidden || !strings.Contains(body, `"reason":"quotaExceeded"`) {
		t.Fatalf("101st search: %d %s", code, body)
	}
	if sim.QuotaExceeded() != 0 || sim.Received(key, "search") != 100 {
		t.Errorf("upstream: %d quota errors, %d searches", sim.QuotaExceeded(), sim.Received(key, "search"))
	}
	if !strings.Contains(errOut.String(), "proxy: refused") || strings.Contains(errOut.String(), key) {
		t.Errorf("stderr %q", errOut.String())
	}
	code, metrics := fetch(t, admin+"/metrics", "")
	if code != 200 || !strings.Contains(metrics, `quota_units_total{api="youtube",budget="search",method="search.list",outcome="admitted",owner="proj-1"} 100`) ||
		!strings.Contains(metrics, "quota_store_used_units") || strings.Contains(metrics, key) {
		t.Errorf("metrics: %d\n%s", code, metrics)
	}
	st := e.usage("youtube")
	if st["yt-key-1/search"].Used != 100 || st["yt-key-1/search"].Owner != "proj-1" {
		t.Errorf("status: %+v", st)
	}
}

// Bad command lines are usage errors that say what is wrong, and the
// proxy never listens beyond loopback without a token.
func TestProxyCommandBadInput(t *testing.T) {
	e := newEnv(t)
	owners := filepath.Join(t.TempDir(), "owners")
	if err := os.WriteFile(owners, []byte("only-one-field\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.vars["EMPTY"] = ""
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy", "--upstream", "http://127.0.0.1:9"}, "--table is required"},
		{[]string{"proxy", "--table", "youtube"}, "--upstream is required"},
		{[]string{"proxy", "--table", "youtube", "--upstream", "http://127.0.0.1:9", "--listen", "0.0.0.0:0"}, "reachable from other hosts: give a token"},
		{[]string{"proxy", "--table", "youtube", "--upstream", "http://127.0.0.1:9", "--admin", ":0"}, "--admin :0 is reachable from other hosts"},
		{[]string{"proxy", "--table", "youtube", "--upstream", "http://127.0.0.1:9/base"}, "scheme and host only"},
		{[]string{"proxy", "--table", "nosuch.yaml", "--upstream", "http://127.0.0.1:9"}, "nosuch.yaml"},
		{[]string{"proxy", "--table", "youtube", "--upstream", "http://127.0.0.1:9", "--owner", "a", "--owners", owners}, "not both"},
		{[]string{"proxy", "--table", "youtube", "--upstream", "http://127.0.0.1:9", "--owners", owners}, "owners:1: want a credential and its owner"},
		{[]string{"proxy", "--table", "youtube", "--upstream", "http://127.0.0.1:9", "--credential-env", "EMPTY"}, "$EMPTY is empty"},
		{[]string{"proxy", "--table", "youtube", "--upstream", "http://127.0.0.1:9", "--label", "x"}, "--label labels the held credential"},
	} {
		r := e.run(c.args...)
		if r.code != ExitUsage || !strings.Contains(r.errOut, c.want) || strings.Contains(r.errOut, "only-one-field") {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, r.code, r.errOut, ExitUsage, c.want)
		}
	}
}
