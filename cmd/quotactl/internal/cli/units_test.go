package cli

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

// TestStatusUnits: status shows each budget's amounts in its unit: tokens
// as tokens, a spend budget (micro-dollars) as dollars, a budget in the
// default unit as bare numbers, on a terminal, piped and in JSON. The
// budgets are a program's, defined from a cost table file with a spend
// section (as an enrichment job's would be), and an operator's set with
// --unit.
func TestStatusUnits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	table, err := costs.Load("../../../../costs/testdata/spend/enrich.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, _, _ := e.g()
	l, err := quota.New(g.store, table.API, table.Budgets, quota.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	job := quota.Credential{Secret: "sk-enrich", Label: "enrich"}
	if _, err := l.Take(context.Background(), job, quota.Charge{Method: "chat.completions", Units: map[string]int64{"requests": 1, "tokens": 1234, "spend": 12_340_000}}); err != nil {
		t.Fatal(err)
	}
	if out := e.ok("budget", "set", "shop/points", "--limit", "2000", "--window", "20s", "--unit", "points"); out != "shop/points: 2,000 points per sliding 20s\n" {
		t.Errorf("budget set --unit printed %q", out)
	}
	e.ok("budget", "set", "youtube/units", "--limit", "10000", "--daily", "America/Los_Angeles")
	e.vars["K"] = "shpat-key"
	e.ok("take", "shop", "--credential-env", "K", "--label", "shop-1", "--cost", "7", "--budget", "points")

	e.tty = true
	e.vars["COLUMNS"] = "200"
	out := e.ok("status")
	for _, want := range []string{
		`openai +\S+ +enrich +requests +1 / 500 requests +499 requests `,
		`openai +\S+ +enrich +spend +\$12\.34 / \$500\.00 +\$487\.66 `,
		`openai +\S+ +enrich +tokens +1,234 / 30,000 tokens +28,766 tokens `,
		`shop +\S+ +shop-1 +points +7 / 2,000 points +1,993 points `,
		`youtube +- +- +units +0/10000 +10000 `,
	} {
		if !regexpLine(out, `^`+want) {
			t.Errorf("status on a terminal:\n%s\nwant a line matching %q", out, want)
		}
	}
	if strings.Contains(out, "units") && regexpLine(out, `(tokens|spend|requests|points) .*\bunits\b`) {
		t.Errorf("a budget with a unit of its own shown in units:\n%s", out)
	}
	e.vars["COLUMNS"] = "40" // two lines per budget: the amounts in their unit too
	out = e.ok("status", "openai")
	for _, want := range []string{"$12.34 / $500.00", "$487.66 left", "1,234 / 30,000 tokens", "28,766 tokens left"} {
		if !strings.Contains(out, want) {
			t.Errorf("status at 40 columns:\n%s\nwant %q", out, want)
		}
	}

	e.tty = false
	out = e.ok("status", "openai")
	if !strings.Contains(out, "\tspend\t$12.34 / $500.00\t$487.66\t") || !strings.Contains(out, "\ttokens\t1,234 / 30,000 tokens\t28,766 tokens\t") {
		t.Errorf("status piped:\n%s", out)
	}
	var rows []statusJSON
	decode(t, e.ok("--json", "status"), &rows)
	units := map[string]string{}
	for _, r := range rows {
		units[r.API+"/"+r.Budget] = r.Unit
		if r.API+"/"+r.Budget == "openai/spend" && (r.Used != 12_340_000 || r.Limit != 500_000_000) {
			t.Errorf("spend in JSON: used %d of %d; want micro-dollars", r.Used, r.Limit)
		}
	}
	for b, want := range map[string]string{"openai/tokens": "tokens", "openai/spend": quota.UnitUSDMicro, "openai/requests": "requests", "shop/points": "points", "youtube/units": quota.DefaultUnit} {
		if units[b] != want {
			t.Errorf("status --json: %s has unit %q, want %q", b, units[b], want)
		}
	}

	// history charts a budget in its unit.
	out = e.ok("history", "openai", "--label", "enrich", "--budget", "spend")
	if !strings.Contains(out, "openai/spend for enrich: $12.34 of $500.00 used in the window") || !strings.Contains(out, "by method: chat.completions $12.34\n") || !regexpLine(out, `^Nov 21 23:00 +\|#+ *\| +\$12\.34  \(1 call\)$`) {
		t.Errorf("history of the spend budget:\n%s", out)
	}
	out = e.ok("history", "openai", "--label", "enrich", "--budget", "tokens")
	if !strings.Contains(out, "openai/tokens for enrich: 1,234 tokens of 30,000 tokens used in the window") {
		t.Errorf("history of the tokens budget:\n%s", out)
	}

	// list and costs show say limits in their units too.
	out = e.ok("list")
	for _, want := range []string{"openai\tbudget\ttokens\t30,000 tokens per sliding 1m", "openai\tbudget\tspend\t$500.00 per month, reset on the 1st at midnight America/Los_Angeles", "youtube\tbudget\tunits\t10000 units per day"} {
		if !strings.Contains(out, want) {
			t.Errorf("list:\n%s\nwant %q", out, want)
		}
	}
	out = e.ok("costs", "show", "--table", "../../../../costs/testdata/spend/enrich.yaml")
	for _, want := range []string{"spend\t$500.00\tmonthly:America/Los_Angeles", "tokens\t30,000 tokens\tsliding:1m0s"} {
		if !strings.Contains(out, want) {
			t.Errorf("costs show:\n%s\nwant %q", out, want)
		}
	}

	// An operator's new limit keeps the program's unit.
	if out := e.ok("budget", "set", "openai/tokens", "--limit", "40000", "--window", "1m"); out != "openai/tokens: 40,000 tokens per sliding 1m\n" {
		t.Errorf("budget set without --unit printed %q", out)
	}
	e.clock.Add(time.Second)
	if out := e.ok("status", "openai"); !strings.Contains(out, "\ttokens\t1,234 / 40,000 tokens\t38,766 tokens\t") {
		t.Errorf("status after budget set:\n%s", out)
	}
	if r := e.run("budget", "set", "openai/tokens", "--limit", "1", "--window", "1m", "--unit", "US dollars"); r.code != ExitUsage || !strings.Contains(r.errOut, "--unit") {
		t.Errorf("a bad --unit: exit %d, %q", r.code, r.errOut)
	}
}

// llmTablePath is the cost table file of an API "llm" whose one method
// charges a request (the default unit), 1,234 tokens and $0.40 (a spend
// budget in micro-dollars of $1.00 an hour); jobview's tests use it too.
const llmTablePath = "../../../../costs/testdata/spend/llm.yaml"

// writeLLMTable writes a copy of llmTablePath, with more appended, into
// t's temporary directory and returns its path.
func writeLLMTable(t *testing.T, more string) string {
	t.Helper()
	table, err := os.ReadFile(llmTablePath)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "llm.yaml")
	if err := os.WriteFile(path, append(table, more...), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestJobsUnits: quotactl jobs shows a run's spending, the detail of the
// budget that stopped it and what its plan costs in each budget's unit:
// the spend budget in dollars, tokens as tokens, the default unit as bare
// numbers; jobs --json names each budget's unit.
func TestJobsUnits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := writeLLMTable(t, "")
	table, err := costs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g, _, _ := e.g()
	ss := g.store.(quota.StateStore)
	l, err := quota.New(g.store, table.API, table.Budgets, quota.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "sk-llm", Label: "llm-key"}
	sched := jobs.New(ss, jobs.WithClock(e.clock.Now), jobs.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	charge, err := table.Charge("complete")
	if err != nil {
		t.Fatal(err)
	}
	// Two calls pay $0.80 of $1.00; the third, $0.40 more, is refused.
	if err := sched.Add("enrich", "", func(ctx context.Context, _ *jobs.Run) error {
		for {
			if _, err := l.Take(ctx, key, charge); err != nil {
				return err
			}
		}
	}, jobs.WithPlan("llm", path, map[string]int64{"complete": 1})); err != nil {
		t.Fatal(err)
	}
	if rec, err := sched.RunOnce(context.Background(), "enrich"); err != nil || rec.Outcome != jobs.Exhausted {
		t.Fatalf("enrich: %+v, %v", rec, err)
	}

	spent := "llm/requests=2, llm/spend=$0.80, llm/tokens=2,468 tokens"
	cost := "does not fit: requests 1 of 98 left, spend $0.40 of $0.20 left, tokens 1,234 tokens of 27,532 tokens left"
	detail := "llm/spend spent ($0.80 of $1.00 used, $0.20 left); capacity back in 1h"
	out := e.ok("jobs")
	for _, want := range []string{"\t" + spent + "\t", "\t" + cost + "\t", "\t" + detail + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs piped:\n%s\nwant %q", out, want)
		}
	}
	e.tty = true
	e.vars["COLUMNS"] = "1000"
	out = e.ok("jobs")
	if !regexpLine(out, `^enrich\s.*\s`+regexp.QuoteMeta(spent)+`\s.*\s`+regexp.QuoteMeta(cost)+`\s.*\s`+regexp.QuoteMeta(detail)+`$`) {
		t.Errorf("jobs on a terminal:\n%s", out)
	}
	e.tty = false
	if out := e.ok("jobs", "enrich"); !strings.Contains(out, "\t"+spent+"\t"+detail+"\n") {
		t.Errorf("jobs enrich:\n%s", out)
	}

	var list []jobJSON
	decode(t, e.ok("--json", "jobs"), &list)
	if len(list) != 1 {
		t.Fatalf("jobs --json: %+v", list)
	}
	j := list[0]
	if want := map[string]string{"llm/requests": quota.DefaultUnit, "llm/spend": quota.UnitUSDMicro, "llm/tokens": "tokens"}; !maps.Equal(j.Units, want) {
		t.Errorf("jobs --json units %v, want %v", j.Units, want)
	}
	var units []string
	for _, x := range j.Expected {
		units = append(units, x.Budget+":"+x.Unit)
	}
	if got := strings.Join(units, " "); got != "requests:units spend:usd-micro tokens:tokens" {
		t.Errorf("jobs --json expected in units %q", got)
	}
}

// TestCostsEstimateUnits: costs estimate prices a planned run in each
// budget's unit (the spend budget in dollars, tokens as tokens, the
// default unit as bare numbers), in its table and in why it cannot fit.
func TestCostsEstimateUnits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := writeLLMTable(t, "")
	out := e.ok("costs", "estimate", "llm", "complete=2", "--table", path)
	for _, want := range []string{"requests\t2\t100\t100\t98\tyes\n", "spend\t$0.80\t$1.00\t$1.00\t$0.20\tyes\n", "tokens\t2,468 tokens\t30,000 tokens\t30,000 tokens\t27,532 tokens\tyes\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("costs estimate:\n%s\nwant %q", out, want)
		}
	}
	r := e.run("costs", "estimate", "llm", "complete=3", "--table", path)
	if r.code != ExitNeverFits || !strings.Contains(r.errOut, "llm/spend: the run costs $1.20 but the limit is $1.00") {
		t.Errorf("costs estimate of a run over the spend limit: exit %d, %q", r.code, r.errOut)
	}
}

// TestCostsShowUnits: costs show says what each method costs in each
// budget's unit (the spend budget in dollars, tokens as tokens, the
// default unit as bare numbers), on a terminal and piped, and the table's
// default charge too; --json keeps the numbers.
func TestCostsShowUnits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := writeLLMTable(t, `  ping:
    routes: [GET /v1/ping]
    free: true
default: {requests: 2, tokens: 1}
`)
	out := e.ok("costs", "show", "--table", path)
	for _, want := range []string{
		"complete\trequests=1 spend=$0.40 tokens=1,234 tokens\tPOST /v1/complete\n",
		"ping\tfree\tGET /v1/ping\n",
		"(any other)\trequests=2 tokens=1 token\t-\n",
		"requests\t100\tsliding:1h0m0s\t",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("costs show piped:\n%s\nwant %q", out, want)
		}
	}
	e.tty = true
	out = e.ok("costs", "show", "--table", path)
	if !regexpLine(out, `^complete +requests=1 spend=\$0\.40 tokens=1,234 tokens +POST /v1/complete$`) {
		t.Errorf("costs show on a terminal:\n%s", out)
	}

	var shown struct{ Methods []costs.Method }
	decode(t, e.ok("--json", "costs", "show", "--table", path), &shown)
	want := map[string]int64{"requests": 1, "spend": 400_000, "tokens": 1234}
	if len(shown.Methods) == 0 || shown.Methods[0].Name != "complete" || !maps.Equal(shown.Methods[0].Cost, want) {
		t.Errorf("costs show --json: methods %+v, want complete costing %v", shown.Methods, want)
	}
}
