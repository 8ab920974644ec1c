package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
		Long: `Show, per API, owner and budget: units used of the limit, units remaining, a
usage bar, when capacity next frees up (a daily budget's reset, or when a
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
"operator" in JSON ("program" otherwise).

JSON: an array of {api, owner, credentials: [{label, fingerprint}],
credential, fingerprint, budget, window, source, used, limit, remaining,
reset, exhausted_until, store_loss}; credential and fingerprint are the
owner's first credential (labelled ones first); reset and exhausted_until
are RFC 3339 times, absent when there is none; store_loss is true while the
exhausted_until mark is a store-loss reaction, absent otherwise.`,
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

type statusJSON struct {
	API            string           `json:"api"`
	Owner          string           `json:"owner,omitempty"`
	Credentials    []credentialJSON `json:"credentials,omitempty"`
	Credential     string           `json:"credential"`
	Fingerprint    string           `json:"fingerprint"`
	Budget         string           `json:"budget"`
	Window         string           `json:"window"`
	Source         quota.Source     `json:"source"`
	Used           int64            `json:"used"`
	Limit          int64            `json:"limit"`
	Remaining      int64            `json:"remaining"`
	Reset          *time.Time       `json:"reset,omitempty"`
	ExhaustedUntil *time.Time       `json:"exhausted_until,omitempty"`
	StoreLoss      bool             `json:"store_loss,omitempty"`
}

func statusRun(ctx context.Context, opts *statusOptions) error {
	var infos []quota.APIInfo
	if opts.API != "" {
		_, info, err := opts.limiter(ctx, opts.API)
		if err != nil {
			return err
		}
		infos = []quota.APIInfo{info}
	} else {
		all, err := opts.apis(ctx)
		if err != nil {
			return err
		}
		for _, a := range all {
			if len(a.Budgets) > 0 {
				infos = append(infos, a)
			}
		}
	}
	out := []statusJSON{}
	t := &statusTable{who: []string{"OWNER", "CREDENTIALS"}, brief: "OWNER"}
	labelSeen, ownerSeen := false, false
	for _, info := range infos {
		l, err := quota.New(opts.store, info.Name, info.Budgets, opts.limiterOptions()...)
		if err != nil {
			return fmt.Errorf("stored budgets of %s: %w", info.Name, err)
		}
		creds := selectCredentials(info, opts.Label)
		labelSeen = labelSeen || len(creds) > 0
		selected := map[string]bool{}
		for _, c := range creds {
			if opts.Owner == "" || ownerIs(c.Owner, opts.Owner) {
				selected[c.Owner] = true
			}
		}
		ownerSeen = ownerSeen || len(selected) > 0
		for _, grp := range groupByOwner(info.Credentials) {
			if !selected[grp.Account] {
				continue
			}
			us, err := l.StatusOf(ctx, grp.Account)
			if err != nil {
				return err
			}
			first := grp.Credentials[0]
			var cj []credentialJSON
			for _, c := range grp.Credentials {
				cj = append(cj, credentialJSON{Label: c.Label, Fingerprint: c.ID})
			}
			for _, u := range us {
				out = append(out, statusJSON{
					API: info.Name, Owner: grp.Account, Credentials: cj, Credential: first.Label, Fingerprint: first.ID, Budget: u.Budget, Window: u.Window.String(),
					Source: opts.source(info.Name, u.Budget),
					Used:   u.Used, Limit: u.Limit, Remaining: u.Remaining, Reset: jsonTime(u.Reset), ExhaustedUntil: jsonTime(u.ExhaustedUntil),
					StoreLoss: u.StoreLoss && !u.ExhaustedUntil.IsZero(),
				})
				t.add(statusRow{API: info.Name, Who: []string{ownerName(grp.Account), names(grp.Credentials)}, Brief: briefOwner(grp), Budget: u.Budget, Usage: u})
			}
		}
		if len(info.Credentials) == 0 && opts.Label == "" && opts.Owner == "" {
			// Nothing charged yet: every budget is whole.
			for _, b := range info.Budgets {
				out = append(out, statusJSON{API: info.Name, Budget: b.Name, Window: b.Window.String(), Source: opts.source(info.Name, b.Name), Limit: b.Limit, Remaining: b.Limit})
				t.add(statusRow{API: info.Name, Who: []string{"-", "-"}, Brief: "-", Budget: b.Name, Whole: true,
					Usage: quota.Usage{Budget: b.Name, Window: b.Window, Limit: b.Limit, Remaining: b.Limit}})
			}
		}
	}
	if opts.Label != "" && !labelSeen {
		return usageErrorf("unknown label %q: no credential of %s has it", opts.Label, apiScope(opts.API))
	}
	if opts.Owner != "" && !ownerSeen {
		return usageErrorf("unknown owner %q: no credential of %s belongs to it", opts.Owner, apiScope(opts.API))
	}
	if opts.json {
		slices.SortStableFunc(out, func(a, b statusJSON) int {
			return cmp.Or(cmp.Compare(a.API, b.API), cmp.Compare(ownerName(a.Owner), ownerName(b.Owner)), cmp.Compare(a.Credential, b.Credential), cmp.Compare(a.Budget, b.Budget))
		})
		return opts.printJSON(out)
	}
	if len(infos) == 0 {
		fmt.Fprintln(opts.io.ErrOut, "no budgets defined; define one with 'quotactl budget set API/BUDGET --limit N --daily ZONE'")
		return nil
	}
	if err := opts.printStatus(opts.io.Out, t); err != nil {
		return err
	}
	if opts.io.TTY {
		var set []string
		for _, info := range infos {
			for _, b := range info.Budgets {
				if opts.source(info.Name, b.Name) == quota.SourceOperator {
					set = append(set, info.Name+"/"+b.Name)
				}
			}
		}
		if len(set) > 0 {
			_, err := fmt.Fprint(opts.io.Out, wrap("set with 'quotactl budget set' (over any program's definition): "+strings.Join(set, ", "), opts.width()))
			return err
		}
	}
	return nil
}

// briefOwner names an owner in one cell, for narrow terminals: a named
// owner with its credentials, "my-project (k1,k2)"; a credential that is its
// own owner by its label, with "+N" for the other keys rotated under it.
func briefOwner(grp ownerGroup) string {
	if ownerName(grp.Account) != grp.Account {
		// The account is a credential's fingerprint: no owner name.
		s := credName(grp.Credentials[0])
		if n := len(grp.Credentials) - 1; n > 0 {
			s += fmt.Sprintf(" +%d", n)
		}
		return s
	}
	return grp.Account + " (" + names(grp.Credentials) + ")"
}

func apiScope(api string) string {
	if api == "" {
		return "any API"
	}
	return api
}

// nextFree says when capacity next comes back: a daily budget's reset, or
// when a sliding window's oldest entry leaves it.
func (g *globals) nextFree(u quota.Usage) string {
	switch {
	case u.Window.IsDaily():
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
