package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// TestBudgetSetKeepsUsage: 'budget set --window 1h' on a daily budget, a
// take, and back to daily: the day's usage is all there (it used to be
// deleted by the take under the short window: 4,343 became 1,146).
func TestBudgetSetKeepsUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.vars["K"] = "AIzaSy-k"
	e.ok("budget", "set", "youtube/units", "--limit", "10000", "--daily", "UTC")
	e.ok("take", "youtube", "--credential-env", "K", "--label", "k", "--cost", "4343")
	e.clock.Add(2 * time.Hour)
	e.ok("budget", "set", "youtube/units", "--limit", "10000", "--window", "1h")
	e.ok("take", "youtube", "--label", "k", "--cost", "1")
	if u := e.usage("youtube")["k/units"]; u.Used != 1 {
		t.Fatalf("under the 1h window: used %d, want 1", u.Used)
	}
	e.clock.Add(90 * time.Minute)
	e.ok("take", "youtube", "--label", "k", "--cost", "2")
	e.ok("budget", "set", "youtube/units", "--limit", "10000", "--daily", "UTC")
	e.ok("take", "youtube", "--label", "k", "--cost", "1")
	if u := e.usage("youtube")["k/units"]; u.Used != 4347 {
		t.Fatalf("back to daily: used %d, want 4347 (4343+1+2+1)", u.Used)
	}
}

// TestBudgetSetOverridesProgram: a program defining the same budget does
// not undo 'budget set'; it applies the operator's definition; status and
// budget list say where the definition comes from; budget delete hands it
// back to the program.
func TestBudgetSetOverridesProgram(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.ok("budget", "set", "youtube/units", "--limit", "5", "--window", "1h")
	g, _, _ := e.g()
	l, err := quota.New(g.store, "youtube", []quota.Budget{{Name: "units", Limit: 10000, Window: quota.Daily(time.UTC)}},
		quota.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "AIzaSy-prog", Label: "prog"}
	for range 5 {
		if _, err := l.Take(ctx, key, quota.Units("units", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Take(ctx, key, quota.Units("units", 1)); err == nil {
		t.Fatal("the program's limiter took a 6th unit over the operator's limit of 5")
	}
	if out := e.ok("budget", "list"); out != "youtube/units\t5\tsliding:1h0m0s\toperator\n" {
		t.Errorf("budget list after the program ran: %q", out)
	}
	u := e.usage("youtube")["prog/units"]
	if u.Limit != 5 || u.Source != quota.SourceOperator {
		t.Errorf("status --json: %+v; want limit 5, source operator", u)
	}
	e.tty = true
	if out := e.ok("status"); !strings.Contains(out, "set with 'quotactl budget set' (over any program's definition): youtube/units") {
		t.Errorf("status on a terminal does not say the definition is an operator's:\n%s", out)
	}
	e.tty = false
	e.ok("budget", "delete", "youtube/units")
	l2, err := quota.New(g.store, "youtube", []quota.Budget{{Name: "units", Limit: 10000, Window: quota.Daily(time.UTC)}},
		quota.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l2.Take(ctx, key, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	if out := e.ok("budget", "list"); out != "youtube/units\t10000\tdaily:UTC\tprogram\n" {
		t.Errorf("budget list once the program defines it again: %q", out)
	}
}
