package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/cmd/quotactl/internal/cli"
)

// quietRedis drops go-redis's own log lines (pool dial retries, Sentinel
// notes): quotactl reports a failure in its one error line.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quietRedis{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], &cli.IO{
		In:        os.Stdin,
		Out:       os.Stdout,
		ErrOut:    os.Stderr,
		LookupEnv: os.LookupEnv,
		TTY:       isTerminal(os.Stdout),
		Width:     termWidth(os.Stdout),
	})
	stop()
	os.Exit(code)
}

// isTerminal reports whether f is a terminal (a character device), unless
// $QUOTACTL_FORCE_TTY says: 1 for yes, 0 for no.
func isTerminal(f *os.File) bool {
	switch os.Getenv("QUOTACTL_FORCE_TTY") {
	case "1":
		return true
	case "0":
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
