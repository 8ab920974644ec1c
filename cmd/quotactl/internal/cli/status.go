package cli

import (
	"context"
	"fmt"
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
that owner.

On a terminal the table is aligned under a header; piped, rows are
tab-separated without one.

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
	c.Flags().StringVar(&opts.Owner, "owner", "", "only this owner (its name, or a credential's fingerprint)")
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
	t := &table{header: []string{"API", "OWNER", "CREDENTIALS", "BUDGET", "USED", "LEFT", "USAGE", "NEXT FREE", "SPENT UNTIL"}}
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
			if opts.Owner == "" || c.Owner == opts.Owner {
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
				t.add(info.Name, ownerName(grp.Account), names(grp.Credentials), u.Budget, fmt.Sprintf("%d/%d", u.Used, u.Limit), fmt.Sprint(u.Remaining),
					fmt.Sprintf("%s %3d%%", bar(u.Used, u.Limit, 20), percent(u.Used, u.Limit)), opts.nextFree(u), opts.spentUntil(u))
			}
		}
		if len(info.Credentials) == 0 && opts.Label == "" && opts.Owner == "" {
			// Nothing charged yet: every budget is whole.
			for _, b := range info.Budgets {
				out = append(out, statusJSON{API: info.Name, Budget: b.Name, Window: b.Window.String(), Source: opts.source(info.Name, b.Name), Limit: b.Limit, Remaining: b.Limit})
				t.add(info.Name, "-", "-", b.Name, fmt.Sprintf("0/%d", b.Limit), fmt.Sprint(b.Limit), bar(0, b.Limit, 20)+"   0%", "-", "-")
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
		return opts.printJSON(out)
	}
	if len(infos) == 0 {
		fmt.Fprintln(opts.io.ErrOut, "no budgets defined; define one with 'quotactl budget set API/BUDGET --limit N --daily ZONE'")
		return nil
	}
	if err := t.print(opts.io.Out, opts.io.TTY); err != nil {
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
			_, err := fmt.Fprintf(opts.io.Out, "set with 'quotactl budget set' (over any program's definition): %s\n", strings.Join(set, ", "))
			return err
		}
	}
	return nil
}

func apiScope(api string) string {
	if api == "" {
		return "any API"
	}
	return api
}

func percent(used, limit int64) int64 {
	if limit <= 0 {
		return 0
	}
	return min(used*100/limit, 100)
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
