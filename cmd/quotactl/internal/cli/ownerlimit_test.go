package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// TestBudgetOwnerLimits: 'budget set --owner' sets an owner's limit that a
// running program obeys; budget list and status say where each owner's
// limit comes from (operator, upstream, program), a learned limit that is
// not applied included; 'budget delete --owner' hands the owner back to
// the budget's limit.
func TestBudgetOwnerLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.ok("budget", "set", "youtube/units", "--limit", "100", "--daily", "UTC")
	g, _, _ := e.g()
	l, err := quota.New(g.store, "youtube", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Daily(time.UTC)}},
		quota.WithClock(e.clock.Now), quota.WithOverrideRefresh(0),
		quota.WithOwnerLimits(map[string]map[string]int64{"prog-owner": {"units": 500}}))
	if err != nil {
		t.Fatal(err)
	}
	cred := func(owner string) quota.Credential {
		return quota.Credential{Secret: "AIzaSy-" + owner, Label: owner + "-key", Owner: owner}
	}
	for _, o := range []string{"audited", "prog-owner", "token"} {
		if _, err := l.Take(ctx, cred(o), quota.Units("units", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if out := e.ok("budget", "set", "youtube/units", "--owner", "audited", "--limit", "1000000"); out != "youtube/units: 1000000 units for owner audited (operator)\n" {
		t.Errorf("budget set --owner printed %q", out)
	}
	if _, err := l.Take(ctx, cred("audited"), quota.Units("units", 50_000)); err != nil {
		t.Fatalf("the program under the operator's 1,000,000: %v", err)
	}
	if applied, err := l.LearnLimit(ctx, "token", "units", 7); err != nil || !applied {
		t.Fatalf("LearnLimit(7) = %v, %v", applied, err)
	}
	if applied, err := l.LearnLimit(ctx, "prog-owner", "units", 900); err != nil || applied {
		t.Fatalf("LearnLimit(900) = %v, %v; want recorded, not applied", applied, err)
	}

	var list []budgetJSON
	decode(t, e.ok("--json", "budget", "list"), &list)
	want := []budgetJSON{
		{API: "youtube", Budget: "units", Limit: 100, Window: "daily:UTC", Unit: "units", Source: "operator", LimitSource: "operator"},
		{API: "youtube", Budget: "units", Owner: "audited", Limit: 1000000, LimitSource: "operator"},
		{API: "youtube", Budget: "units", Owner: "prog-owner", Limit: 500, LimitSource: "program", LearnedLimit: 900},
		{API: "youtube", Budget: "units", Owner: "token", Limit: 7, LimitSource: "upstream", LearnedLimit: 7},
	}
	if len(list) != len(want) {
		t.Fatalf("budget list --json = %+v, want %+v", list, want)
	}
	for i := range want {
		if list[i] != want[i] {
			t.Errorf("budget list --json row %d = %+v, want %+v", i, list[i], want[i])
		}
	}
	if got, wantText := e.ok("budget", "list"), "youtube/units\t-\t100\tdaily:UTC\toperator\n"+
		"youtube/units\taudited\t1000000\t-\toperator\n"+
		"youtube/units\tprog-owner\t500\t-\tprogram (upstream says 900, not applied)\n"+
		"youtube/units\ttoken\t7\t-\tupstream\n"; got != wantText {
		t.Errorf("budget list (piped) = %q, want %q", got, wantText)
	}

	rows := e.usage("youtube")
	for _, c := range []struct {
		key     string
		limit   int64
		src     quota.Source
		learned int64
	}{
		{"audited-key/units", 1000000, quota.SourceOperator, 0},
		{"prog-owner-key/units", 500, quota.SourceProgram, 900},
		{"token-key/units", 7, quota.SourceUpstream, 7},
	} {
		r := rows[c.key]
		if r.Limit != c.limit || r.LimitSource != c.src || !r.OwnLimit || r.LearnedLimit != c.learned {
			t.Errorf("status --json %s: limit %d from %q (own %v, learned %d); want %d from %q, learned %d",
				c.key, r.Limit, r.LimitSource, r.OwnLimit, r.LearnedLimit, c.limit, c.src, c.learned)
		}
	}
	e.tty = true
	out := e.ok("status")
	e.tty = false
	for _, w := range []string{"limits per owner:", "youtube/units audited 1000000 (operator)", "token 7 (upstream)", "prog-owner 500 (program (upstream says 900, not applied))"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), w) {
			t.Errorf("status on a terminal does not say %q:\n%s", w, out)
		}
	}

	if out := e.ok("budget", "delete", "youtube/units", "--owner", "audited"); !strings.Contains(out, "deleted the limits of owner audited for youtube/units") {
		t.Errorf("budget delete --owner printed %q", out)
	}
	if r := e.usage("youtube")["audited-key/units"]; r.Limit != 100 || r.LimitSource != quota.SourceOperator || r.OwnLimit {
		t.Errorf("after budget delete --owner: %+v; want the budget's 100", r)
	}
	if _, err := l.Take(ctx, cred("audited"), quota.Units("units", 1)); !isExhausted(err, 100) {
		t.Errorf("the program after budget delete --owner: %v; want refused at the budget's 100", err)
	}
	r := e.run("budget", "delete", "youtube/units", "--owner", "audited")
	if r.code != ExitUsage {
		t.Errorf("deleting it again: exit %d", r.code)
	}
	oneLine(t, r.errOut, "owner audited has no limit of its own for youtube/units")
}

func isExhausted(err error, limit int64) bool {
	var ee *quota.ExhaustedError
	return errors.As(err, &ee) && ee.Limit == limit
}

// TestBudgetOwnerLimitBadInput: every bad 'budget set --owner' is one
// clear line and exit 2, and records nothing.
func TestBudgetOwnerLimitBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("budget", "set", "youtube/units", "--limit", "100", "--daily", "UTC")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"youtube/units", "--owner", "p", "--limit", "-1"}, "--limit -1: must be > 0"},
		{[]string{"youtube/units", "--owner", "p", "--limit", "0"}, "--limit 0: must be > 0"},
		{[]string{"youtube/units", "--owner", "p", "--limit", "9007199254740992"}, "--limit 9007199254740992: at most 9007199254740991"},
		{[]string{"youtube/nope", "--owner", "p", "--limit", "5"}, "no budget youtube/nope in the store"},
		{[]string{"other/units", "--owner", "p", "--limit", "5"}, "no budget other/units in the store"},
		{[]string{"youtube/units", "--owner", "bad owner", "--limit", "5"}, `--owner "bad owner"`},
		{[]string{"youtube/units", "--owner", "p", "--limit", "5", "--window", "1h"}, "keeps its window"},
		{[]string{"youtube/units", "--owner", "p", "--limit", "5", "--monthly", "UTC"}, "keeps its window"},
		{[]string{"youtube/units", "--owner", "p"}, "missing --limit"},
	} {
		r := e.run(append([]string{"budget", "set"}, c.args...)...)
		if r.code != ExitUsage {
			t.Errorf("budget set %v: exit %d, want %d", c.args, r.code, ExitUsage)
		}
		oneLine(t, r.errOut, c.want)
	}
	r := e.run("budget", "delete", "youtube/units", "--owner", "bad owner")
	if r.code != ExitUsage {
		t.Errorf("budget delete --owner 'bad owner': exit %d", r.code)
	}
	var list []budgetJSON
	decode(t, e.ok("--json", "budget", "list"), &list)
	if len(list) != 1 {
		t.Errorf("rejected owner limits were recorded: %+v", list)
	}
}
