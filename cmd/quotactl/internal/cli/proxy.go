package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/internal/bearer"
	"github.com/quotactl/quotactl/proxy"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/promquota"
	"github.com/quotactl/quotactl/quota/storeurl"
)

// proxyTokenEnv is the default environment variable holding the proxy's
// token (--token-env).
const proxyTokenEnv = "QUOTA_PROXY_TOKEN"

// defaultProxyListen is where proxy listens unless --listen says otherwise.
const defaultProxyListen = "127.0.0.1:8787"

type proxyOptions struct {
	*globals
	Table, Upstream, Listen, Admin string
	Owner, Owners                  string
	CredEnv, CredFile, Label       string
	TokenEnv, TokenFile            string
	MaxBody                        int64
	MaxConns                       int
	Grace                          time.Duration
	// ready, when set, is called with the bound addresses once the proxy
	// listens (tests listen on port 0).
	ready func(addr, admin string)
}

func newCmdProxy(g *globals, runF func(context.Context, *proxyOptions) error) *cobra.Command {
	opts := &proxyOptions{globals: g}
	c := &cobra.Command{
		Use:   "proxy --table NAME|FILE --upstream URL [--listen ADDR]",
		Short: "Meter jobs in any language: a reverse proxy that charges each call before sending it",
		Long: `Serve the upstream API at --upstream through the metering Transport, so a job
in any language meters its calls by pointing its client's base URL at the
proxy (http://127.0.0.1:8787 by default). Every request is priced by the
cost table (--table: a built-in name such as youtube, or a JSON/YAML file),
charged to its credential's owner in the store, and sent only when
admitted; upstream errors are classified as the Go Transport classifies
them (an upstream quotaExceeded marks the budget spent in every process
sharing the store). Requests go only to --upstream, which the proxy prices
as the table's API host whatever hosts the table lists. Responses stream
(server-sent events included).

A refused call never reaches the upstream. It gets 429 with Retry-After and
an RFC 9457 problem document (budget, used, limit, cost, retry_after,
retry_at), or the upstream's own error shape when the table declares one
(refusal: google answers YouTube's 403 quotaExceeded, refusal: github
GitHub's 403 with x-ratelimit-remaining: 0), so the client library's own
handling applies. A store outage is a 503, never a refusal.

Owners: --owner NAME bills every credential to NAME; --owners FILE maps
credentials to owners, one "KEY OWNER" per line (kept only as fingerprints
once read); otherwise the owner the store records.

Keys can stay in the proxy: with --credential-env VAR or --credential-file F
the proxy adds the credential to each outbound request the way the table
says it travels (YouTube: the key parameter; otherwise Authorization:
Bearer), so jobs hold none; a request carrying another key is refused
(403). Keys never appear in logs, errors or answers.

Safe by default: listening beyond loopback requires a token (the first line
of --token-file, or $QUOTA_PROXY_TOKEN, or the variable --token-env names),
which clients send as "Proxy-Authorization: Bearer TOKEN" on every request.
Request bodies are bounded (--max-body, 413 past it) and so are connections
(--max-conns, 503 past it). SIGINT or SIGTERM stops accepting and lets the
calls in flight finish for up to --shutdown-grace.

--admin ADDR serves Prometheus metrics on http://ADDR/metrics: this proxy's
decisions (quota_units_total, ...) and the store's usage (quota_store_*).
Each refused call logs one line on stderr (budget, used, limit,
retry_after). See docs/proxy.md.`,
		Example: `  quotactl proxy --table youtube --upstream https://www.googleapis.com \
      --owner my-project --credential-env YOUTUBE_API_KEY --admin 127.0.0.1:9787
  # then, in Python: build('youtube', 'v3', developerKey='unused',
  #     client_options={'api_endpoint': 'http://127.0.0.1:8787'})`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case opts.Table == "":
				return usageErrorf("--table is required: a built-in table (youtube, ...) or a JSON/YAML file")
			case opts.Upstream == "":
				return usageErrorf("--upstream is required: the API's base URL, such as https://www.googleapis.com")
			case opts.Owner != "" && opts.Owners != "":
				return usageErrorf("give --owner or --owners, not both")
			case opts.MaxBody < 0 || opts.MaxConns < 0 || opts.Grace < 0:
				return usageErrorf("--max-body, --max-conns and --shutdown-grace must be >= 0")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return proxyRun(cmd.Context(), opts)
		},
	}
	f := c.Flags()
	f.StringVar(&opts.Table, "table", "", "the cost table: a built-in `NAME` or a JSON/YAML FILE (required)")
	f.StringVar(&opts.Upstream, "upstream", "", "the API's base `URL`, scheme and host only (required)")
	f.StringVar(&opts.Listen, "listen", defaultProxyListen, "address to listen on, `HOST:PORT`; beyond loopback a token is required")
	f.StringVar(&opts.Admin, "admin", "", "serve /metrics on this `HOST:PORT` (default: no admin address)")
	f.StringVar(&opts.Owner, "owner", "", "bill every credential to owner `NAME` (a Cloud project)")
	f.StringVar(&opts.Owners, "owners", "", "read credential-to-owner lines (\"KEY OWNER\") from `FILE`")
	f.StringVar(&opts.CredEnv, "credential-env", "", "hold the credential from environment variable `VAR` and add it to every request")
	f.StringVar(&opts.CredFile, "credential-file", "", "hold the credential from the first line of `FILE` and add it to every request")
	f.StringVar(&opts.Label, "label", "", "label the held credential in the store, e.g. yt-key-1")
	f.StringVar(&opts.TokenEnv, "token-env", proxyTokenEnv, "environment variable `VAR` holding the token clients must send")
	f.StringVar(&opts.TokenFile, "token-file", "", "read the token clients must send from the first line of `FILE`")
	f.Int64Var(&opts.MaxBody, "max-body", proxy.DefaultMaxBody, "largest request body, in `BYTES` (413 past it)")
	f.IntVar(&opts.MaxConns, "max-conns", proxy.DefaultMaxConns, "most connections served at once (503 past it)")
	f.DurationVar(&opts.Grace, "shutdown-grace", proxy.DefaultShutdownGrace, "how long calls in flight may finish after SIGTERM")
	return c
}

// config reads what proxyRun needs besides the store: the table, the
// held credential, the owners and the token.
func (opts *proxyOptions) config() (proxy.Config, string, error) {
	_, table, err := loadTable("", opts.Table)
	if err != nil {
		return proxy.Config{}, "", err
	}
	secret, err := opts.secret(credFlags{Env: opts.CredEnv, File: opts.CredFile})
	if err != nil {
		return proxy.Config{}, "", err
	}
	if opts.Label != "" && secret == "" {
		return proxy.Config{}, "", usageErrorf("--label labels the held credential: give --credential-env or --credential-file")
	}
	cfg := proxy.Config{
		Upstream: opts.Upstream, Table: table, Owner: opts.Owner, Credential: secret, Label: opts.Label,
		MaxBody: opts.MaxBody, MaxConns: opts.MaxConns, ShutdownGrace: opts.Grace,
	}
	if opts.Owners != "" {
		f, err := os.Open(opts.Owners)
		if err != nil {
			return proxy.Config{}, "", usageErrorf("--owners: %v", err)
		}
		defer f.Close()
		if cfg.Owners, err = proxy.ParseOwners(opts.Owners, f); err != nil {
			return proxy.Config{}, "", usageErrorf("--owners: %v", err)
		}
	}
	token, err := opts.tokenFrom("", opts.TokenFile, opts.TokenEnv)
	if err != nil {
		return proxy.Config{}, "", err
	}
	cfg.Token = token
	for flag, addr := range map[string]string{"--listen": opts.Listen, "--admin": opts.Admin} {
		if addr == "" {
			continue
		}
		loop, err := isLoopback(addr)
		if err != nil {
			return proxy.Config{}, "", usageErrorf("%s %q: want HOST:PORT, such as 127.0.0.1:8787: %v", flag, addr, err)
		}
		if err := checkPort(addr); err != nil {
			return proxy.Config{}, "", err
		}
		if !loop && token == "" {
			return proxy.Config{}, "", usageErrorf("%s %s is reachable from other hosts: give a token ($%s, or --token-file F), or listen on 127.0.0.1", flag, addr, opts.TokenEnv)
		}
	}
	return cfg, token, nil
}

func proxyRun(ctx context.Context, opts *proxyOptions) error {
	cfg, token, err := opts.config()
	if err != nil {
		return err
	}
	st, err := opts.Store(ctx)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(opts.io.ErrOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	events := promquota.New()
	lim, err := quota.New(st, cfg.Table.API, cfg.Table.Budgets, append(opts.limiterOptions(), quota.WithObserver(events), quota.WithLogger(log))...)
	if err != nil {
		return err
	}
	defer lim.Close(context.WithoutCancel(ctx))
	cfg.Limiter, cfg.Logger = lim, log
	p, err := proxy.New(cfg)
	if err != nil {
		return usageErrorf("%v", err)
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", opts.Listen, err)
	}
	adminAddr := ""
	if opts.Admin != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(events, promquota.NewStoreCollector(st))
		aln, err := net.Listen("tcp", opts.Admin)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("listen on %s (--admin): %w", opts.Admin, err)
		}
		adminAddr = aln.Addr().String()
		stop := serveAdmin(aln, reg, token, log)
		defer stop()
	}
	where := fmt.Sprintf("table %s, store %s", cfg.Table.API, storeurl.Redact(opts.storeName()))
	if cfg.Credential != "" {
		where += ", holding the credential"
	}
	if token != "" {
		where += ", token required"
	}
	fmt.Fprintf(opts.io.Out, "quotactl: proxy on http://%s/ for %s (%s); Ctrl-C stops it\n", ln.Addr(), storeurl.Redact(cfg.Upstream), where)
	if adminAddr != "" {
		fmt.Fprintf(opts.io.Out, "quotactl: metrics on http://%s/metrics\n", adminAddr)
	}
	if opts.ready != nil {
		opts.ready(ln.Addr().String(), adminAddr)
	}
	if err := p.Serve(ctx, ln); err != nil {
		return err
	}
	return lim.Flush(context.WithoutCancel(ctx))
}

// serveAdmin serves /metrics from reg on ln, with the proxy's token when
// it has one; the returned func stops it.
func serveAdmin(ln net.Listener, reg *prometheus.Registry, token string, log *slog.Logger) func() {
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && !bearer.Check(r.Header, "Authorization", token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="quotactl proxy"`)
			http.Error(w, "proxy: a token is required (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
			return
		}
		metrics.ServeHTTP(w, r)
	}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("proxy: admin server", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
}
