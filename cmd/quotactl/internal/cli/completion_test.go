package cli

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

// completions runs cobra's hidden completion command, as the shell scripts
// of `quotactl completion bash|zsh|fish` do, and returns the candidates.
func completions(t *testing.T, e *env, args ...string) []string {
	t.Helper()
	out := e.ok(append([]string{"__complete"}, args...)...)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, ":") || l == "" {
			continue // the directive
		}
		name, _, _ := strings.Cut(l, "\t")
		got = append(got, name)
	}
	return got
}

// TestCompletionFromStore: APIs, labels, budgets, API/BUDGET and jobs
// complete from the store the command line names.
func TestCompletionFromStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup()
	e.ok("budget", "set", "github/core", "--limit", "5000", "--window", "1h")
	e.vars["GH"] = "ghp-completion"
	e.ok("take", "github", "--credential-env", "GH", "--label", "gh-bot", "--owner", "acme", "--cost", "1")
	g, _, _ := e.g()
	sched := jobs.New(g.store.(quota.StateStore), jobs.WithClock(e.clock.Now), jobs.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err := sched.Add("trending", "", func(context.Context, *jobs.Run) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := sched.RunOnce(context.Background(), "trending"); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"status", ""}, []string{"github", "youtube"}},
		{[]string{"history", ""}, []string{"github", "youtube"}},
		{[]string{"history", "youtube", "--label", ""}, []string{"yt-key-1"}},
		{[]string{"take", "github", "--label", ""}, []string{"gh-bot"}},
		{[]string{"status", "--label", ""}, []string{"gh-bot", "yt-key-1"}},
		{[]string{"history", "youtube", "--label", "yt-key-1", "--budget", ""}, []string{"search", "units"}},
		{[]string{"exhaust", "github", "--budget", ""}, []string{"core"}},
		{[]string{"budget", "delete", ""}, []string{"github/core", "youtube/search", "youtube/units"}},
		{[]string{"jobs", ""}, []string{"trending"}},
		{[]string{"status", "--owner", ""}, []string{"acme"}},
		{[]string{"take", "youtube", "--owner", ""}, nil},
	} {
		got := completions(t, e, c.args...)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("complete %q: %q, want %q", c.args, got, c.want)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out := e.ok("completion", shell); !strings.Contains(out, "__complete") {
			t.Errorf("completion %s does not call __complete", shell)
		}
	}
}
