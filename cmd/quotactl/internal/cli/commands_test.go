package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

func TestBudgetSetListDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	g, out, _ := e.g()
	if err := budgetSetRun(ctx, &budgetSetOptions{globals: g, API: "youtube", Budget: "units", Limit: 10000, Daily: "America/Los_Angeles"}); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "youtube/units: 10000 units per day, reset at midnight America/Los_Angeles\n"; got != want {
		t.Errorf("budget set printed %q, want %q", got, want)
	}
	g, out, _ = e.jsonG()
	if err := budgetSetRun(ctx, &budgetSetOptions{globals: g, API: "github", Budget: "core", Limit: 5000, Window: "1h"}); err != nil {
		t.Fatal(err)
	}
	var set budgetJSON
	decode(t, out.String(), &set)
	if set != (budgetJSON{API: "github", Budget: "core", Limit: 5000, Window: "sliding:1h0m0s", Unit: "units", Source: quota.SourceOperator, LimitSource: quota.SourceOperator}) {
		t.Errorf("budget set --json = %+v", set)
	}

	g, out, _ = e.jsonG()
	if err := budgetListRun(ctx, &budgetListOptions{globals: g}); err != nil {
		t.Fatal(err)
	}
	var list []budgetJSON
	decode(t, out.String(), &list)
	want := []budgetJSON{
		{API: "github", Budget: "core", Limit: 5000, Window: "sliding:1h0m0s", Unit: "units", Source: "operator", LimitSource: "operator"},
		{API: "youtube", Budget: "units", Limit: 10000, Window: "daily:America/Los_Angeles", Unit: "units", Source: "operator", LimitSource: "operator"},
	}
	if len(list) != 2 || list[0] != want[0] || list[1] != want[1] {
		t.Errorf("budget list = %+v, want %+v", list, want)
	}

	// Changing a budget replaces its definition.
	g, _, _ = e.g()
	if err := budgetSetRun(ctx, &budgetSetOptions{globals: g, API: "youtube", Budget: "units", Limit: 9500, Daily: "America/Los_Angeles"}); err != nil {
		t.Fatal(err)
	}
	g, out, _ = e.g()
	if err := budgetListRun(ctx, &budgetListOptions{globals: g}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "github/core\t5000\tsliding:1h0m0s\toperator\nyoutube/units\t9500\tdaily:America/Los_Angeles\toperator\n" {
		t.Errorf("budget list (piped) = %q", got)
	}

	g, out, _ = e.g()
	if err := budgetDeleteRun(ctx, &budgetDeleteOptions{globals: g, API: "github", Budget: "core"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "deleted budget github/core") {
		t.Errorf("budget delete printed %q", out.String())
	}
	g, _, _ = e.g()
	err := budgetDeleteRun(ctx, &budgetDeleteOptions{globals: g, API: "github", Budget: "core"})
	if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "no budget github/core") {
		t.Errorf("deleting it again: %v (exit %d)", err, exitCode(err))
	}
}

func TestBudgetSetRejects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		opts budgetSetOptions
		want string
	}{
		{budgetSetOptions{API: "a", Budget: "b", Limit: 0, Window: "1h"}, "--limit 0: must be > 0"},
		{budgetSetOptions{API: "a", Budget: "b", Limit: -3, Window: "1h"}, "--limit -3"},
		{budgetSetOptions{API: "a", Budget: "b", Limit: 1}, "missing window"},
		{budgetSetOptions{API: "a", Budget: "b", Limit: 1, Window: "1h", Daily: "UTC"}, "only one of --window, --daily and --monthly"},
		{budgetSetOptions{API: "a", Budget: "b", Limit: 1, Daily: "UTC", Monthly: "UTC"}, "only one of"},
		{budgetSetOptions{API: "a", Budget: "b", Limit: 1, Monthly: "Mars/Olympus"}, `--monthly "Mars/Olympus": unknown time zone`},
		{budgetSetOptions{API: "a", Budget: "b", Limit: 1, Monthly: "local"}, "--monthly \"local\": name the zone"},
		{budgetSetOptions{API: "a", Budget: "b", Limit: 1, Window: "soon"}, `--window "soon": not a duration`},
		{budgetSetOptions{API: "a", Budget: "b", Limit: 1, Window: "-1h"}, "must be > 0"},
		{budgetSetOptions{API: "a", Budget: "b", Limit: 1, Daily: "Mars/Olympus"}, `--daily "Mars/Olympus": unknown time zone`},
		{budgetSetOptions{API: "a", Budget: "b", Limit: 1, Daily: "Local"}, "name the zone"},
	}
	for _, tt := range tests {
		g, _, _ := e.g()
		tt.opts.globals = g
		err := budgetSetRun(context.Background(), &tt.opts)
		if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("budget set %+v: %v (exit %d), want usage error %q", tt.opts, err, exitCode(err), tt.want)
		}
	}
	g, _, _ := e.g()
	if apis, _ := g.apis(context.Background()); len(apis) != 0 {
		t.Errorf("rejected definitions were recorded: %+v", apis)
	}
}

func TestTakeUntilSpentAndBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup() // units: 1 of 10 used
	idRE := regexp.MustCompile(`^youtube/[0-9a-f]{24}/[0-9a-z]+\.[0-9A-Z]+\n$`)
	for i := 0; i < 3; i++ {
		e.clock.Add(time.Minute)
		out := e.ok("take", "youtube", "--label", "yt-key-1", "--cost", "3", "--budget", "units", "--method", "videos.list")
		if !idRE.MatchString(out) {
			t.Errorf("take printed %q, want a reservation ID", out)
		}
	}
	// 10 of 10 used: the next take is refused, naming the budget and when
	// the first unit (taken at t0) leaves the sliding hour.
	r := e.run("take", "youtube", "--label", "yt-key-1", "--cost", "1", "--budget", "units")
	if r.code != ExitExhausted || r.out != "" {
		t.Fatalf("take on a spent budget: exit %d, stdout %q", r.code, r.out)
	}
	oneLine(t, r.errOut, "youtube/units is spent for yt-key-1", "used 10 of 10", "needs 1", "in 57m", "2026-11-22 10:00:00 UTC")

	// A charge of 4 waits for the first two entries (1 + 3 units): 10:01.
	r = e.run("--json", "take", "youtube", "--label", "yt-key-1", "--cost", "4", "--budget", "units")
	var refused struct{ Exhausted exhaustedJSON }
	decode(t, r.out, &refused)
	if r.code != ExitExhausted || refused.Exhausted.Budget != "units" || !refused.Exhausted.RetryAt.Equal(t0.Add(61*time.Minute)) ||
		refused.Exhausted.RetryAfterSeconds != (58*time.Minute).Seconds() || refused.Exhausted.Cost != 4 {
		t.Errorf("take --json refused: exit %d, %+v", r.code, refused.Exhausted)
	}

	e.clock.Add(58 * time.Minute) // 10:01: units taken at 09:00 and 09:01 are out
	e.ok("take", "youtube", "--label", "yt-key-1", "--cost", "4", "--budget", "units")
	if u := e.usage("youtube")["yt-key-1/units"]; u.Used != 10 || u.Remaining != 0 {
		t.Errorf("units after the window moved: %+v", u)
	}
}

func TestTakeChargesEveryBudgetOrOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup() // the first take charged both budgets 1
	u := e.usage("youtube")
	if u["yt-key-1/units"].Used != 1 || u["yt-key-1/search"].Used != 1 {
		t.Fatalf("after a take without --budget: %+v", u)
	}
	e.ok("take", "youtube", "--label", "yt-key-1", "--cost", "2", "--budget", "search")
	u = e.usage("youtube")
	if u["yt-key-1/units"].Used != 1 || u["yt-key-1/search"].Used != 3 {
		t.Fatalf("after --budget search: %+v", u)
	}
	// All or nothing: search is full, so units is not charged either.
	r := e.run("take", "youtube", "--label", "yt-key-1", "--cost", "1")
	if r.code != ExitExhausted {
		t.Fatalf("exit %d", r.code)
	}
	oneLine(t, r.errOut, "youtube/search is spent", "2026-11-23 08:00:00 UTC")
	if got := e.usage("youtube")["yt-key-1/units"].Used; got != 1 {
		t.Errorf("a refused take charged units: used %d", got)
	}
}

func TestTakeJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup()
	var res reservationJSON
	decode(t, e.ok("--json", "take", "youtube", "--label", "yt-key-1", "--cost", "2", "--budget", "units", "--method", "videos.list"), &res)
	fp := quota.DefaultFingerprint("AIzaSy-key-one")
	if res.API != "youtube" || res.Credential != "yt-key-1" || res.Fingerprint != fp || res.Method != "videos.list" ||
		!res.At.Equal(t0) || len(res.Usage) != 1 || res.Usage[0] != (usageJSON{Budget: "units", Cost: 2, Used: 3, Limit: 10, Remaining: 7, Reset: res.Usage[0].Reset}) ||
		res.Usage[0].Reset == nil || !res.Usage[0].Reset.Equal(t0.Add(time.Hour)) {
		t.Errorf("take --json = %+v", res)
	}
	if _, err := quota.ParseReservationID(res.ID); err != nil {
		t.Errorf("id %q: %v", res.ID, err)
	}
}

func TestTakeCredentialSources(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("  AIzaSy-key-two \nsecond line is ignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	blank := filepath.Join(dir, "blank")
	os.WriteFile(blank, []byte("\nAIza-on-line-two\n"), 0o600)
	e.vars["KEY2"] = "AIzaSy-key-two"
	e.vars["EMPTY"] = "  "

	// The file's first line, trimmed, is the same secret as $KEY2.
	e.ok("take", "youtube", "--credential-file", keyFile, "--label", "yt-key-2", "--cost", "1", "--budget", "units")
	e.ok("take", "youtube", "--credential-env", "KEY2", "--cost", "1", "--budget", "units")
	e.ok("take", "youtube", "--label", "yt-key-2", "--cost", "1", "--budget", "units")
	if u := e.usage("youtube")["yt-key-2/units"]; u.Used != 3 || u.Fingerprint != quota.DefaultFingerprint("AIzaSy-key-two") {
		t.Errorf("yt-key-2: %+v", u)
	}

	bad := []struct {
		args []string
		want string
	}{
		{[]string{"--cost", "1"}, "missing credential"},
		{[]string{"--cost", "1", "--label", "yt-key-9"}, `unknown label "yt-key-9"`},
		{[]string{"--cost", "1", "--credential-env", "NOPE"}, "$NOPE is not set"},
		{[]string{"--cost", "1", "--credential-env", "EMPTY"}, "$EMPTY is empty"},
		{[]string{"--cost", "1", "--credential-file", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"--cost", "1", "--credential-file", empty}, "the first line is empty"},
		{[]string{"--cost", "1", "--credential-file", blank}, "the first line is empty"},
		{[]string{"--cost", "1", "--credential-file", dir}, "--credential-file " + dir},
		{[]string{"--cost", "1", "--credential-env", "KEY2", "--credential-file", keyFile}, "not both"},
		{[]string{"--cost", "1", "--secret", "AIza-on-the-command-line"}, "unknown flag: --secret"},
	}
	for _, b := range bad {
		r := e.run(append([]string{"take", "youtube"}, b.args...)...)
		if r.code != ExitUsage {
			t.Errorf("take %v: exit %d, want 2", b.args, r.code)
		}
		oneLine(t, r.errOut, b.want)
	}
	// The secrets never show, in any output.
	for _, a := range [][]string{{"status"}, {"list"}, {"--json", "list"}, {"--json", "status"}, {"history", "youtube", "--label", "yt-key-2"}} {
		r := e.run(a...)
		if strings.Contains(r.out+r.errOut, "AIzaSy") {
			t.Errorf("quotactl %v shows a secret: %s%s", a, r.out, r.errOut)
		}
	}
}

func TestTakeFingerprintKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup()
	e.vars["QUOTA_FINGERPRINT_KEY"] = "our-own-key"
	e.vars["KEY3"] = "AIzaSy-key-three"
	e.ok("take", "youtube", "--credential-env", "KEY3", "--label", "yt-key-3", "--cost", "1")
	if fp := e.usage("youtube")["yt-key-3/units"].Fingerprint; fp != quota.Fingerprint([]byte("our-own-key"), "AIzaSy-key-three") {
		t.Errorf("fingerprint %s was not made with $QUOTA_FINGERPRINT_KEY", fp)
	}
}

func TestRefund(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup()
	id := strings.TrimSpace(e.ok("take", "youtube", "--label", "yt-key-1", "--cost", "5", "--budget", "units"))
	if got := e.usage("youtube")["yt-key-1/units"].Used; got != 6 {
		t.Fatalf("used %d", got)
	}
	g, out, _ := e.g()
	if err := refundRun(context.Background(), &refundOptions{globals: g, ID: id}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "refunded "+id+"\n" {
		t.Errorf("refund printed %q", out.String())
	}
	if got := e.usage("youtube")["yt-key-1/units"].Used; got != 1 {
		t.Errorf("after refund: used %d, want 1", got)
	}
	r := e.run("refund", id)
	if r.code != ExitError {
		t.Errorf("second refund: exit %d, want 1", r.code)
	}
	oneLine(t, r.errOut, "not found", id)
	r = e.run("refund", "youtube/not-an-id")
	if r.code != ExitUsage {
		t.Errorf("bad ID: exit %d", r.code)
	}
	oneLine(t, r.errOut, `bad reservation ID "youtube/not-an-id"`)
}

// TestRefundAfterBudgetDelete: 'quotactl refund ID' for a reservation
// that charged a budget deleted since ('budget delete') gives back the
// budgets still defined, exits 1 and names the budget it could not refund,
// never "refunded". The deleted budget's units stay recorded: after
// 'budget set' defines it again, they are back, and refunding the same ID
// again gives them back.
func TestRefundAfterBudgetDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup() // units 1 of 10, search 1 of 3
	// Without --budget, take charges both.
	id := strings.TrimSpace(e.ok("take", "youtube", "--label", "yt-key-1", "--cost", "2"))
	e.clock.Add(time.Minute)
	e.ok("budget", "delete", "youtube/search")

	r := e.run("refund", id)
	if r.code != ExitError || r.out != "" {
		t.Fatalf("refund after budget delete: exit %d, stdout %q; want exit 1, nothing on stdout", r.code, r.out)
	}
	oneLine(t, r.errOut, id, "incomplete", "youtube/search not refunded", "budget set", "given back: youtube/units 2")
	if got := e.usage("youtube")["yt-key-1/units"].Used; got != 1 {
		t.Errorf("units after the partial refund: used %d, want 1", got)
	}

	// Again, with --json: units were given back already, search still cannot be.
	r = e.run("--json", "refund", id)
	var partial struct {
		ID            string           `json:"id"`
		API           string           `json:"api"`
		Refunded      bool             `json:"refunded"`
		Partial       bool             `json:"partial"`
		RefundedUnits map[string]int64 `json:"refunded_units"`
		NotRefunded   []string         `json:"not_refunded"`
	}
	decode(t, r.out, &partial)
	if r.code != ExitError || partial.ID != id || partial.API != "youtube" || partial.Refunded || !partial.Partial ||
		partial.RefundedUnits == nil || len(partial.RefundedUnits) != 0 || len(partial.NotRefunded) != 1 || partial.NotRefunded[0] != "search" {
		t.Errorf("refund --json after budget delete: exit %d, %+v", r.code, partial)
	}
	oneLine(t, r.errOut, "youtube/search not refunded", "nothing else given back")

	// budget set brings search back with the 3 units recorded; the refund
	// by the same ID now gives its 2 back.
	e.ok("budget", "set", "youtube/search", "--limit", "3", "--daily", "America/Los_Angeles")
	if got := e.usage("youtube")["yt-key-1/search"].Used; got != 3 {
		t.Fatalf("search after budget set: used %d, want 3", got)
	}
	if out := e.ok("refund", id); out != "refunded "+id+"\n" {
		t.Errorf("refund once search is defined: %q", out)
	}
	if u := e.usage("youtube"); u["yt-key-1/search"].Used != 1 || u["yt-key-1/units"].Used != 1 {
		t.Errorf("after the second refund: search %d, units %d; want 1 and 1", u["yt-key-1/search"].Used, u["yt-key-1/units"].Used)
	}
	if r := e.run("refund", id); r.code != ExitError || !strings.Contains(r.errOut, "not found") {
		t.Errorf("a third refund: exit %d, %q; want not found", r.code, r.errOut)
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup()
	e.ok("budget", "set", "github/core", "--limit", "5000", "--window", "1h") // no credential yet
	e.clock.Add(30 * time.Minute)
	e.ok("take", "youtube", "--label", "yt-key-1", "--cost", "4", "--budget", "units")
	e.ok("exhaust", "youtube", "--label", "yt-key-1", "--budget", "search", "--until", "2h")

	e.tty = true
	e.vars["COLUMNS"] = "200" // wide enough for the widest layout; 80 columns: TestStatusGolden80
	out := e.ok("status")
	own := quota.DefaultFingerprint("AIzaSy-key-one")[:8] // its own owner
	want := strings.Join([]string{
		"API      OWNER     CREDENTIALS  BUDGET  USED    LEFT  USAGE                         NEXT FREE                                  SPENT UNTIL",
		"github   -         -            core    0/5000  5000  [--------------------]   0%   -                                          -",
		"youtube  " + own + "  yt-key-1     search  1/3     0     [####################] spent  reset in 22h30m (2026-11-23 08:00:00 UTC)  in 2h (2026-11-22 11:30:00 UTC)",
		"youtube  " + own + "  yt-key-1     units   5/10    5     [##########----------]  50%   in 30m (2026-11-22 10:00:00 UTC)           -",
		"set with 'quotactl budget set' (over any program's definition): github/core, youtube/search, youtube/units",
		"",
	}, "\n")
	if out != want {
		t.Errorf("status on a terminal:\n%s\nwant:\n%s", out, want)
	}
	e.tty = false
	out = e.ok("status", "youtube", "--label", "yt-key-1")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 ||
		lines[1] != "youtube\t"+own+"\tyt-key-1\tunits\t5/10\t5\t[##########----------]  50%\tin 30m (2026-11-22 10:00:00 UTC)\t-" {
		t.Errorf("status piped:\n%q", out)
	}

	u := e.usage("youtube")
	s := u["yt-key-1/search"]
	if s.Used != 1 || s.Remaining != 0 || s.ExhaustedUntil == nil || !s.ExhaustedUntil.Equal(t0.Add(150*time.Minute)) ||
		s.Window != "daily:America/Los_Angeles" || s.Reset == nil || !s.Reset.Equal(time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("status --json search = %+v", s)
	}

	r := e.run("status", "--label", "nobody")
	if r.code != ExitUsage {
		t.Errorf("unknown label: exit %d", r.code)
	}
	oneLine(t, r.errOut, `unknown label "nobody"`)
	r = e.run("status", "vimeo")
	if r.code != ExitUsage {
		t.Errorf("unknown API: exit %d", r.code)
	}
	oneLine(t, r.errOut, `no budgets for API "vimeo"`, "known: github, youtube")
}

// TestHistoryInBudgetZone: a daily budget's chart counts the hours of its
// own zone (not the display zone), draws bars to the scale of the limit, and
// says which methods spent the units.
func TestHistoryInBudgetZone(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // displays in UTC; now 09:00 UTC = 01:00 in Los Angeles
	e.ok("budget", "set", "youtube/units", "--limit", "100", "--daily", "America/Los_Angeles")
	e.vars["K"] = "AIza-zone"
	e.ok("take", "youtube", "--credential-env", "K", "--label", "k", "--cost", "50", "--budget", "units", "--method", "videos.insert")
	e.clock.Add(30 * time.Minute)
	e.ok("take", "youtube", "--label", "k", "--cost", "10", "--budget", "units", "--method", "videos.list")
	e.clock.Add(40 * time.Minute) // 02:10 in Los Angeles
	e.ok("take", "youtube", "--label", "k", "--cost", "5", "--budget", "units", "--method", "videos.list")
	out := e.ok("history", "youtube", "--label", "k")
	want := strings.Join([]string{
		"youtube/units for k: 65 of 100 used in the window (day, reset at midnight America/Los_Angeles), per 1h in America/Los_Angeles; a full bar is the limit",
		"00:00  |                                        |   0",
		"01:00  |########################                |  60  (2 calls)",
		"02:00  |##                                      |   5  (1 call)",
		"by method: videos.insert 50, videos.list 15",
		"",
	}, "\n")
	if out != want {
		t.Errorf("history:\n%s\nwant:\n%s", out, want)
	}
	var charts []historyJSON
	decode(t, e.ok("--json", "history", "youtube", "--label", "k"), &charts)
	h := charts[0]
	if h.Zone != "America/Los_Angeles" || len(h.Buckets) != 3 || h.Buckets[1].Methods["videos.insert"] != 50 || h.Buckets[1].Methods["videos.list"] != 10 ||
		h.Buckets[2].Methods["videos.list"] != 5 || h.Methods["videos.list"] != 15 {
		t.Errorf("history --json: %+v", h)
	}
}

func TestHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup() // 09:00: 1 unit
	for _, step := range []struct {
		after time.Duration
		cost  string
	}{{10 * time.Minute, "2"}, {5 * time.Minute, "3"}, {20 * time.Minute, "1"}} {
		e.clock.Add(step.after)
		e.ok("take", "youtube", "--label", "yt-key-1", "--cost", step.cost, "--budget", "units")
	}
	// Now 09:35; the sliding hour counts from 08:35:00.000001.
	out := e.ok("history", "youtube", "--label", "yt-key-1", "--budget", "units", "--every", "15m")
	want := strings.Join([]string{
		"youtube/units for yt-key-1: 7 of 10 used in the window (sliding 1h), per 15m in UTC; a full bar is the limit",
		"08:30  |                                        |  0",
		"08:45  |                                        |  0",
		"09:00  |############                            |  3  (2 calls)",
		"09:15  |############                            |  3  (1 call)",
		"09:30  |####                                    |  1  (1 call)",
		"",
	}, "\n")
	if out != want {
		t.Errorf("history:\n%s\nwant:\n%s", out, want)
	}

	var charts []historyJSON
	decode(t, e.ok("--json", "history", "youtube", "--label", "yt-key-1"), &charts)
	if len(charts) != 2 {
		t.Fatalf("history --json: %d charts", len(charts))
	}
	units := charts[1]
	if units.Budget != "units" || units.Used != 7 || units.EverySeconds != 300 || len(units.Buckets) != 13 ||
		!units.From.Equal(t0.Add(35*time.Minute-time.Hour+time.Microsecond)) || !units.To.Equal(t0.Add(35*time.Minute)) {
		t.Errorf("units chart: %+v", units)
	}
	var sum, calls int64
	for _, b := range units.Buckets {
		sum += b.Units
		calls += b.Calls
		if b.End.Sub(b.Start) != 5*time.Minute {
			t.Errorf("bucket %+v is not 5m", b)
		}
	}
	if sum != 7 || calls != 4 {
		t.Errorf("buckets hold %d units in %d calls, want 7 in 4", sum, calls)
	}
	// The daily window starts at midnight in Los Angeles (08:00 UTC): 1h
	// buckets from there to now.
	search := charts[0]
	if search.Budget != "search" || len(search.Buckets) != 2 || !search.Buckets[0].Start.Equal(time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)) ||
		search.Buckets[1].Units != 1 {
		t.Errorf("search chart: %+v", search)
	}
	// Method totals come from hourly rows: a sliding window that starts
	// inside an hour says which hours they cover.
	e.ok("take", "youtube", "--label", "yt-key-1", "--cost", "1", "--budget", "units", "--method", "videos.list")
	out = e.ok("history", "youtube", "--label", "yt-key-1", "--budget", "units", "--every", "15m")
	if !strings.HasSuffix(out, "\nby method (hours from 08:00): (no method) 7, videos.list 1\n") {
		t.Errorf("history with a method:\n%s", out)
	}

	for _, bad := range [][]string{
		{"history", "youtube", "--label", "yt-key-1", "--every", "0s"},
		{"history", "youtube", "--label", "yt-key-1", "--every", "fortnight"},
		{"history", "youtube", "--label", "yt-key-1", "--every", "1ms"},
		{"history", "youtube"},
		{"history", "youtube", "--label", "yt-key-1", "--budget", "nope"},
	} {
		if r := e.run(bad...); r.code != ExitUsage {
			t.Errorf("quotactl %v: exit %d, want 2 (%s)", bad, r.code, r.errOut)
		}
	}
}

func TestExhaust(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup()
	tests := []struct {
		budget, until string
		want          time.Time
	}{
		{"units", "2h", t0.Add(2 * time.Hour)},
		{"units", "2026-11-22T12:00:00Z", time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)},
		{"units", "reset", t0.Add(time.Hour)},                              // sliding: one window from now
		{"search", "reset", time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)}, // midnight in Los Angeles
	}
	for _, tt := range tests {
		var got struct {
			Budget string
			Until  time.Time
		}
		decode(t, e.ok("--json", "exhaust", "youtube", "--label", "yt-key-1", "--budget", tt.budget, "--until", tt.until), &got)
		if got.Budget != tt.budget || !got.Until.Equal(tt.want) {
			t.Errorf("exhaust --until %s: %+v, want %v", tt.until, got, tt.want)
		}
		if u := e.usage("youtube")["yt-key-1/"+tt.budget]; u.ExhaustedUntil == nil || !u.ExhaustedUntil.Equal(tt.want) || u.Remaining != 0 {
			t.Errorf("status after exhaust --until %s: %+v", tt.until, u)
		}
	}
	r := e.run("take", "youtube", "--label", "yt-key-1", "--cost", "1", "--budget", "units")
	if r.code != ExitExhausted {
		t.Fatalf("take on a budget marked spent: exit %d", r.code)
	}
	oneLine(t, r.errOut, "youtube/units is marked spent for yt-key-1 until 2026-11-22 10:00:00 UTC", "frees up in 1h")

	for _, until := range []string{"2026-11-22T08:00:00Z", "-5m", "0s", "tomorrow"} {
		r := e.run("exhaust", "youtube", "--label", "yt-key-1", "--budget", "units", "--until", until)
		if r.code != ExitUsage {
			t.Errorf("--until %s: exit %d", until, r.code)
		}
		oneLine(t, r.errOut, "--until")
	}
}

// TestExhaustBeyondWhatTheStoreKeeps: an --until later than a store can
// keep (quota.MaxTimeMicro, in 2255) marks the budget until then, and
// exhaust says so, as status does, not the time asked for.
func TestExhaustBeyondWhatTheStoreKeeps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("budget", "set", "big/w", "--limit", "9007199254740991", "--window", "2562047h")
	e.vars["KEY"] = "AIzaSy-exhaust-clamp"
	e.ok("take", "big", "--credential-env", "KEY", "--label", "k", "--cost", "1")
	kept := time.UnixMicro(backend.MaxTimeMicro).UTC()
	for _, until := range []string{"reset", "9999-01-01T00:00:00Z", "2562047h"} {
		var got struct{ Until time.Time }
		decode(t, e.ok("--json", "exhaust", "big", "--label", "k", "--budget", "w", "--until", until), &got)
		if !got.Until.Equal(kept) {
			t.Errorf("exhaust --json --until %s: until %v, want %v (what the store keeps)", until, got.Until, kept)
		}
		if u := e.usage("big")["k/w"]; u.ExhaustedUntil == nil || !u.ExhaustedUntil.Equal(kept) {
			t.Errorf("status after exhaust --until %s: %+v, want marked until %v", until, u, kept)
		}
		out := e.ok("exhaust", "big", "--label", "k", "--budget", "w", "--until", until)
		if want := "big/w for k: marked spent until 2255-06-05 23:47:34 UTC (in 83470d14h)\n"; out != want {
			t.Errorf("exhaust --until %s printed %q, want %q", until, out, want)
		}
	}
}

func TestAdjustAndReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup()
	e.ok("exhaust", "youtube", "--label", "yt-key-1", "--budget", "units", "--until", "1h")
	g, out, _ := e.g()
	err := adjustRun(context.Background(), &adjustOptions{globals: g, API: "youtube", Cred: credFlags{Label: "yt-key-1"}, Budget: "units", Used: 7})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "youtube/units for yt-key-1: 7 of 10 used\n" {
		t.Errorf("adjust printed %q", out.String())
	}
	if u := e.usage("youtube")["yt-key-1/units"]; u.Used != 7 || u.ExhaustedUntil != nil {
		t.Errorf("after adjust: %+v (the mark should be cleared)", u)
	}
	for _, used := range []string{"11", "-1"} {
		r := e.run("adjust", "youtube", "--label", "yt-key-1", "--budget", "units", "--used", used)
		if r.code != ExitUsage {
			t.Errorf("--used %s: exit %d", used, r.code)
		}
		oneLine(t, r.errOut, "--used "+used)
	}
	if r := e.run("adjust", "youtube", "--label", "yt-key-1", "--budget", "units"); r.code != ExitUsage {
		t.Errorf("adjust without --used: exit %d", r.code)
	}

	r := e.run("reset", "youtube", "--label", "yt-key-1")
	if r.code != ExitUsage {
		t.Fatalf("reset without --yes: exit %d", r.code)
	}
	oneLine(t, r.errOut, "add --yes")
	if got := e.usage("youtube")["yt-key-1/units"].Used; got != 7 {
		t.Fatalf("reset without --yes changed usage: %d", got)
	}
	out2 := e.ok("reset", "youtube", "--label", "yt-key-1", "--budget", "units", "--yes")
	if out2 != "youtube/units for yt-key-1: reset, 0 of 10 used\n" {
		t.Errorf("reset printed %q", out2)
	}
	u := e.usage("youtube")
	if u["yt-key-1/units"].Used != 0 || u["yt-key-1/search"].Used != 1 {
		t.Errorf("after reset --budget units: %+v", u)
	}
	e.ok("reset", "youtube", "--label", "yt-key-1", "--yes")
	if got := e.usage("youtube")["yt-key-1/search"].Used; got != 0 {
		t.Errorf("after reset of every budget: search used %d", got)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup()
	e.tty = true
	out := e.ok("list")
	fp := quota.DefaultFingerprint("AIzaSy-key-one")
	want := strings.Join([]string{
		"API      KIND        NAME      DETAIL",
		"youtube  budget      search    3 units per day, reset at midnight America/Los_Angeles",
		"youtube  budget      units     10 units per sliding 1h",
		"youtube  credential  yt-key-1  fingerprint " + fp + ", owner " + fp[:8],
		"",
	}, "\n")
	if out != want {
		t.Errorf("list:\n%s\nwant:\n%s", out, want)
	}
	var l []listJSON
	decode(t, e.ok("--json", "list"), &l)
	if len(l) != 1 || l[0].API != "youtube" || len(l[0].Budgets) != 2 || l[0].Budgets[1] != (budgetDefJSON{"units", 10, "sliding:1h0m0s", "units"}) ||
		len(l[0].Credentials) != 1 || l[0].Credentials[0] != (credentialJSON{"yt-key-1", fp, fp}) {
		t.Errorf("list --json = %+v", l)
	}
}

func TestEmptyStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, cmd := range [][]string{{"list"}, {"status"}, {"budget", "list"}} {
		r := e.run(cmd...)
		if r.code != 0 || r.out != "" || !strings.Contains(r.errOut, "budget set") {
			t.Errorf("quotactl %v on an empty store: exit %d, stdout %q, stderr %q", cmd, r.code, r.out, r.errOut)
		}
	}
	if out := e.ok("--json", "status"); out != "[]\n" {
		t.Errorf("status --json on an empty store: %q", out)
	}
}

// TestWriteOnMissingStore: a command that writes but needs what a store
// records (every one but budget set) fails on an SQLite file that does not
// exist, saying so, and creates nothing; budget set with a bad value
// creates nothing either, and a good one creates the store.
func TestWriteOnMissingStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := filepath.Dir(e.path)
	e.vars["KEY"] = "AIzaSy-missing-store"
	empty := func(what string) {
		t.Helper()
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			t.Errorf("%s left %s behind", what, ents[0].Name())
			os.RemoveAll(dir)
			os.Mkdir(dir, 0o755)
		}
	}
	for _, args := range [][]string{
		{"adjust", "youtube", "--label", "k", "--budget", "units", "--used", "3"},
		{"exhaust", "youtube", "--label", "k", "--budget", "units", "--until", "reset"},
		{"take", "youtube", "--credential-env", "KEY", "--cost", "1"},
		{"refund", "youtube/0123456789abcdef01234567/1a2b3c4d5e.XYZ"},
		{"reset", "youtube", "--label", "k", "--yes"},
		{"budget", "delete", "youtube/units"},
		{"credential", "rotate", "youtube", "k", "--credential-env", "KEY"},
		{"credential", "relabel", "youtube", "k", "k2"},
		{"credential", "forget", "youtube", "k"},
	} {
		r := e.run(args...)
		if r.code != ExitUsage {
			t.Errorf("quotactl %v on a missing store: exit %d, want 2 (%s)", args, r.code, r.errOut)
		}
		oneLine(t, r.errOut, "no store at "+e.url, "--store", "budget set")
		empty(strings.Join(args, " "))
	}
	for _, args := range [][]string{
		{"budget", "set", "youtube/units", "--limit", "0", "--window", "1h"},
		{"budget", "set", "youtube/units", "--limit", "10", "--daily", "Nowhere/Zone"},
		{"budget", "set", "youtube", "--limit", "10", "--window", "1h"},
	} {
		if r := e.run(args...); r.code != ExitUsage {
			t.Errorf("quotactl %v: exit %d, want 2 (%s)", args, r.code, r.errOut)
		}
		empty(strings.Join(args, " "))
	}
	e.ok("budget", "set", "youtube/units", "--limit", "10", "--window", "1h")
	if _, err := os.Stat(e.path); err != nil {
		t.Errorf("budget set did not create the store: %v", err)
	}
	e.ok("take", "youtube", "--credential-env", "KEY", "--label", "k", "--cost", "1")
}

func TestVersionAndCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if out := e.ok("version"); !strings.HasPrefix(out, "quotactl ") || !strings.Contains(out, "go1.") {
		t.Errorf("version printed %q", out)
	}
	var v struct{ Version, Go, OS, Arch string }
	decode(t, e.ok("--json", "version"), &v)
	if v.Version == "" || v.Go == "" || v.OS == "" || v.Arch == "" {
		t.Errorf("version --json = %+v", v)
	}
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		if out := e.ok("completion", sh); !strings.Contains(out, "quotactl") || len(out) < 500 {
			t.Errorf("completion %s printed %d bytes", sh, len(out))
		}
	}
	if r := e.run("completion", "tcsh"); r.code != ExitUsage {
		t.Errorf("completion tcsh: exit %d", r.code)
	}
}

func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, a := range [][]string{{}, {"--help"}, {"take", "--help"}, {"help", "status"}, {"budget"}, {"costs"}} {
		r := e.run(a...)
		if r.code != 0 || !strings.Contains(r.out, "Usage:") || r.errOut != "" {
			t.Errorf("quotactl %v: exit %d, stdout %.60q, stderr %q", a, r.code, r.out, r.errOut)
		}
	}
	if out := e.ok("--help"); !strings.Contains(out, "Exit codes:") || !strings.Contains(out, "4  the cost is larger") {
		t.Error("the root help does not document the exit codes")
	}
	if out := e.ok("status", "--help"); !strings.Contains(out, "JSON: an array of {api, owner, credentials: [{label, fingerprint}]") {
		t.Error("status help does not document its JSON fields")
	}
}

// TestStoreErrors: the store's failures are exit 1; a malformed URL is a
// usage error.
func TestStoreErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := &globals{io: e.io(nil, nil), storeURL: "redis://127.0.0.1:1?max_retries=0"}
	_, err := g.Store(context.Background())
	if exitCode(err) != ExitError || !errors.Is(err, quota.ErrStoreUnavailable) {
		t.Errorf("unreachable store: %v (exit %d)", err, exitCode(err))
	}
	g = &globals{io: e.io(nil, nil), storeURL: "mysql://db"}
	_, err = g.Store(context.Background())
	if exitCode(err) != ExitUsage {
		t.Errorf("malformed URL: %v (exit %d)", err, exitCode(err))
	}
	// $QUOTA_STORE names the store when --store is not given.
	e.vars["QUOTA_STORE"] = "sqlite:" + filepath.Join(t.TempDir(), "env.db")
	g = &globals{io: e.io(nil, nil)}
	st, err := g.Store(context.Background())
	if err != nil {
		t.Fatalf("$QUOTA_STORE: %v", err)
	}
	st.Close()
	if _, err := os.Stat(strings.TrimPrefix(e.vars["QUOTA_STORE"], "sqlite:")); err != nil {
		t.Errorf("$QUOTA_STORE's file: %v", err)
	}
}

// TestOwnersAndRotation: --owner makes keys of one project share its
// budgets; rotate keeps a label's usage; relabel and forget change the list
// and keep usage; owners show in status, list, history and --json.
func TestOwnersAndRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("budget", "set", "youtube/units", "--limit", "10", "--window", "1h")
	e.vars["P1"], e.vars["P2"], e.vars["P3"] = "AIzaSy-project-one", "AIzaSy-project-two", "AIzaSy-project-new"
	e.ok("take", "youtube", "--credential-env", "P1", "--label", "k1", "--owner", "my-project", "--cost", "4")
	var res reservationJSON
	decode(t, e.ok("--json", "take", "youtube", "--credential-env", "P2", "--label", "k2", "--owner", "my-project", "--cost", "5"), &res)
	if res.Owner != "my-project" || res.Usage[0].Used != 9 || !strings.HasPrefix(res.ID, "youtube/my-project/") {
		t.Fatalf("second key of the project: %+v; want owner my-project, used 9", res)
	}
	// A refund by ID from another process.
	if out := e.ok("refund", res.ID); !strings.Contains(out, "refunded") {
		t.Fatalf("refund: %q", out)
	}
	var rows []statusJSON
	decode(t, e.ok("--json", "status", "youtube"), &rows)
	if len(rows) != 1 || rows[0].Owner != "my-project" || rows[0].Used != 4 || len(rows[0].Credentials) != 2 {
		t.Fatalf("status --json = %+v; want one owner row, used 4, two credentials", rows)
	}
	e.tty = true
	e.vars["COLUMNS"] = "200"
	if out := e.ok("status", "youtube"); !strings.Contains(out, "youtube  my-project  k1,k2        units   4/10") {
		t.Errorf("status:\n%s", out)
	}
	e.vars["COLUMNS"] = "80" // one owner column: the owner and its credentials
	if out := e.ok("status", "youtube"); !strings.Contains(out, "youtube  my-project (k1,k2)  units   4/10") {
		t.Errorf("status at 80 columns:\n%s", out)
	}
	delete(e.vars, "COLUMNS")
	e.tty = false
	if out := e.ok("status", "--owner", "my-project"); strings.Count(out, "my-project") != 1 {
		t.Errorf("status --owner my-project:\n%s", out)
	}
	if r := e.run("status", "--owner", "nobody"); r.code != ExitUsage || !strings.Contains(r.errOut, `unknown owner "nobody"`) {
		t.Errorf("status --owner nobody: exit %d, %q", r.code, r.errOut)
	}

	// Rotation: k1's secret is replaced; the owner keeps its usage.
	e.ok("credential", "rotate", "youtube", "k1", "--credential-env", "P3")
	decode(t, e.ok("--json", "take", "youtube", "--credential-env", "P3", "--label", "k1", "--cost", "1"), &res)
	if res.Owner != "my-project" || res.Usage[0].Used != 5 {
		t.Fatalf("after rotation: %+v; want used 5 on my-project", res)
	}
	var creds []credentialRowJSON
	decode(t, e.ok("--json", "credential", "list", "youtube"), &creds)
	if len(creds) != 3 {
		t.Fatalf("credential list = %+v", creds)
	}
	for _, c := range creds {
		if c.Owner != "my-project" {
			t.Errorf("credential %+v not under my-project", c)
		}
	}
	var hist []historyJSON
	decode(t, e.ok("--json", "history", "youtube", "--label", "k2"), &hist)
	if len(hist) != 1 || hist[0].Owner != "my-project" || hist[0].Used != 5 {
		t.Fatalf("history --json = %+v", hist)
	}

	// Relabel, then forget: usage stays.
	e.ok("credential", "relabel", "youtube", "k2", "k2-old")
	if r := e.run("credential", "relabel", "youtube", "k2-old", "k1"); r.code != ExitUsage || !strings.Contains(r.errOut, "label taken") {
		t.Fatalf("relabel onto k1: exit %d, %q", r.code, r.errOut)
	}
	out := e.ok("credential", "forget", "youtube", "k2-old")
	if !strings.Contains(out, "owner my-project keeps its usage") {
		t.Errorf("forget: %q", out)
	}
	decode(t, e.ok("--json", "status", "youtube"), &rows)
	if len(rows) != 1 || rows[0].Used != 5 || len(rows[0].Credentials) != 2 {
		t.Fatalf("after forget: %+v; want used 5, two credentials", rows)
	}
	var l []listJSON
	decode(t, e.ok("--json", "list"), &l)
	if len(l[0].Credentials) != 2 || l[0].Credentials[0].Owner != "my-project" {
		t.Fatalf("list --json = %+v", l)
	}
}

// TestRotateOntoRecordedCredential: rotating a label onto a secret the store
// already records (another label's key) is refused with exit 2 and a line
// naming that credential; nothing changes: both keys stay listed and their
// usage keeps counting, so the second key cannot spend past its limit.
func TestRotateOntoRecordedCredential(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("budget", "set", "c/u", "--limit", "100", "--window", "1h")
	e.vars["A"], e.vars["B"] = "secA", "secB"
	e.ok("take", "c", "--credential-env", "A", "--label", "ka", "--cost", "10")
	e.ok("take", "c", "--credential-env", "B", "--label", "kb", "--cost", "20")
	list, status := e.ok("--json", "credential", "list", "c"), e.ok("--json", "status", "c")

	r := e.run("credential", "rotate", "c", "ka", "--credential-env", "B")
	if r.code != ExitUsage || r.out != "" {
		t.Fatalf("rotate ka onto kb's secret: exit %d, stdout %q, stderr %q; want exit %d", r.code, r.out, r.errOut, ExitUsage)
	}
	oneLine(t, r.errOut, `rotate "ka"`, `already recorded as credential "kb"`)
	if strings.Contains(r.errOut, "secB") {
		t.Errorf("stderr shows the secret: %q", r.errOut)
	}
	if got := e.ok("--json", "credential", "list", "c"); got != list {
		t.Fatalf("credential list changed:\nbefore %s\nafter  %s", list, got)
	}
	if got := e.ok("--json", "status", "c"); got != status {
		t.Fatalf("status changed:\nbefore %s\nafter  %s", status, got)
	}
	// kb's 20 units still count: B can spend 80 more, not 81.
	if r := e.run("take", "c", "--credential-env", "B", "--cost", "81"); r.code != ExitExhausted {
		t.Fatalf("B takes 81 after the refused rotation: exit %d, %q; want %d", r.code, r.errOut, ExitExhausted)
	}
	e.ok("take", "c", "--credential-env", "B", "--cost", "80")
}

// TestAdjustWithOpenLease: a running service holds a lease (a block of 5
// units of which it admitted 1); quotactl adjust keeps the block counted
// (the service goes on admitting from it) and says so, in text and JSON.
func TestAdjustWithOpenLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.setup()
	g, _, _ := e.g()
	svc, err := quota.Load(ctx, g.store, "youtube", quota.WithClock(e.clock.Now),
		quota.WithLeases(quota.LeaseOptions{Block: 5, MaxFraction: 0.5, MaxTime: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "AIzaSy-key-one", Label: "yt-key-1"}
	if _, err := svc.Take(ctx, key, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	out := e.ok("adjust", "youtube", "--label", "yt-key-1", "--budget", "units", "--used", "3")
	want := "youtube/units for yt-key-1: 3 of 10 used\n" +
		"  8 counted: leases of running processes hold 5 (or they were taken since); adjust again once their leases end (1s by default) to set usage exactly\n"
	if out != want {
		t.Fatalf("adjust printed %q, want %q", out, want)
	}
	var got struct{ Used, Counted, Limit int64 }
	decode(t, e.ok("--json", "adjust", "youtube", "--label", "yt-key-1", "--budget", "units", "--used", "2"), &got)
	if got.Used != 2 || got.Counted != 7 || got.Limit != 10 {
		t.Fatalf("adjust --json = %+v, want used 2, counted 7, limit 10", got)
	}
	// The service admits its 4 unused units; nothing else can be spent.
	for range 4 {
		if _, err := svc.Take(ctx, key, quota.Units("units", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if u := e.usage("youtube")["yt-key-1/units"]; u.Used != 7 {
		t.Fatalf("status after the lease admitted its block: %+v, want 7 used", u)
	}
}

// TestHistoryByOwner: history charts an owner's budgets with --owner alone
// (they are kept per owner); an --owner that is not the one the store
// records for the credential named is a usage error saying so, on a store
// opened read-only (where the command used to fail on a write it should not
// try) and on a writable one (where it used to move the credential to that
// owner).
func TestHistoryByOwner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("budget", "set", "youtube/units", "--limit", "10", "--window", "1h")
	e.vars["P1"], e.vars["P2"] = "AIzaSy-owner-one", "AIzaSy-owner-two"
	e.ok("take", "youtube", "--credential-env", "P1", "--label", "k1", "--owner", "proj", "--cost", "4")
	e.ok("take", "youtube", "--credential-env", "P2", "--label", "k2", "--owner", "proj", "--cost", "3")

	out := e.ok("history", "youtube", "--owner", "proj")
	if !strings.HasPrefix(out, "youtube/units for owner proj: 7 of 10 used in the window") {
		t.Errorf("history --owner proj:\n%s", out)
	}
	var charts []historyJSON
	decode(t, e.ok("--json", "history", "youtube", "--owner", "proj"), &charts)
	if len(charts) != 1 || charts[0].Owner != "proj" || charts[0].Used != 7 || charts[0].Credential != "" || charts[0].Fingerprint != "" {
		t.Errorf("history --owner proj --json: %+v", charts)
	}
	// The owner's credential with its own owner named: the same chart.
	if out := e.ok("history", "youtube", "--label", "k1", "--owner", "proj"); !strings.HasPrefix(out, "youtube/units for k1 (owner proj): 7 of 10") {
		t.Errorf("history --label k1 --owner proj:\n%s", out)
	}

	// Read-only (the SQLite file through --store).
	r := e.run("history", "youtube", "--label", "k1", "--owner", "other")
	if r.code != ExitUsage {
		t.Errorf("history --label k1 --owner other: exit %d, want 2 (%s)", r.code, r.errOut)
	}
	oneLine(t, r.errOut, `--owner "other"`, "k1", "kept under owner proj", "--owner alone")
	if strings.Contains(r.errOut, "read-only") {
		t.Errorf("stderr %q blames the read-only store", r.errOut)
	}
	e.vars["P3"] = "AIzaSy-owner-one"
	r = e.run("history", "youtube", "--credential-env", "P3", "--owner", "other")
	if r.code != ExitUsage {
		t.Errorf("history --credential-env P3 --owner other: exit %d, want 2 (%s)", r.code, r.errOut)
	}
	oneLine(t, r.errOut, `--owner "other"`, "kept under owner proj")
	r = e.run("history", "youtube", "--owner", "nobody")
	if r.code != ExitUsage {
		t.Errorf("history --owner nobody: exit %d, want 2", r.code)
	}
	oneLine(t, r.errOut, `unknown owner "nobody"`, "proj")

	// A writable store (Redis has no read-only mode): history moves nothing.
	g, _, errOut := e.g()
	if code := g.main(context.Background(), []string{"history", "youtube", "--label", "k1", "--owner", "other"}); code != ExitUsage {
		t.Errorf("history on a writable store: exit %d, want 2 (%s)", code, errOut)
	}
	var creds []credentialRowJSON
	decode(t, e.ok("--json", "credential", "list"), &creds)
	for _, c := range creds {
		if c.Owner != "proj" {
			t.Errorf("history moved credential %s to owner %q", c.Label, c.Owner)
		}
	}
}

// TestEmptyStoreURL: an explicitly empty --store, or a $QUOTA_STORE set but
// empty, is a usage error naming it, never a fallback to the default store;
// with neither given the default store is used.
func TestEmptyStoreURL(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state) // the default store, if anything opens it
	e := newEnv(t)
	run := func(args ...string) result {
		t.Helper()
		out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
		code := Main(context.Background(), args, e.io(out, errOut))
		return result{code, out.String(), errOut.String()}
	}
	for _, args := range [][]string{
		{"--store", "", "status"},
		{"--store=", "list"},
		{"--store", " ", "budget", "set", "youtube/units", "--limit", "10", "--window", "1h"},
	} {
		r := run(args...)
		if r.code != ExitUsage {
			t.Errorf("quotactl %q: exit %d, want 2 (stdout %q, stderr %q)", args, r.code, r.out, r.errOut)
		}
		oneLine(t, r.errOut, "--store", "empty store URL")
	}
	// --store wins over $QUOTA_STORE, empty or not.
	e.vars["QUOTA_STORE"] = ""
	r := run("status")
	if r.code != ExitUsage {
		t.Errorf("status with $QUOTA_STORE empty: exit %d, want 2 (stdout %q, stderr %q)", r.code, r.out, r.errOut)
	}
	oneLine(t, r.errOut, "$QUOTA_STORE", "empty")
	if r := run("--store", e.url, "budget", "set", "youtube/units", "--limit", "10", "--window", "1h"); r.code != 0 {
		t.Errorf("--store URL with $QUOTA_STORE empty: exit %d (%s)", r.code, r.errOut)
	}
	if ents, _ := os.ReadDir(state); len(ents) > 0 {
		t.Errorf("the default store's directory was created: %s", ents[0].Name())
	}
	// Neither: the default store.
	delete(e.vars, "QUOTA_STORE")
	if r := run("budget", "set", "youtube/units", "--limit", "10", "--window", "1h"); r.code != 0 {
		t.Errorf("budget set on the default store: exit %d (%s)", r.code, r.errOut)
	}
	if _, err := os.Stat(filepath.Join(state, "quotactl", "quota.db")); err != nil {
		t.Errorf("the default store: %v", err)
	}
}

// TestOwnerByShortFingerprint: a key that is its own owner shows in status
// under the short form of its fingerprint; that form (or any longer prefix)
// names it in --owner, as the full fingerprint does.
func TestOwnerByShortFingerprint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("budget", "set", "youtube/units", "--limit", "10", "--window", "1h")
	e.vars["K"] = "AIzaSy-own-owner"
	e.ok("take", "youtube", "--credential-env", "K", "--label", "k1", "--cost", "3")
	var rows []statusJSON
	decode(t, e.ok("--json", "status", "youtube"), &rows)
	if len(rows) != 1 {
		t.Fatalf("status --json = %+v", rows)
	}
	full := rows[0].Owner
	short := full[:8]
	if out := e.ok("status", "youtube"); !strings.Contains(out, short) {
		t.Fatalf("status does not show the short fingerprint %s:\n%s", short, out)
	}
	for _, given := range []string{short, full[:12], full} {
		decode(t, e.ok("--json", "status", "--owner", given), &rows)
		if len(rows) != 1 || rows[0].Owner != full || rows[0].Used != 3 {
			t.Errorf("status --owner %s = %+v; want the key's row, used 3", given, rows)
		}
		var hist []historyJSON
		decode(t, e.ok("--json", "history", "youtube", "--owner", given), &hist)
		if len(hist) != 1 || hist[0].Owner != full || hist[0].Used != 3 {
			t.Errorf("history --owner %s = %+v; want the key's account, used 3", given, hist)
		}
	}
	if r := e.run("status", "--owner", full[:7]); r.code != ExitUsage {
		t.Errorf("status --owner with 7 digits: exit %d; want a usage error (shorter than status prints)", r.code)
	}
}
