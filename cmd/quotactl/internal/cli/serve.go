package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/dashboard"
	"github.com/quotactl/quotactl/quota/storeurl"
)

// tokenEnv is the environment variable holding the dashboard's token.
const tokenEnv = "QUOTA_DASHBOARD_TOKEN"

// defaultListen is where serve listens unless --listen says otherwise.
const defaultListen = "127.0.0.1:8080"

type serveOptions struct {
	*globals
	Listen    string
	Token     string // --token, else --token-file, else $QUOTA_DASHBOARD_TOKEN
	TokenFile string
	Refresh   time.Duration
	// ready, when set, is called with the bound address once the server
	// listens (tests listen on port 0).
	ready func(addr string)
}

func newCmdServe(g *globals, runF func(context.Context, *serveOptions) error) *cobra.Command {
	opts := &serveOptions{globals: g}
	c := &cobra.Command{
		Use:   "serve [--listen ADDR] [--token-file F]",
		Short: "Serve a read-only web dashboard, /metrics and /api from the store",
		Long: `Serve a read-only web dashboard of the store on http://ADDR/ (default
127.0.0.1:8080): every owner and budget with a usage bar, what is left and
when it resets; a chart of each budget's window in the buckets history
picks (per hour for a day), in the budget's own time zone, scaled to the
limit and stacked by method; job runs with outcome
and what they spent; and the usage thresholds crossed. The page updates itself live
(server-sent events) and needs no internet access.

It also serves Prometheus metrics computed from the store on /metrics (so one
'quotactl serve' exports the usage of every process sharing the store:
quota_store_used_units, quota_store_limit_units, quota_store_remaining_units,
quota_store_reset_seconds and quota_store_exhausted per api, budget and owner,
quota_store_up, and quota_budget_info{api,budget,unit,window}, always 1, that
names the unit each budget counts in), and JSON with the field names of --json on /api/status,
/api/history, /api/jobs, /api/jobs/NAME, /api/thresholds and /api/snapshot.

Listening on anything but a loopback address requires a token: give it in
$QUOTA_DASHBOARD_TOKEN or --token-file F (first line), or --token T (visible
to other users in ps: prefer the others). Clients send it as
"Authorization: Bearer TOKEN"; a browser signs in once with a form. The token
is never shown or logged. The store is opened read-only where it supports
it; serve never changes it.

Stop it with Ctrl-C (SIGINT) or SIGTERM.`,
		Example: `  quotactl serve
  QUOTA_DASHBOARD_TOKEN=$(cat /etc/quotactl/token) quotactl serve --listen :8080
  curl -s localhost:8080/api/status | jq '.[] | select(.remaining < 100)'`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Refresh <= 0 {
				return usageErrorf("--refresh %v: must be > 0", opts.Refresh)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return serveRun(cmd.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Listen, "listen", defaultListen, "address to listen on, HOST:PORT; beyond loopback a token is required")
	c.Flags().StringVar(&opts.Token, "token", "", "token clients must send (visible in ps: prefer $"+tokenEnv+" or --token-file)")
	c.Flags().StringVar(&opts.TokenFile, "token-file", "", "read the token from the first line of this file")
	c.Flags().DurationVar(&opts.Refresh, "refresh", 5*time.Second, "how often the live page reads the store again")
	return c
}

// token returns the token from --token, --token-file or the environment
// (see tokenFrom).
func (opts *serveOptions) token() (string, error) {
	return opts.tokenFrom(opts.Token, opts.TokenFile, tokenEnv)
}

// tokenFrom returns the token from flag (--token), else file (--token-file,
// its first line), else the environment variable envName, without
// surrounding spaces (clients' headers are read trimmed, so a token kept
// with them could never match); one that is only spaces is an error, not a
// token no one can send. "" when none is given.
func (g *globals) tokenFrom(flag, file, envName string) (string, error) {
	switch {
	case flag != "":
		tok := strings.TrimSpace(flag)
		if tok == "" {
			return "", usageErrorf("--token is blank")
		}
		return tok, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", usageErrorf("--token-file: %v", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		line = strings.TrimSpace(line)
		if line == "" {
			return "", usageErrorf("--token-file %s: the first line is empty", file)
		}
		return line, nil
	}
	v, _ := g.env(envName)
	if tok := strings.TrimSpace(v); tok != "" || v == "" {
		return tok, nil
	}
	return "", usageErrorf("$%s is blank: set it to the token, or unset it", envName)
}

// isLoopback reports whether a listen address only accepts connections from
// this host: 127.0.0.0/8, ::1 or "localhost". An empty host (every
// interface) is not.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback(), nil
}

// checkPort returns a usage error unless addr's port is one net.Listen
// takes: a number from 0 to 65535 or a service name (such as http); empty
// means 0, any free port.
func checkPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return nil // isLoopback says what is wrong
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return usageErrorf("--listen %q: bad port %q: want a port number from 0 to 65535 (or a service name), such as 127.0.0.1:8080", addr, port)
	}
	return nil
}

func serveRun(ctx context.Context, opts *serveOptions) error {
	loop, err := isLoopback(opts.Listen)
	if err != nil {
		return usageErrorf("--listen %q: want HOST:PORT, such as 127.0.0.1:8080: %v", opts.Listen, err)
	}
	if err := checkPort(opts.Listen); err != nil {
		return err
	}
	token, err := opts.token()
	if err != nil {
		return err
	}
	if !loop && token == "" {
		return usageErrorf("--listen %s is reachable from other hosts: give a token ($%s, --token-file F or --token T), or listen on 127.0.0.1", opts.Listen, tokenEnv)
	}
	opts.mustExist = true
	st, err := opts.Store(ctx)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(opts.io.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dopts := []dashboard.Option{dashboard.WithRefresh(opts.Refresh), dashboard.WithLocation(opts.location()), dashboard.WithLogger(log)}
	if token != "" {
		dopts = append(dopts, dashboard.WithToken(token))
	}
	if opts.io.Clock != nil {
		dopts = append(dopts, dashboard.WithClock(opts.io.Clock))
	}
	h, err := dashboard.New(st, dopts...)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", opts.Listen, err)
	}
	// Long-lived requests (the live stream) end when serving stops.
	base, stopRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRequests()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	addr := ln.Addr().String()
	where := "store " + storeurl.Redact(opts.storeName())
	if token != "" {
		where += ", token required"
	}
	fmt.Fprintf(opts.io.Out, "quotactl: dashboard on http://%s/ (%s); Ctrl-C stops it\n", addr, where)
	if opts.ready != nil {
		opts.ready(addr)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	stopRequests()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("serve: stopping: %w", err)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// storeName is the store URL in use, for messages (redact it before
// printing).
func (g *globals) storeName() string {
	if u, _, err := g.storeSource(); err == nil && u != "" {
		return u
	}
	if d, err := storeurl.DefaultPath(); err == nil {
		return storeurl.SQLiteURL(d) // the path alone: serve creates nothing
	}
	return "(default)"
}
