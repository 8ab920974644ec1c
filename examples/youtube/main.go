// Command youtube ingests YouTube's trending videos for eight regions (US, GB,
// DE, FR, IN, BR, AU, CA) through quotactl's metered HTTP client, and stops
// cleanly when the quota budget is spent.
//
//	go run ./examples/youtube
//
// With no flags it starts a simulated YouTube Data API in process (it
// allows 40 units a day), meters it in the default SQLite store, makes one
// run that prints a line per region, and appends the videos to
// trending.jsonl. The first run spends the budget and stops with one log
// line saying which budget, what is left and when capacity returns; the next
// run resumes from the saved checkpoint (region and page) once there is
// budget again: tomorrow, or now with --headroom 0, which hands the 10
// held-back units to the job. Runs in separate processes share the budget
// through the store: `quotactl status` shows it. Started together, they
// take turns: one runs, the others are skipped (the job's lease) or do not
// start while the budget is spent.
//
// Flags:
//
//	--store URL         quota store (default: SQLite in the user's state dir)
//	--once              one run now, then exit (the default; for system cron)
//	--schedule SPEC     run on a cron schedule until SIGINT/SIGTERM, e.g. "*/15 * * * *"
//	--headroom N        units held back from the upstream's daily units (default 10)
//	--out FILE          JSON lines output (default trending.jsonl)
//	--upstream URL      the real API, e.g. https://www.googleapis.com (never the default); its host is metered
//	--api-key-env VAR   the environment variable holding the real API key
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/quotactl/quotactl/jobs"
)

func main() {
	var cfg config
	var once bool
	flag.StringVar(&cfg.store, "store", os.Getenv("QUOTA_STORE"), "quota store URL (default: SQLite in the user's state directory)")
	flag.BoolVar(&once, "once", false, "run once now and exit (the default without --schedule)")
	flag.StringVar(&cfg.schedule, "schedule", "", `run on this cron schedule until interrupted, e.g. "*/15 * * * *"`)
	flag.Int64Var(&cfg.headroom, "headroom", 10, "units held back from the upstream's daily limit of shared units, for other users of the key")
	flag.StringVar(&cfg.out, "out", "trending.jsonl", "file the results are appended to, as JSON lines")
	flag.StringVar(&cfg.upstream, "upstream", "", "real API base URL, e.g. https://www.googleapis.com (default: the simulator)")
	flag.StringVar(&cfg.keyEnv, "api-key-env", "", "environment variable holding the real API key")
	flag.StringVar(&cfg.project, "project", "", "Google Cloud project the key belongs to: every key of one project shares its quota (default: the simulator's project, or \"youtube-project\" with --upstream)")
	flag.Parse()
	if once && cfg.schedule != "" {
		fmt.Fprintln(os.Stderr, "youtube: --once and --schedule exclude each other")
		os.Exit(2)
	}

	ctx, stop := jobs.SignalContext(context.Background())
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "youtube:", err)
		os.Exit(1)
	}
}

// run runs the job once, or on cfg.schedule until ctx is done.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{ReplaceAttr: dropTime}))
	a, err := open(ctx, cfg, stdout, log)
	if err != nil {
		return err
	}
	defer a.Close()
	if cfg.schedule != "" {
		fmt.Fprintf(stdout, "schedule %q: next run %s; Ctrl-C stops\n", cfg.schedule, a.sched.Next("trending").Format("15:04:05 MST"))
		return a.sched.Run(ctx)
	}
	// An exhausted budget is a clean stop, not an error: exit status 0. So
	// are a run skipped because another process's run holds the job's
	// lease, and one not started because the budget is still spent.
	rec, err := a.sched.RunOnce(ctx, "trending")
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted; the next run resumes from the checkpoint")
	}
	switch rec.Outcome {
	case jobs.Skipped:
		fmt.Fprintf(stdout, "skipped: another run holds the job (%s) until %s at the latest\n", rec.Holder, rec.LeaseExpires.Local().Format("15:04:05 MST"))
	case jobs.Waiting:
		fmt.Fprintf(stdout, "not started: %s is spent; waiting for capacity until %s\n", rec.Exhausted.Budget, rec.Exhausted.RetryAt.Local().Format("2006-01-02 15:04 MST"))
	}
	return err
}

// dropTime leaves the time out of log lines: this is a terminal program.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}
