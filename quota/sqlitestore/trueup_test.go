package sqlitestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
	"github.com/quotactl/quotactl/quota/storetest"
)

// TestTrueUpShared: a true-up through one Store on a file is what another
// Store on the same file (another connection, as another process has)
// decides on.
func TestTrueUpShared(t *testing.T) {
	a, path := openTemp(t)
	b, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	storetest.TrueUpShared(t, a, b)
}

// trueUpChild is what the child role "trueup" does: open Path, true the
// budget of trueUpBudgets up to Used, upstream's reset at Reset, at the
// fixed instant Clock, and print the outcome as JSON.
type trueUpChild struct {
	Path         string
	Clock, Reset time.Time
	Used         int64
}

var (
	trueUpBudgets = []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}}
	trueUpKey     = quota.Credential{Secret: "trueup-key", Owner: "project"}
)

func runTrueUpChild(cfg string) int {
	var c trueUpChild
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		fmt.Fprintln(os.Stderr, "trueup child:", err)
		return 2
	}
	st, err := sqlitestore.Open(c.Path, sqlitestore.WithBusyTimeout(30*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "trueup child:", err)
		return 2
	}
	defer st.Close()
	l, err := quota.New(st, "api", trueUpBudgets, quota.WithClock(func() time.Time { return c.Clock }))
	if err != nil {
		fmt.Fprintln(os.Stderr, "trueup child:", err)
		return 2
	}
	out, err := l.TrueUp(context.Background(), trueUpKey, quota.Report{Budget: "units", Used: c.Used, Remaining: -1, Reset: c.Reset})
	if err != nil {
		fmt.Fprintln(os.Stderr, "trueup child:", err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// TestTrueUpAcrossProcesses: a true-up made by another process (this test
// binary re-executed) on the shared file is seen by this process's Take:
// refused with RetryAt at the upstream's reset, admitted from then on.
func TestTrueUpAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	st, path := openTemp(t)
	clock := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	l, err := quota.New(st, "api", trueUpBudgets, quota.WithClock(func() time.Time { return clock }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx, trueUpKey, quota.Units("units", 40)); err != nil {
		t.Fatal(err)
	}
	reset := clock.Add(15 * time.Minute)
	js, _ := json.Marshal(trueUpChild{Path: path, Clock: clock.Add(time.Minute), Reset: reset, Used: 90})
	cmd := testkit.Child(t, "trueup", string(js))
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("trueup child: %v\n%s", err, stdout.String())
	}
	var out quota.TrueUpOutcome
	if err := json.Unmarshal([]byte(stdout.String()), &out); err != nil || out.Counted != 40 || out.Added != 50 {
		t.Fatalf("the child's true-up: %+v, %v (%q); want counted 40, added 50", out, err, stdout.String())
	}
	clock = clock.Add(2 * time.Minute)
	_, err = l.Take(ctx, trueUpKey, quota.Units("units", 20))
	var e *quota.ExhaustedError
	if !errors.As(err, &e) || !e.RetryAt.Equal(reset) || e.Used != 90 {
		t.Fatalf("Take of 20 after the other process's true-up = %v; want refused at 90 used until %v", err, reset)
	}
	clock = reset
	if _, err := l.Take(ctx, trueUpKey, quota.Units("units", 60)); err != nil {
		t.Fatalf("Take of 60 at the upstream's reset: %v", err)
	}
}
