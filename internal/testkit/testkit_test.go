package testkit_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/quotactl/quotactl/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.RunChild(map[string]func(string) int{
		// echo prints its argument and what it reads on stdin.
		"echo": func(arg string) int {
			in, _ := io.ReadAll(os.Stdin)
			fmt.Printf("%s|%s", arg, in)
			return 0
		},
		"exit3": func(string) int { return 3 },
		"block": func(string) int { select {} },
	})
	os.Exit(m.Run())
}

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func TestBufferConcurrentWrites(t *testing.T) {
	var b testkit.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprint(&b, "x")
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); len(got) != 800 || strings.Trim(got, "x") != "" {
		t.Fatalf("8 goroutines wrote 100 x each; the buffer holds %q", got)
	}
	bs := b.Bytes()
	bs[0] = 'y'
	if b.String()[0] != 'x' {
		t.Fatal("Bytes shares its array with the buffer")
	}
}

func TestClockMovesByHand(t *testing.T) {
	c := testkit.NewClock(t0)
	if !c.Now().Equal(t0) {
		t.Fatalf("Now = %v, want %v", c.Now(), t0)
	}
	c.Add(90 * time.Second)
	if want := t0.Add(90 * time.Second); !c.Now().Equal(want) {
		t.Fatalf("after Add: %v, want %v", c.Now(), want)
	}
	c.Set(t0.Add(-time.Hour))
	if want := t0.Add(-time.Hour); !c.Now().Equal(want) {
		t.Fatalf("after Set: %v, want %v", c.Now(), want)
	}
	if !new(testkit.Clock).Now().IsZero() {
		t.Fatal("the zero Clock does not read the zero time")
	}
}

// TestClockTimerRetries: a backoff retry loop on the clock's timers waits
// out every backoff on the clock, at once.
func TestClockTimerRetries(t *testing.T) {
	c := testkit.NewClock(t0)
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.RandomizationFactor, b.Multiplier = time.Second, 0, 2
	b.Clock = c
	b.Reset()
	tries := 0
	err := backoff.RetryNotifyWithTimer(func() error {
		if tries++; tries < 4 {
			return errors.New("not yet")
		}
		return nil
	}, b, nil, c.NewTimer())
	if err != nil || tries != 4 {
		t.Fatalf("RetryNotifyWithTimer: %v after %d tries; want nil after 4", err, tries)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	if got := c.Waits(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Waits = %v, want %v", got, want)
	}
	if want := t0.Add(7 * time.Second); !c.Now().Equal(want) {
		t.Fatalf("the clock reads %v after the waits, want %v", c.Now(), want)
	}
}

func TestClockStuckTimer(t *testing.T) {
	c := testkit.NewClock(t0)
	started := 0
	tm := c.StuckTimer(func() { started++ })
	tm.Start(time.Minute)
	select {
	case <-tm.C():
		t.Fatal("a stuck timer fired")
	default:
	}
	if started != 1 || !c.Now().Equal(t0) || len(c.Waits()) != 1 || c.Waits()[0] != time.Minute {
		t.Fatalf("onStart called %d times, clock %v, waits %v; want 1, %v, [1m]", started, c.Now(), c.Waits(), t0)
	}
}

func TestChild(t *testing.T) {
	cmd := testkit.Child(t, "echo", "hello world")
	cmd.Stdin = strings.NewReader("from the parent")
	out, err := cmd.Output()
	if err != nil || string(out) != "hello world|from the parent" {
		t.Fatalf("echo child: %q, %v", out, err)
	}
	var ee *exec.ExitError
	if err := testkit.Child(t, "exit3", "").Run(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit3 child: %v, want exit status 3", err)
	}
	out, err = testkit.Child(t, "no-such-role", "").CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `no child role "no-such-role"`) {
		t.Fatalf("unknown role: %q, %v; want exit status 2 naming the role", out, err)
	}
}

// TestChildKilledAtCleanup: a child the test started and left running is
// killed when the test ends.
func TestChildKilledAtCleanup(t *testing.T) {
	var cmd *exec.Cmd
	t.Run("leaves a child running", func(t *testing.T) {
		cmd = testkit.Child(t, "block", "")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	})
	if cmd.ProcessState == nil || cmd.ProcessState.Success() {
		t.Fatalf("after the subtest the child is %v; want killed", cmd.ProcessState)
	}
}

// TestImportedOnlyByTests: no package a program links imports testkit or
// a package below it; only tests and the test-support packages do.
func TestImportedOnlyByTests(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goTool, "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/quotactl/quotactl/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const kit = "github.com/quotactl/quotactl/internal/testkit"
	support := map[string]bool{
		"github.com/quotactl/quotactl/quota/storetest":    true,
		"github.com/quotactl/quotactl/internal/redistest": true,
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		for imp := range strings.FieldsSeq(imports) {
			if (imp == kit || strings.HasPrefix(imp, kit+"/")) && !support[pkg] {
				t.Errorf("%s imports %s: only tests may", pkg, imp)
			}
		}
	}
}
