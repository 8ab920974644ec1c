package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
)

// TestStatusStoreLoss: after a Redis of the test's own is flushed under a
// running service, the service finds the loss and marks the budgets spent;
// quotactl status says the mark is a store loss (table and JSON), and
// quotactl adjust sets the true usage and clears it.
func TestStatusStoreLoss(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Server(t)
	e := newEnv(t)
	e.url = "redis://" + srv.Addr() + "?prefix=" + redistest.Prefix(t)
	e.setup()
	g, _, _ := e.g()

	// The service: a library limiter on the same store, the same clock.
	svc, err := quota.Load(ctx, g.store, "youtube", quota.WithClock(e.clock.Now),
		quota.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "AIzaSy-key-one", Label: "yt-key-1"}
	for range 4 {
		if _, err := svc.Take(ctx, key, quota.Units("units", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Client(t).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Take(ctx, key, quota.Units("units", 1)); !errors.Is(err, quota.ErrExhausted) || svc.StoreLosses() != 1 {
		t.Fatalf("Take after FLUSHALL = %v, %d losses; want refused, the loss found", err, svc.StoreLosses())
	}
	// FLUSHALL took the budget definitions and labels too: the service
	// recorded them again when it found the loss.

	for _, b := range []string{"units", "search"} {
		if u := e.usage("youtube")["yt-key-1/"+b]; !u.StoreLoss || u.ExhaustedUntil == nil || u.Remaining != 0 {
			t.Fatalf("status --json %s after the loss: %+v; want spent, store_loss", b, u)
		}
	}
	out := e.ok("status", "youtube")
	t.Logf("quotactl status after the loss:\n%s", out)
	if n := strings.Count(out, "(store loss)"); n != 2 {
		t.Fatalf("status after the loss says \"(store loss)\" %d times, want 2 (both budgets):\n%s", n, out)
	}

	e.ok("adjust", "youtube", "--label", "yt-key-1", "--budget", "units", "--used", "5")
	u := e.usage("youtube")["yt-key-1/units"]
	if u.StoreLoss || u.ExhaustedUntil != nil || u.Used != 5 {
		t.Fatalf("status after adjust: %+v; want used 5, no mark", u)
	}
}
