package sqlitestore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// thresholdChild is what a worker of
// TestThresholdsOncePerWindowAcrossProcesses (the child role "threshold",
// given this as JSON) does: after reading a line on stdin, it takes 30
// units and refunds them, Rounds times, on a budget of 100 a day with a 25%
// threshold, at the fixed instant Clock, and prints each threshold event it
// is told of as "threshold PERCENT", then "done".
type thresholdChild struct {
	Path   string
	Clock  time.Time
	Rounds int
}

func runThresholdChild(cfg string) int {
	var c thresholdChild
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		fmt.Fprintln(os.Stderr, "threshold child:", err)
		return 2
	}
	st, err := sqlitestore.Open(c.Path, sqlitestore.WithBusyTimeout(30*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "threshold child:", err)
		return 2
	}
	defer st.Close()
	out := make(chan string, 100)
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}},
		quota.WithClock(func() time.Time { return c.Clock }), quota.WithThresholds(25),
		quota.WithObserver(quota.ObserverFunc(func(e quota.Event) {
			if e.Kind == quota.EventThreshold {
				out <- fmt.Sprintf("threshold %d", e.Percent)
			}
		})))
	if err != nil {
		fmt.Fprintln(os.Stderr, "threshold child:", err)
		return 2
	}
	ctx := context.Background()
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // start together
	key := quota.Credential{Secret: "threshold-key", Label: "t"}
	for range c.Rounds {
		r, err := l.Take(ctx, key, quota.Units("units", 30))
		if err != nil {
			fmt.Fprintln(os.Stderr, "threshold child: take:", err)
			return 1
		}
		if err := l.Refund(ctx, r); err != nil {
			fmt.Fprintln(os.Stderr, "threshold child: refund:", err)
			return 1
		}
	}
	if err := l.Flush(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "threshold child:", err)
		return 1
	}
	close(out)
	for s := range out {
		fmt.Println(s)
	}
	fmt.Println("done")
	return 0
}

// TestThresholdsOncePerWindowAcrossProcesses: two processes (this test
// binary re-executed) share one SQLite file and each cross 25% of the same
// budget many times in one day (a take of 30 units from 0, then a refund):
// the crossing is reported once in all, by one of them. The next day it is
// reported once again.
func TestThresholdsOncePerWindowAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quota.db")
	day := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	run := func(clock time.Time, children, rounds int) []string {
		t.Helper()
		js, _ := json.Marshal(thresholdChild{Path: path, Clock: clock, Rounds: rounds})
		type proc struct {
			cmd *exec.Cmd
			out *strings.Builder
			in  io.WriteCloser
		}
		var ps []proc
		for range children {
			cmd := testkit.Child(t, "threshold", string(js))
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, os.Stderr
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			ps = append(ps, proc{cmd, &out, in})
		}
		for _, p := range ps {
			_, _ = fmt.Fprintln(p.in)
			_ = p.in.Close()
		}
		var events []string
		for i, p := range ps {
			if err := p.cmd.Wait(); err != nil {
				t.Fatalf("child %d: %v\n%s", i, err, p.out)
			}
			lines := strings.Split(strings.TrimSpace(p.out.String()), "\n")
			if lines[len(lines)-1] != "done" {
				t.Fatalf("child %d printed %q", i, lines)
			}
			events = append(events, lines[:len(lines)-1]...)
		}
		return events
	}
	if got := run(day, 2, 20); len(got) != 1 || got[0] != "threshold 25" {
		t.Fatalf("one day, two processes, 40 crossings: events %q, want one \"threshold 25\"", got)
	}
	if got := run(day.Add(time.Hour), 1, 3); len(got) != 0 {
		t.Fatalf("later the same day: events %q, want none", got)
	}
	if got := run(day.Add(24*time.Hour), 2, 5); len(got) != 1 || got[0] != "threshold 25" {
		t.Fatalf("the next day: events %q, want one \"threshold 25\"", got)
	}
}
