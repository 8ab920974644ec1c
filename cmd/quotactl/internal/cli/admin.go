package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

type exhaustOptions struct {
	*globals
	API    string
	Cred   credFlags
	Budget string
	Until  string // RFC 3339, a duration from now, or "reset"
}

func newCmdExhaust(g *globals, runF func(context.Context, *exhaustOptions) error) *cobra.Command {
	opts := &exhaustOptions{globals: g}
	c := &cobra.Command{
		Use:   "exhaust API --label L --budget B --until TIME",
		Short: "Mark a budget spent until a time (the upstream said so)",
		Long: `Mark a credential's budget spent until a time, for every process sharing the
store: takes are refused (exit 3) until then. Use it when the upstream says the
quota is spent though the meter has units left. --until is an RFC 3339 time
(2026-11-23T08:00:00Z), a duration from now (2h), or "reset": a daily or
monthly budget's next reset, or, for a sliding window, one window length from
now.
A time later than the store can keep (2255-06-05) marks it until then, and
exhaust prints that time. 'quotactl adjust' or 'quotactl reset' clears the mark.

JSON fields: api, budget, owner, credential, fingerprint, until.`,
		Example: `  quotactl exhaust youtube --label yt-key-1 --budget units --until reset`,
		Args:    exactArgs(1, "one API argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.API = args[0]
			if opts.Budget == "" {
				return usageErrorf("missing --budget B")
			}
			if opts.Until == "" {
				return usageErrorf("missing --until TIME (RFC 3339, a duration such as 2h, or reset)")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return exhaustRun(cmd.Context(), opts)
		},
	}
	opts.Cred.register(c, "the credential's label")
	c.Flags().StringVar(&opts.Budget, "budget", "", "the budget to mark spent")
	c.Flags().StringVar(&opts.Until, "until", "", `until when: RFC 3339 time, duration from now (2h), or "reset"`)
	return c
}

// parseUntil reads --until against now and the budget's window.
func parseUntil(s string, now time.Time, b quota.Budget) (time.Time, error) {
	if strings.EqualFold(s, "reset") {
		if b.Window.IsCalendar() {
			return b.Window.NextReset(now), nil
		}
		return now.Add(b.Window.Duration()), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if !t.After(now) {
			return time.Time{}, usageErrorf("--until %s is not in the future", s)
		}
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, usageErrorf("--until %q: want an RFC 3339 time (2026-11-23T08:00:00Z), a duration (2h) or reset", s)
	}
	if d <= 0 {
		return time.Time{}, usageErrorf("--until %q: the duration must be > 0", s)
	}
	return now.Add(d), nil
}

// target resolves the API, credential and budget an admin command acts on.
func (g *globals) target(ctx context.Context, api string, cf credFlags, budget string) (*quota.Limiter, quota.APIInfo, cred, quota.Budget, error) {
	l, info, err := g.limiter(ctx, api)
	if err != nil {
		return nil, info, cred{}, quota.Budget{}, err
	}
	var b quota.Budget
	if budget != "" {
		if b, err = budgetOf(info, budget); err != nil {
			return nil, info, cred{}, b, err
		}
	}
	if !cf.given() {
		return nil, info, cred{}, b, usageErrorf("missing credential: give --label L (or --credential-env VAR or --credential-file FILE)")
	}
	c, err := g.credential(ctx, cf, info)
	if err != nil {
		return nil, info, cred{}, b, err
	}
	// --owner names where the credential's budgets are kept; the limiter
	// would move a credential the store keeps elsewhere to that owner, as
	// a charge does, and act on the other owner's budgets (a reset would
	// drop every budget of it). An admin command moves nothing: say so.
	if err := otherOwner(cf, c, info, "exhaust, adjust and reset move no credential to another owner", "act on"); err != nil {
		return nil, info, cred{}, b, err
	}
	return l, info, c, b, nil
}

// otherOwner is a usage error when --owner names another owner than the
// one the store keeps the credential under, for a command that moves no
// credential (only a charge, 'quotactl take --owner', does): what says why,
// verb what the command does with the recorded owner's budgets.
func otherOwner(cf credFlags, c cred, info quota.APIInfo, what, verb string) error {
	if cf.Owner == "" {
		return nil
	}
	for _, k := range info.Credentials {
		if k.ID == c.Fingerprint && k.Owner != cf.Owner {
			return usageErrorf("--owner %q: credential %s of %s is kept under owner %s, and %s; leave --owner out to %s %s's budgets ('quotactl take … --owner' moves a credential)",
				cf.Owner, view.CredentialName(k), info.Name, view.AccountName(k.Account()), what, verb, view.AccountName(k.Account()))
		}
	}
	return nil
}

func exhaustRun(ctx context.Context, opts *exhaustOptions) error {
	l, info, c, b, err := opts.target(ctx, opts.API, opts.Cred, opts.Budget)
	if err != nil {
		return err
	}
	until, err := parseUntil(opts.Until, opts.now(), b)
	if err != nil {
		return err
	}
	// What the store keeps, and so what status shows: no later than
	// quota.MaxTimeMicro (Limiter.Exhaust clamps the same way), in whole
	// microseconds.
	until = backend.ClampTime(until).Truncate(time.Microsecond)
	if err := l.Exhaust(ctx, c.Credential, b.Name, until); err != nil {
		return err
	}
	if opts.json {
		return opts.printJSON(struct {
			API         string    `json:"api"`
			Budget      string    `json:"budget"`
			Owner       string    `json:"owner"`
			Credential  string    `json:"credential"`
			Fingerprint string    `json:"fingerprint"`
			Until       time.Time `json:"until"`
		}{info.Name, b.Name, c.Account, c.Label, c.Fingerprint, until.UTC()})
	}
	_, err = fmt.Fprintf(opts.io.Out, "%s/%s for %s: marked spent until %s (%s)\n", info.Name, b.Name, c.name(), opts.absolute(until), relative(until.Sub(opts.now())))
	return err
}

type adjustOptions struct {
	*globals
	API    string
	Cred   credFlags
	Budget string
	Used   int64
}

func newCmdAdjust(g *globals, runF func(context.Context, *adjustOptions) error) *cobra.Command {
	opts := &adjustOptions{globals: g}
	c := &cobra.Command{
		Use:   "adjust API --label L --budget B --used N",
		Short: "Set a budget's usage to match the upstream's console",
		Long: `Set a credential's usage of a budget to N units, recorded now, replacing what
the meter counted, and clear any exhaustion mark: to match what the upstream's
console says was spent.

JSON fields: api, budget, owner, credential, fingerprint, used, limit.`,
		Example: `  quotactl adjust youtube --label yt-key-1 --budget units --used 4120`,
		Args:    exactArgs(1, "one API argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.API = args[0]
			if opts.Budget == "" {
				return usageErrorf("missing --budget B")
			}
			if !cmd.Flags().Changed("used") {
				return usageErrorf("missing --used N")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return adjustRun(cmd.Context(), opts)
		},
	}
	opts.Cred.register(c, "the credential's label")
	c.Flags().StringVar(&opts.Budget, "budget", "", "the budget to set")
	c.Flags().Int64Var(&opts.Used, "used", 0, "units used, from 0 to the budget's limit")
	return c
}

type adjustedJSON struct {
	API         string `json:"api"`
	Budget      string `json:"budget"`
	Owner       string `json:"owner"`
	Credential  string `json:"credential"`
	Fingerprint string `json:"fingerprint"`
	Used        int64  `json:"used"`
	// Counted is what the store counts after the adjust: used, plus the
	// blocks open leases of running processes hold (or units taken since)
	Counted int64 `json:"counted"`
	Limit   int64 `json:"limit"`
}

func adjustRun(ctx context.Context, opts *adjustOptions) error {
	l, info, c, b, err := opts.target(ctx, opts.API, opts.Cred, opts.Budget)
	if err != nil {
		return err
	}
	if opts.Used < 0 || opts.Used > b.Limit {
		return usageErrorf("--used %d: must be from 0 to the limit of %s/%s, %d", opts.Used, info.Name, b.Name, b.Limit)
	}
	if err := l.Adjust(ctx, c.Credential, b.Name, opts.Used); err != nil {
		return err
	}
	counted := max(opts.Used, countedAfter(ctx, l, c)[b.Name])
	if opts.json {
		return opts.printJSON(adjustedJSON{info.Name, b.Name, c.Account, c.Label, c.Fingerprint, opts.Used, counted, b.Limit})
	}
	if _, err := fmt.Fprintf(opts.io.Out, "%s/%s for %s: %d of %d used\n", info.Name, b.Name, c.name(), opts.Used, b.Limit); err != nil {
		return err
	}
	return printHeld(opts.io.Out, opts.Used, counted)
}

// countedAfter returns what the store counts of each budget for c after an
// adjust (nil when it cannot be read). Adjust keeps the blocks leases of
// running processes took within their lease time (open leases go on
// admitting from them), so it may be more than the adjust set.
func countedAfter(ctx context.Context, l *quota.Limiter, c cred) map[string]int64 {
	us, err := l.StatusOf(ctx, c.Account)
	if err != nil {
		return nil
	}
	out := make(map[string]int64, len(us))
	for _, u := range us {
		out[u.Budget] = u.Used
	}
	return out
}

// printHeld says so when the store counts more than an adjust set.
func printHeld(w io.Writer, used, counted int64) error {
	if counted <= used {
		return nil
	}
	_, err := fmt.Fprintf(w, "  %d counted: leases of running processes hold %d (or they were taken since); adjust again once their leases end (1s by default) to set usage exactly\n", counted, counted-used)
	return err
}

type resetOptions struct {
	*globals
	API    string
	Cred   credFlags
	Budget string // empty: every budget
	Yes    bool
}

func newCmdReset(g *globals, runF func(context.Context, *resetOptions) error) *cobra.Command {
	opts := &resetOptions{globals: g}
	c := &cobra.Command{
		Use:   "reset API --label L [--budget B] --yes",
		Short: "Forget a credential's recorded usage",
		Long: `Drop a credential's recorded usage of one budget, or of every budget of the
API, and clear any exhaustion mark, as if nothing had been spent. It cannot be
undone, so it refuses to run without --yes (exit 2).

JSON: an array of {api, budget, owner, credential, fingerprint, used (0), limit}.`,
		Example: `  quotactl reset youtube --label yt-key-1 --budget search --yes`,
		Args:    exactArgs(1, "one API argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.API = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return resetRun(cmd.Context(), opts)
		},
	}
	opts.Cred.register(c, "the credential's label")
	c.Flags().StringVar(&opts.Budget, "budget", "", "only this budget (default: every budget of the API)")
	c.Flags().BoolVar(&opts.Yes, "yes", false, "confirm: drop the recorded usage")
	return c
}

func resetRun(ctx context.Context, opts *resetOptions) error {
	l, info, c, b, err := opts.target(ctx, opts.API, opts.Cred, opts.Budget)
	if err != nil {
		return err
	}
	budgets := info.Budgets
	if opts.Budget != "" {
		budgets = []quota.Budget{b}
	}
	if !opts.Yes {
		what := opts.API + "/" + opts.Budget
		if opts.Budget == "" {
			what = "every budget of " + opts.API
		}
		return usageErrorf("reset drops the recorded usage of %s for %s and cannot be undone: add --yes to confirm", what, c.name())
	}
	var out []adjustedJSON
	for _, b := range budgets {
		if err := l.Adjust(ctx, c.Credential, b.Name, 0); err != nil {
			return err
		}
		out = append(out, adjustedJSON{info.Name, b.Name, c.Account, c.Label, c.Fingerprint, 0, 0, b.Limit})
	}
	counted := countedAfter(ctx, l, c) // one read for every budget reset
	for i := range out {
		out[i].Counted = counted[out[i].Budget]
	}
	if opts.json {
		return opts.printJSON(out)
	}
	for _, a := range out {
		if _, err := fmt.Fprintf(opts.io.Out, "%s/%s for %s: reset, 0 of %d used\n", a.API, a.Budget, c.name(), a.Limit); err != nil {
			return err
		}
		if err := printHeld(opts.io.Out, 0, a.Counted); err != nil {
			return err
		}
	}
	return nil
}
