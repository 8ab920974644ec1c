package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
)

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{}) // as main does: errors are quotactl's one line
	redistest.Main(m)             // stops the shared Redis TestOnRedis starts
}

// snapshot is everything a store holds that quotactl shows.
func (e *env) snapshot() string {
	e.t.Helper()
	var b strings.Builder
	for _, a := range [][]string{
		{"--json", "list"}, {"--json", "status"}, {"--json", "history", "youtube", "--label", "yt-key-1"},
	} {
		b.WriteString(e.ok(a...))
	}
	return b.String()
}

// TestBadInput is part of the reliability suite: every bad input gives one
// clear stderr line and its documented exit code, and nothing recorded is
// lost.
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup()
	e.ok("take", "youtube", "--label", "yt-key-1", "--cost", "4", "--budget", "units")
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.db")
	notesText := bytes.Repeat([]byte("not a database, my notes\n"), 100)
	if err := os.WriteFile(notes, notesText, 0o600); err != nil {
		t.Fatal(err)
	}
	e.vars["KEY2"] = "AIzaSy-key-two"
	before := e.snapshot()

	tests := []struct {
		name string
		args []string
		code int
		want []string // parts of the stderr line
	}{
		{"unknown command", []string{"frobnicate"}, ExitUsage, []string{`unknown command "frobnicate" for "quotactl"`}},
		{"misspelt command", []string{"stauts"}, ExitUsage, []string{`did you mean "status"?`}},
		{"unknown subcommand", []string{"budget", "frob"}, ExitUsage, []string{`unknown command "frob" for "quotactl budget"`}},
		{"unknown flag", []string{"status", "--colour"}, ExitUsage, []string{"unknown flag: --colour", "quotactl status --help"}},
		{"unknown global flag", []string{"--verbose", "list"}, ExitUsage, []string{"unknown flag: --verbose"}},
		{"flag without value", []string{"take", "youtube", "--label", "yt-key-1", "--cost"}, ExitUsage, []string{"flag needs an argument: --cost"}},
		{"extra argument", []string{"list", "youtube"}, ExitUsage, []string{"quotactl list takes no arguments"}},
		{"missing argument", []string{"take", "--cost", "1"}, ExitUsage, []string{"quotactl take takes one API argument"}},
		{"bad duration", []string{"budget", "set", "youtube/units", "--limit", "5", "--window", "5 minutes"}, ExitUsage, []string{`--window "5 minutes": not a duration`}},
		{"bad zone", []string{"budget", "set", "youtube/search", "--limit", "5", "--daily", "America/Springfield"}, ExitUsage, []string{`--daily "America/Springfield": unknown time zone`}},
		{"no window", []string{"budget", "set", "youtube/units", "--limit", "5"}, ExitUsage, []string{"missing window"}},
		{"limit not a number", []string{"budget", "set", "youtube/units", "--limit", "lots", "--window", "1h"}, ExitUsage, []string{`invalid argument "lots" for "--limit"`}},
		{"limit 0", []string{"budget", "set", "youtube/units", "--limit", "0", "--window", "1h"}, ExitUsage, []string{"--limit 0: must be > 0"}},
		{"budget without API", []string{"budget", "set", "units", "--limit", "5", "--window", "1h"}, ExitUsage, []string{`"units": want API/BUDGET`}},
		{"bad budget name", []string{"budget", "set", "youtube/un its", "--limit", "5", "--window", "1h"}, ExitUsage, []string{"letters, digits"}},
		{"delete unknown budget", []string{"budget", "delete", "youtube/nope"}, ExitUsage, []string{"no budget youtube/nope"}},
		{"cost 0", []string{"take", "youtube", "--label", "yt-key-1", "--cost", "0"}, ExitUsage, []string{"--cost 0: must be > 0"}},
		{"negative cost", []string{"take", "youtube", "--label", "yt-key-1", "--cost", "-5"}, ExitUsage, []string{"--cost -5: must be > 0"}},
		{"fractional cost", []string{"take", "youtube", "--label", "yt-key-1", "--cost", "1.5"}, ExitUsage, []string{`invalid argument "1.5" for "--cost"`}},
		{"missing cost", []string{"take", "youtube", "--label", "yt-key-1"}, ExitUsage, []string{"missing --cost N"}},
		{"missing credential", []string{"take", "youtube", "--cost", "1"}, ExitUsage, []string{"missing credential"}},
		{"unknown label", []string{"take", "youtube", "--label", "yt-key-7", "--cost", "1"}, ExitUsage, []string{`unknown label "yt-key-7"`, "known: yt-key-1"}},
		{"label taken", []string{"take", "youtube", "--credential-env", "KEY2", "--label", "yt-key-1", "--cost", "1"}, ExitUsage, []string{`label taken: "yt-key-1" of api "youtube" is held by`, "quotactl credential rotate youtube yt-key-1"}},
		{"bad owner", []string{"take", "youtube", "--label", "yt-key-1", "--owner", "my project", "--cost", "1"}, ExitUsage, []string{`bad --owner "my project"`}},
		{"rotate unknown label", []string{"credential", "rotate", "youtube", "yt-key-7", "--credential-env", "KEY2"}, ExitUsage, []string{`no credential of api "youtube" has the label or fingerprint "yt-key-7"`}},
		{"rotate without a secret", []string{"credential", "rotate", "youtube", "yt-key-1"}, ExitUsage, []string{"missing new secret"}},
		{"rotate to the same key", []string{"credential", "rotate", "youtube", "yt-key-1", "--credential-env", "KEY1"}, ExitUsage, []string{"the new secret is the credential's own"}},
		{"relabel unknown", []string{"credential", "relabel", "youtube", "yt-key-7", "new"}, ExitUsage, []string{`"yt-key-7"`}},
		{"relabel to nothing", []string{"credential", "relabel", "youtube", "yt-key-1", " "}, ExitUsage, []string{"empty NEW-LABEL"}},
		{"relabel to a control character", []string{"credential", "relabel", "youtube", "yt-key-1", "yt-key-\x1b[2J"}, ExitUsage, []string{`NEW-LABEL "yt-key-\x1b[2J": control characters are not allowed in a label`}},
		{"forget unknown", []string{"credential", "forget", "youtube", "yt-key-7"}, ExitUsage, []string{`"yt-key-7"`}},
		{"credential list unknown API", []string{"credential", "list", "vimeo"}, ExitUsage, []string{`unknown API "vimeo"`}},
		{"credential env unset", []string{"take", "youtube", "--credential-env", "NO_SUCH_VAR", "--cost", "1"}, ExitUsage, []string{"$NO_SUCH_VAR is not set"}},
		{"credential file missing", []string{"take", "youtube", "--credential-file", filepath.Join(dir, "nope"), "--cost", "1"}, ExitUsage, []string{"no such file"}},
		{"unknown API", []string{"take", "vimeo", "--label", "yt-key-1", "--cost", "1"}, ExitUsage, []string{`no budgets for API "vimeo"`, "known: youtube"}},
		{"bad API name", []string{"status", "you tube"}, ExitUsage, []string{`bad API name "you tube"`}},
		{"unknown budget", []string{"take", "youtube", "--label", "yt-key-1", "--cost", "1", "--budget", "uploads"}, ExitUsage, []string{`no budget "uploads" in API "youtube" (budgets: search, units)`}},
		{"cost never fits", []string{"take", "youtube", "--label", "yt-key-1", "--cost", "11", "--budget", "units"}, ExitNeverFits, []string{"youtube/units: cost 11 is more than the whole limit of 10"}},
		{"budget spent", []string{"take", "youtube", "--label", "yt-key-1", "--cost", "3", "--budget", "search"}, ExitExhausted, []string{"youtube/search is spent for yt-key-1", "used 1 of 3", "frees up in 23h", "2026-11-23 08:00:00 UTC"}},
		{"unreachable store", []string{"--store", "redis://127.0.0.1:1", "status"}, ExitError, []string{"store unavailable", "127.0.0.1:1", "connection refused"}},
		{"password not shown", []string{"--store", "redis://:Sup3rSecret@127.0.0.1:1/0", "list"}, ExitError, []string{"redis://:xxxxx@127.0.0.1:1"}},
		{"password not shown in a URL missing //", []string{"--store", "redis:/:Sup3rSecret@127.0.0.1:1/0", "status"}, ExitUsage, []string{`bad store URL "redis:/:xxxxx@127.0.0.1:1/0": missing // after redis:`}},
		{"bare password not shown in a URL missing //", []string{"--store", "rediss:Sup3rSecret@h", "list"}, ExitUsage, []string{`bad store URL "rediss:xxxxx@h": missing // after rediss:`}},
		{"not a database", []string{"--store", "sqlite:" + notes, "status"}, ExitError, []string{notes, "not an SQLite database"}},
		{"directory as database", []string{"--store", "sqlite:" + dir, "status"}, ExitError, []string{dir}},
		{"malformed store URL", []string{"--store", "sqlite:", "list"}, ExitUsage, []string{`bad store URL "sqlite:": missing path`}},
		{"unknown store scheme", []string{"--store", "postgres://db/quota", "list"}, ExitUsage, []string{`unknown scheme "postgres"`}},
		{"reset without --yes", []string{"reset", "youtube", "--label", "yt-key-1"}, ExitUsage, []string{"add --yes to confirm"}},
		// yt-key-1 is its own owner: --owner would move it and act on
		// another owner's budgets.
		{"reset under another owner", []string{"reset", "youtube", "--label", "yt-key-1", "--owner", "other-proj", "--yes"}, ExitUsage, []string{`--owner "other-proj": credential yt-key-1 of youtube is kept under owner`, "move no credential"}},
		{"adjust under another owner", []string{"adjust", "youtube", "--label", "yt-key-1", "--owner", "other-proj", "--budget", "units", "--used", "0"}, ExitUsage, []string{`--owner "other-proj"`, "move no credential"}},
		{"estimate under another owner", []string{"costs", "estimate", "youtube", "videos.list=5", "--label", "yt-key-1", "--owner", "other-proj"}, ExitUsage, []string{`--owner "other-proj": credential yt-key-1 of youtube is kept under owner`, "only reads"}},
		{"exhaust under another owner", []string{"exhaust", "youtube", "--label", "yt-key-1", "--owner", "other-proj", "--budget", "units", "--until", "1h"}, ExitUsage, []string{`--owner "other-proj"`, "move no credential"}},
		{"refund bad ID", []string{"refund", "not-an-id"}, ExitUsage, []string{`bad reservation ID "not-an-id"`}},
		{"refund unknown reservation", []string{"refund", "youtube/0123456789abcdef01234567/1a2b3c4d5e.XYZ"}, ExitError, []string{"not found"}},
		{"exhaust in the past", []string{"exhaust", "youtube", "--label", "yt-key-1", "--budget", "units", "--until", "2020-01-01T00:00:00Z"}, ExitUsage, []string{"is not in the future"}},
		{"exhaust bad time", []string{"exhaust", "youtube", "--label", "yt-key-1", "--budget", "units", "--until", "tomorrow"}, ExitUsage, []string{`--until "tomorrow"`}},
		{"exhaust without budget", []string{"exhaust", "youtube", "--label", "yt-key-1", "--until", "1h"}, ExitUsage, []string{"missing --budget B"}},
		{"adjust over the limit", []string{"adjust", "youtube", "--label", "yt-key-1", "--budget", "units", "--used", "11"}, ExitUsage, []string{"--used 11: must be from 0 to the limit of youtube/units, 10"}},
		{"history bad bucket", []string{"history", "youtube", "--label", "yt-key-1", "--every", "an hour"}, ExitUsage, []string{`--every "an hour"`}},
		{"history too many buckets", []string{"history", "youtube", "--label", "yt-key-1", "--every", "1s"}, ExitUsage, []string{"buckets over the window; at most 1000"}},
		{"estimate unknown method", []string{"costs", "estimate", "youtube", "videos.watch=3"}, ExitUsage, []string{`table youtube has no method "videos.watch"`}},
		{"estimate bad count", []string{"costs", "estimate", "youtube", "videos.list=many"}, ExitUsage, []string{`"videos.list=many": want METHOD=COUNT`}},
		{"estimate overflowing count", []string{"costs", "estimate", "youtube", "captions.update=9223372036854775807"}, ExitUsage, []string{`count 9223372036854775807 for method "captions.update": the run would cost more than`}},
		{"costs for an API without a table", []string{"costs", "show", "vimeo"}, ExitUsage, []string{`no built-in cost table for "vimeo"`}},
		{"unknown job", []string{"jobs", "nightly"}, ExitUsage, []string{`no runs of job "nightly"`}},
		{"completion for an unknown shell", []string{"completion", "tcsh"}, ExitUsage, []string{`unknown command "tcsh"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.run(tt.args...)
			if r.code != tt.code {
				t.Errorf("quotactl %s: exit %d, want %d; stderr %q", strings.Join(tt.args, " "), r.code, tt.code, r.errOut)
			}
			if r.out != "" {
				t.Errorf("stdout %q, want nothing", r.out)
			}
			oneLine(t, r.errOut, tt.want...)
			if strings.Contains(r.errOut, "Sup3rSecret") || strings.Contains(r.errOut, "AIzaSy") {
				t.Errorf("stderr shows a secret: %q", r.errOut)
			}
			if after := e.snapshot(); after != before {
				t.Errorf("the store changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	if got, _ := os.ReadFile(notes); !bytes.Equal(got, notesText) {
		t.Error("the file that is not a database was modified")
	}
}
