package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/internal/ytsim"
	"github.com/quotactl/quotactl/proxy"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storeurl"
)

// childCfg is what a proxy child process serves.
type childCfg struct {
	Store    string // store URL
	Upstream string
	Limit    int64 // the units budget's limit
}

// youtubeWithLimit is the YouTube table with the units budget's limit
// set to limit (a project whose quota is small), without the methods that
// cost more.
func youtubeWithLimit(limit int64) (*costs.Table, error) {
	yt, err := costs.Builtin("youtube")
	if err != nil {
		return nil, err
	}
	spec := yt.Spec()
	for i := range spec.Budgets {
		if spec.Budgets[i].Name == "units" {
			spec.Budgets[i].Limit = limit
		}
	}
	// Drop the methods that cost more than the smaller limit: a table
	// never prices a call it could never pay.
	kept := spec.Methods[:0]
	for _, m := range spec.Methods {
		if m.Cost["units"] <= limit {
			kept = append(kept, m)
		}
	}
	spec.Methods = kept
	return costs.New(spec)
}

// runProxyChild serves a proxy over the store cfg names, prints its
// address, and stops (gracefully) when its stdin closes.
func runProxyChild(arg string) int {
	var cfg childCfg
	if err := json.Unmarshal([]byte(arg), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := storeurl.Open(ctx, cfg.Store)
	if err != nil {
		fmt.Fprintln(os.Stderr, "store:", err)
		return 1
	}
	defer st.Close()
	table, err := youtubeWithLimit(cfg.Limit)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	lim, err := quota.New(st, table.API, table.Budgets)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p, err := proxy.New(proxy.Config{Upstream: cfg.Upstream, Table: table, Limiter: lim, Owner: "proj",
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(ln.Addr().String())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := p.Serve(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startChildren starts n proxy processes over store in front of upstream
// and returns their base URLs.
func startChildren(t *testing.T, n int, cfg childCfg) []string {
	t.Helper()
	js, _ := json.Marshal(cfg)
	var urls []string
	for range n {
		cmd := testkit.Child(t, "proxy", string(js))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stdin.Close() })
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatalf("proxy child: %v", err)
		}
		urls = append(urls, "http://"+strings.TrimSpace(line))
	}
	return urls
}

// spend runs clients concurrent clients over the proxies, each calling
// videos.list until the proxy refuses it, and returns the calls admitted.
func spend(t *testing.T, urls []string, clients int) int64 {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer client.CloseIdleConnections()
	var admitted, other atomic.Int64
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			base := urls[i%len(urls)]
			for {
				resp, err := client.Get(base + "/youtube/v3/videos?part=id&id=v1&key=mp-key")
				if err != nil {
					other.Add(1)
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case resp.StatusCode == 200:
					admitted.Add(1)
					continue
				case resp.StatusCode == 403 && strings.Contains(string(body), "quotactl proxy"):
				default:
					other.Add(1)
					t.Errorf("client %d: %d %s", i, resp.StatusCode, body)
				}
				return
			}
		})
	}
	wg.Wait()
	return admitted.Load()
}

// 200 concurrent clients over 4 proxy processes sharing one store never
// overspend: every admitted call fits the limit, and the upstream never
// answers a quota error.
func TestManyProcessesNeverOverspend(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 processes per store (-short)")
	}
	const limit = 300
	stores := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return storeurl.SQLiteURL(filepath.Join(t.TempDir(), "quota.db")) },
		"redis": func(t *testing.T) string {
			// a real Redis, else the in-process miniredis, which the
			// children reach over TCP all the same (CI requires a real one)
			_, addr := redistest.Shared(t)
			return "redis://" + addr + "/0?prefix=" + redistest.Prefix(t)
		},
	}
	for _, name := range []string{"sqlite", "redis"} {
		t.Run(name, func(t *testing.T) {
			sim := ytsim.New(ytsim.WithLimit("units", limit))
			defer sim.Close()
			urls := startChildren(t, 4, childCfg{Store: stores[name](t), Upstream: sim.URL(), Limit: limit})
			got := spend(t, urls, 200)
			if got != limit || sim.Used("mp-key", "units") != limit {
				t.Errorf("admitted %d, upstream charged %d: want %d each", got, sim.Used("mp-key", "units"), limit)
			}
			if sim.QuotaExceeded() != 0 {
				t.Errorf("the upstream answered %d quota errors", sim.QuotaExceeded())
			}
			t.Logf("%s: 200 clients over 4 processes: %d admitted of %d, %d upstream requests, 0 quota errors", name, got, limit, sim.Requests())
		})
	}
}
