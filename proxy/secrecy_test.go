package proxy_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/dashboard"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/internal/ytsim"
	"github.com/quotactl/quotactl/proxy"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/promquota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// The held key and the keys clients send never appear in the proxy's
// logs, its answers, its metrics, the dashboard or the store's file,
// through admitted, refused, foreign-key, bad and failed calls.
func TestKeysNeverLeak(t *testing.T) {
	const held = "AIzaSy-HELD-9f8e7d6c5b4a"
	const sent = "AIzaSy-SENT-1a2b3c4d5e6f"
	const mapped = "AIzaSy-MAPPED-0a0b0c0d"
	sim := ytsim.New(ytsim.WithLimit("units", 3))
	defer sim.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "quota.db")
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	table, _ := costs.Builtin("youtube")
	coll := promquota.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(coll)
	var logs testkit.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	lim, err := quota.New(st, table.API, table.Budgets, quota.WithObserver(coll), quota.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	var answers bytes.Buffer
	hit := func(base, target string, header ...string) {
		r := get(t, base+target, header...)
		answers.WriteString(r.body)
		for k, vs := range r.header {
			answers.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
		}
	}
	newProxy := func(cfg proxy.Config) string {
		cfg.Table, cfg.Limiter, cfg.Logger = table, lim, log
		p, err := proxy.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(p)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	// A proxy holding the key: admitted, spent upstream, refused, foreign.
	heldURL := newProxy(proxy.Config{Upstream: sim.URL(), Credential: held, Label: "yt-held"})
	for range 5 {
		hit(heldURL, "/youtube/v3/videos?part=id&id=a")
	}
	hit(heldURL, "/youtube/v3/videos?part=id&id=a&key="+sent)
	hit(heldURL, "/youtube/v3/videos?part=id&id=a&key="+held)
	hit(heldURL, "/youtube/v3/nothing?key="+held)
	// Clients' keys, owners mapped, an upstream that is down.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	down := "http://" + ln.Addr().String()
	ln.Close()
	downURL := newProxy(proxy.Config{Upstream: down, Credential: held})
	hit(downURL, "/youtube/v3/search?part=id&q=x")
	mappedURL := newProxy(proxy.Config{Upstream: sim.URL(), Owners: map[string]string{mapped: "proj-m"}})
	for range 3 {
		hit(mappedURL, "/youtube/v3/search?part=id&q=x&key="+mapped)
		hit(mappedURL, "/youtube/v3/search?part=id&q=x", "X-Goog-Api-Key", sent)
	}
	hit(mappedURL, "/youtube/v3/search?part=id&q=x", "Authorization", "Bearer "+sent)
	_ = lim.Flush(context.Background())

	// Metrics and the dashboard over the same store.
	var metrics bytes.Buffer
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	metrics.Write(rec.Body.Bytes())
	dash, err := dashboard.New(st)
	if err != nil {
		t.Fatal(err)
	}
	var pages bytes.Buffer
	for _, p := range []string{"/", "/api/status", "/api/snapshot", "/metrics", "/api/history"} {
		rec := httptest.NewRecorder()
		dash.ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
		pages.Write(rec.Body.Bytes())
	}
	if !strings.Contains(metrics.String(), "quota_units_total") || !strings.Contains(pages.String(), "youtube") {
		t.Fatalf("nothing to check: metrics %d bytes, dashboard %d bytes", metrics.Len(), pages.Len())
	}
	if !strings.Contains(logs.String(), "proxy: refused") || !strings.Contains(logs.String(), "upstream unreachable") {
		t.Fatalf("the calls did not take the paths meant: %s", logs.String())
	}
	db, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(path + "-wal")
	for what, s := range map[string]string{
		"logs": logs.String(), "answers": answers.String(), "metrics": metrics.String(),
		"dashboard": pages.String(), "store file": string(db) + string(wal),
	} {
		for _, k := range []string{held, sent, mapped} {
			for _, form := range []string{k, url.QueryEscape(k), k[len(k)-10:]} {
				if strings.Contains(s, form) {
					t.Errorf("%s holds a key (%q)", what, form)
				}
			}
		}
	}
}
