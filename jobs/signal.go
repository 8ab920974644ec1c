package jobs

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// SignalContext returns a copy of parent that is cancelled on the first
// SIGINT or SIGTERM, for Scheduler.Run or RunOnce: the jobs' contexts are
// cancelled and they get the stop timeout to save a checkpoint and return.
// After that first signal the default handling is restored, so a second
// Ctrl-C kills the process at once. Call stop to release the signal
// handler early.
//
//	ctx, stop := jobs.SignalContext(context.Background())
//	defer stop()
//	err := sched.Run(ctx)
func SignalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, stop = signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // restore default handling: a second signal kills
	}()
	return ctx, stop
}
