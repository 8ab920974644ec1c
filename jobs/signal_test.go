package jobs_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

// TestSignalContext sends the process a real SIGTERM while a job runs under
// SignalContext: the run's context is cancelled, the job saves its
// checkpoint and returns, and the run is recorded as cancelled.
func TestSignalContext(t *testing.T) {
	store := quota.NewMemoryStore()
	s := jobs.New(store, jobs.WithLogger(new(logBuf).logger()))
	started := make(chan struct{})
	err := s.Add("ingest", "", func(ctx context.Context, run *jobs.Run) error {
		close(started)
		<-ctx.Done()
		if err := run.Save(context.WithoutCancel(ctx), "page-7"); err != nil {
			return err
		}
		return context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := jobs.SignalContext(context.Background())
	defer stop()
	go func() {
		<-started
		if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
			t.Error(err)
		}
	}()
	rec, err := s.RunOnce(ctx, "ingest")
	if rec.Outcome != jobs.Cancelled || err == nil || !strings.Contains(rec.Error, "terminated") {
		t.Errorf("outcome %q, error %q, err %v", rec.Outcome, rec.Error, err)
	}
	if cp, found, err := jobs.LoadCheckpoint(context.Background(), store, "ingest"); err != nil || !found || string(cp.Cursor) != `"page-7"` {
		t.Errorf("checkpoint %s, %v, %v", cp.Cursor, found, err)
	}
}
