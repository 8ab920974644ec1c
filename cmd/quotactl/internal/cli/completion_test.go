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

// TestCompletionOfCredentialsAndReservations: the credential subcommands
// complete the API, then the credentials it knows (labels, and the
// fingerprints of credentials without one, which only a fingerprint names);
// refund completes a reservation ID a step at a time: API/, API/ACCOUNT/,
// then the IDs still in their window, and the ID completed refunds.
func TestCompletionOfCredentialsAndReservations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup()
	e.ok("budget", "set", "github/core", "--limit", "5000", "--window", "1h")
	e.vars["GH"], e.vars["NEW"] = "ghp-completion", "AIzaSy-key-rotated"
	id := strings.TrimSpace(e.ok("take", "github", "--credential-env", "GH", "--label", "gh-bot", "--owner", "acme", "--cost", "7"))
	e.ok("credential", "rotate", "youtube", "yt-key-1", "--credential-env", "NEW")
	old := quota.DefaultFingerprint("AIzaSy-key-one")

	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"credential", "list", ""}, []string{"github", "youtube"}},
		{[]string{"credential", "rotate", ""}, []string{"github", "youtube"}},
		{[]string{"credential", "rotate", "github", ""}, []string{"gh-bot"}},
		{[]string{"credential", "relabel", "youtube", ""}, []string{old, "yt-key-1"}},
		{[]string{"credential", "relabel", "youtube", "yt-key-1", ""}, nil},
		{[]string{"credential", "forget", "youtube", ""}, []string{old, "yt-key-1"}},
		{[]string{"credential", "forget", "youtube", old, ""}, nil},
		{[]string{"refund", ""}, []string{"github/", "youtube/"}},
		{[]string{"refund", "gith"}, []string{"github/"}},
		{[]string{"refund", "github/"}, []string{"github/acme/"}},
		{[]string{"refund", "youtube/"}, []string{"youtube/" + old + "/"}},
		{[]string{"refund", "github/acme/"}, []string{id}},
		{[]string{"refund", id, ""}, nil},
	} {
		got := completions(t, e, c.args...)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("complete %q: %q, want %q", c.args, got, c.want)
		}
	}
	if out := e.ok("refund", id); !strings.Contains(out, "refunded "+id) {
		t.Errorf("refund of the completed ID: %q", out)
	}
	if got := completions(t, e, "refund", "github/acme/"); len(got) != 0 {
		t.Errorf("a refunded reservation still completes: %q", got)
	}
}
