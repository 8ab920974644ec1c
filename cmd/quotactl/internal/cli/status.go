package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/quota"
)

type statusOptions struct {
	*globals
	API   string // empty: every API
	Label string // empty: every credential
	Owner string // empty: every owner
}

func newCmdStatus(g *globals, runF func(context.Context, *statusOptions) error) *cobra.Command {
	opts := &statusOptions{globals: g}
	c := &cobra.Command{
		Use:   "status [API] [--label L | --owner NAME]",
		Short: "Show what is used and left of every budget, per owner",
		Long: `Show, per API, owner and budget: what is used of the limit and what remains,
in the budget's unit ("1,234 / 30,000 tokens", "28,766 tokens"; a budget
counted in micro-dollars, unit usd-micro, as dollars: "$12.34 / $500.00"; a
budget in the default unit, units, as bare numbers: "9600/10000"), a
usage bar, when capacity next frees up (a daily or monthly budget's reset, or when a
sliding window's oldest entry leaves it), and until when the budget is marked
spent, with "(store loss)" when the mark is the limiter's reaction to a store
that lost recorded usage (a Redis restarted without persistence, flushed,
evicting or failed over): the budget counts as spent until then, unless
'quotactl adjust' sets the true usage, which clears the mark. Budgets are
kept per owner, the account every credential of one owner
shares (a Google Cloud project for YouTube); OWNER is its name, or the first
8 digits of the fingerprint of a credential that is its own owner, and
CREDENTIALS lists the owner's credentials (labels, or short fingerprints).
--label L shows the owner of the credential labelled L; --owner NAME shows
that owner (for a credential that is its own owner, NAME may be the 8 digits
shown here, or more of its fingerprint).

On a terminal the table is aligned under a header and fits the terminal's
width ($COLUMNS, else the terminal's, else 80): narrower bars and relative
times first, then shortened labels, then two lines per budget. Piped, rows
are tab-separated without a header, with full times. Rows are sorted by API,
owner, credentials and budget. The bar and the percentage are rounded down (97% is
not a full bar); a budget marked spent shows a full bar and "spent".

Budgets whose definition an operator set ('quotactl budget set', overriding
the program's) are named under the table on a terminal, and have source
"operator" in JSON ("program" otherwise). Owners with a limit of their own
('budget set --owner', learned from the upstream, or a program's) are named
under it too, with where the limit comes from; in JSON, limit_source is
"program", "operator" or "upstream" for every row, own_limit is true on an
owner's own limit, and learned_limit is what the upstream last reported
(applied or not).

JSON: an array of {api, owner, credentials: [{label, fingerprint}],
credential, fingerprint, budget, window, source, unit, used, limit, limit_source,
own_limit, learned_limit, remaining, reset, exhausted_until, store_loss, percent, reset_seconds}; credential and
fingerprint are the owner's first credential (labelled ones first); unit
is what used, limit and remaining count ("tokens"; "usd-micro":
micro-dollars; "units" when the budget declares none); reset
and exhausted_until are RFC 3339 times, absent when there is none;
store_loss is true while the exhausted_until mark is a store-loss reaction,
absent otherwise; percent is the share of the limit that cannot be spent
now, rounded down (100 while the budget is marked spent); reset_seconds is
the time until capacity next frees in whole seconds, rounded up (0 when
nothing is counted). Rows are sorted by API, owner (by the name the
dashboard and /metrics give it), credential and budget. 'quotactl serve'
answers the same JSON on /api/status.`,
		Args: rangeArgs(0, 1, "at most one API argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.API = args[0]
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return statusRun(cmd.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Label, "label", "", "only the owner of the credential with this label")
	c.Flags().StringVar(&opts.Owner, "owner", "", "only this owner (its name, or a credential's fingerprint: the 8 digits status shows, or more)")
	return c
}

// statusJSON is a row of status --json: the view every tool prints.
type statusJSON = view.Status

func statusRun(ctx context.Context, opts *statusOptions) error {
	if opts.API != "" {
		if _, _, err := opts.limiter(ctx, opts.API); err != nil {
			return err
		}
	} else if _, err := opts.apis(ctx); err != nil {
		return err
	}
	var apis []view.API
	for _, a := range opts.catalog {
		if len(a.Budgets) > 0 && (opts.API == "" || a.Name == opts.API) {
			apis = append(apis, a)
		}
	}
	r, err := opts.reader(ctx)
	if err != nil {
		return err
	}
	rows, err := r.Status(ctx, apis...)
	if err != nil {
		return err
	}
	out := []statusJSON{}
	t := &statusTable{who: []string{"OWNER", "CREDENTIALS"}, brief: "OWNER"}
	for _, st := range rows {
		if !opts.selects(st) {
			continue
		}
		out = append(out, st)
		row := statusRow{API: st.API, Who: []string{"-", "-"}, Brief: "-", Budget: st.Budget, Usage: st.Usage(), Unit: st.Unit, Whole: st.Owner == ""}
		if st.Owner != "" {
			row.Who = []string{view.AccountName(st.Owner), credNames(st.Credentials, ",")}
			row.Brief = briefOwner(st)
		}
		t.add(row)
	}
	if opts.Label != "" && !slices.ContainsFunc(apis, func(a view.API) bool { return len(selectCredentials(a.APIInfo, opts.Label)) > 0 }) {
		return usageErrorf("unknown label %q: no credential of %s has it", opts.Label, apiScope(opts.API))
	}
	if opts.Owner != "" && len(out) == 0 {
		return usageErrorf("unknown owner %q: no credential of %s belongs to it", opts.Owner, apiScope(opts.API))
	}
	if opts.json {
		return opts.printJSON(out)
	}
	if len(apis) == 0 {
		fmt.Fprintln(opts.io.ErrOut, "no budgets defined; define one with 'quotactl budget set API/BUDGET --limit N --daily ZONE'")
		return nil
	}
	if err := opts.printStatus(opts.io.Out, t); err != nil {
		return err
	}
	if opts.io.TTY {
		var set []string
		for _, a := range apis {
			for _, b := range a.Budgets {
				if a.Source(b.Name) == quota.SourceOperator {
					set = append(set, a.Name+"/"+b.Name)
				}
			}
		}
		if len(set) > 0 {
			if _, err := fmt.Fprint(opts.io.Out, wrap("set with 'quotactl budget set' (over any program's definition): "+strings.Join(set, ", "), opts.width())); err != nil {
				return err
			}
		}
		if note := driftNote(out); note != "" {
			if _, err := fmt.Fprint(opts.io.Out, wrap(note, opts.width())); err != nil {
				return err
			}
		}
		if note := ownLimitsNote(out); note != "" {
			_, err := fmt.Fprint(opts.io.Out, wrap(note, opts.width()))
			return err
		}
	}
	return nil
}

// selects reports whether --label and --owner select a status row: an
// owner with a credential of that label, an owner of that name (or
// fingerprint); a whole budget (no owner yet) only when neither is given.
func (opts *statusOptions) selects(st view.Status) bool {
	if opts.Label == "" && opts.Owner == "" {
		return true
	}
	if st.Owner == "" || opts.Owner != "" && !ownerIs(st.Owner, opts.Owner) {
		return false
	}
	return opts.Label == "" || slices.ContainsFunc(st.Credentials, func(c view.Credential) bool { return c.Label == opts.Label })
}

// briefOwner names an owner in one cell, for narrow terminals: a named
// owner with its credentials, "my-project (k1,k2)"; a credential that is its
// own owner by its label, with "+N" for the other keys rotated under it.
func briefOwner(st view.Status) string {
	if view.IsFingerprint(st.Owner) {
		// The account is a credential's fingerprint: no owner name.
		s := credNames(st.Credentials[:1], "")
		if n := len(st.Credentials) - 1; n > 0 {
			s += fmt.Sprintf(" +%d", n)
		}
		return s
	}
	return st.Owner + " (" + credNames(st.Credentials, ",") + ")"
}

// credNames joins the names of creds (labels, else short fingerprints)
// with sep.
func credNames(creds []view.Credential, sep string) string {
	out := make([]string, len(creds))
	for i, c := range creds {
		out[i] = view.CredentialName(quota.CredentialInfo{ID: c.Fingerprint, Label: c.Label})
	}
	return strings.Join(out, sep)
}

func apiScope(api string) string {
	if api == "" {
		return "any API"
	}
	return api
}

// nextFree says when capacity next comes back: a daily or monthly budget's
// reset, or when a sliding window's oldest entry leaves it.
func (g *globals) nextFree(u quota.Usage) string {
	switch {
	case u.Window.IsCalendar():
		return "reset " + g.when(u.Window.NextReset(g.now()))
	case u.Reset.IsZero():
		return "-"
	}
	return g.when(u.Reset)
}

func (g *globals) spentUntil(u quota.Usage) string {
	if u.ExhaustedUntil.IsZero() {
		return "-"
	}
	if u.StoreLoss {
		return g.when(u.ExhaustedUntil) + " (store loss)"
	}
	return g.when(u.ExhaustedUntil)
}
