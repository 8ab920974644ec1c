package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// parseCommandLine parses args (without "quotactl") as quotactl would,
// with the real command tree, and stops before running anything: the
// command exists and runs, its flags exist and their values parse, its
// arguments are as many as it takes, and flags it requires are given.
// Values a command reads itself (a --every duration, a --daily zone) are
// checked by the tests that run it, not here.
func parseCommandLine(args []string) error {
	var out bytes.Buffer
	g := &globals{io: &IO{In: strings.NewReader(""), Out: &out, ErrOut: &out, LookupEnv: func(string) (string, bool) { return "", false }}}
	root := newRoot(g)
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if !cmd.Runnable() {
		return fmt.Errorf("%s does not run", cmd.CommandPath())
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	for _, check := range []func() error{
		func() error { return cmd.ValidateArgs(cmd.Flags().Args()) },
		cmd.ValidateRequiredFlags,
		cmd.ValidateFlagGroups,
	} {
		if err := check(); err != nil {
			return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
		}
	}
	if cmd == root && len(args) > 0 {
		return fmt.Errorf("no command in %q", args)
	}
	return nil
}

// TestDocCommandsParse parses every quotactl command line the README and
// the guides show (testdata/doc-commands.txt, which the repository root's
// TestDocs keeps equal to them) with the real command tree.
func TestDocCommandsParse(t *testing.T) {
	src, err := os.ReadFile("testdata/doc-commands.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range strings.Split(strings.TrimSuffix(string(src), "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		var args []string
		if err := json.Unmarshal([]byte(line), &args); err != nil {
			t.Fatalf("testdata/doc-commands.txt:%d: %v", i+1, err)
		}
		n++
		if err := parseCommandLine(args); err != nil {
			t.Errorf("quotactl %s: %v", strings.Join(args, " "), err)
		}
	}
	if n == 0 {
		t.Error("testdata/doc-commands.txt lists no command")
	}
}

// TestParseCommandLine: what parseCommandLine refuses.
func TestParseCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"status"}, true},
		{[]string{"--store", "memory:", "status", "youtube", "--label", "yt-key-1"}, true},
		{[]string{"take", "youtube", "--label", "yt-key-1", "--cost", "1", "--budget", "units"}, true},
		{[]string{"credential", "rotate", "youtube", "yt-key-1", "--credential-env", "NEW_KEY"}, true},
		{[]string{"budget", "set", "youtube/units", "--limit", "10000", "--daily", "America/Los_Angeles"}, true},
		{[]string{"stauts"}, false},                                  // no such command
		{[]string{"credential", "rename", "youtube"}, false},         // no such subcommand
		{[]string{"take", "youtube", "--labels", "yt-key-1"}, false}, // no such flag
		{[]string{"take", "youtube", "--cost", "ten"}, false},        // not a number
		{[]string{"refund"}, false},                                  // an argument missing
		{[]string{"serve", "--refresh", "soon"}, false},              // not a duration
	} {
		err := parseCommandLine(tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("quotactl %s: %v, want ok=%v", strings.Join(tc.args, " "), err, tc.ok)
		}
	}
}
