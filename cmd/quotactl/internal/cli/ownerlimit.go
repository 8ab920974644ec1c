package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// ownerLimitSetRun is 'budget set API/BUDGET --owner NAME --limit N'.
func ownerLimitSetRun(ctx context.Context, opts *budgetSetOptions) error {
	if opts.Window != "" || opts.Daily != "" || opts.Monthly != "" {
		return usageErrorf("--owner sets an owner's limit: the budget keeps its window (drop --window, --daily and --monthly)")
	}
	if err := backend.CheckName("owner", opts.Owner); err != nil {
		return usageErrorf("--owner %q: owner names are letters, digits, '.', '_' and '-', starting with a letter or digit (at most 64)", opts.Owner)
	}
	if opts.Limit > quota.MaxLimit {
		return usageErrorf("--limit %d: at most %d", opts.Limit, int64(quota.MaxLimit))
	}
	st, err := opts.Store(ctx)
	if err != nil {
		return err
	}
	if err := quota.SetOwnerLimit(ctx, st, opts.API, opts.Owner, opts.Budget, opts.Limit, opts.now()); err != nil {
		if errors.Is(err, quota.ErrNotFound) {
			return usageErrorf("no budget %s/%s in the store: define it first ('quotactl budget set %s/%s --limit N --daily ZONE', or run the program that defines it)",
				opts.API, opts.Budget, opts.API, opts.Budget)
		}
		return err
	}
	if opts.json {
		return opts.printJSON(budgetJSON{API: opts.API, Budget: opts.Budget, Owner: opts.Owner, Limit: opts.Limit, LimitSource: quota.SourceOperator})
	}
	_, err = fmt.Fprintf(opts.io.Out, "%s/%s: %d units for owner %s (operator)\n", opts.API, opts.Budget, opts.Limit, opts.Owner)
	return err
}

// ownerLimitDeleteRun is 'budget delete API/BUDGET --owner NAME'.
func ownerLimitDeleteRun(ctx context.Context, opts *budgetDeleteOptions) error {
	if err := backend.CheckName("owner", opts.Owner); err != nil {
		return usageErrorf("--owner %q: owner names are letters, digits, '.', '_' and '-', starting with a letter or digit (at most 64)", opts.Owner)
	}
	st, err := opts.Store(ctx)
	if err != nil {
		return err
	}
	removed, err := quota.RemoveOwnerLimit(ctx, st, opts.API, opts.Owner, opts.Budget)
	if err != nil {
		return err
	}
	if !removed {
		return usageErrorf("owner %s has no limit of its own for %s/%s", opts.Owner, opts.API, opts.Budget)
	}
	if opts.json {
		return opts.printJSON(struct {
			API     string `json:"api"`
			Budget  string `json:"budget"`
			Owner   string `json:"owner"`
			Deleted bool   `json:"deleted"`
		}{opts.API, opts.Budget, opts.Owner, true})
	}
	_, err = fmt.Fprintf(opts.io.Out, "deleted the limits of owner %s for %s/%s: the budget's limit applies to it\n", opts.Owner, opts.API, opts.Budget)
	return err
}

// ownerLimits returns, per API of the catalog (g.apis first), the limit in
// force of every owner's budget that has a limit of its own recorded in
// the store, sorted by budget and owner.
func (g *globals) ownerLimits(ctx context.Context) (map[string][]quota.LimitInForce, error) {
	r, err := g.reader(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]quota.LimitInForce{}
	for _, a := range g.catalog {
		if len(a.Budgets) == 0 {
			continue
		}
		recs, err := quota.OwnerLimits(ctx, r.Store(), a.Name)
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			continue
		}
		l, err := r.Limiter(a)
		if err != nil {
			return nil, err
		}
		seen := map[[2]string]bool{}
		for _, rec := range recs {
			k := [2]string{rec.Owner, rec.Budget}
			if _, ok := a.Budget(rec.Budget); !ok || seen[k] {
				continue // a budget deleted since: nothing applies
			}
			seen[k] = true
			lf, err := l.LimitOf(ctx, rec.Owner, rec.Budget)
			if err != nil {
				return nil, err
			}
			out[a.Name] = append(out[a.Name], lf)
		}
		slices.SortFunc(out[a.Name], func(x, y quota.LimitInForce) int {
			return cmp.Or(cmp.Compare(x.Budget, y.Budget), cmp.Compare(x.Owner, y.Owner))
		})
	}
	return out, nil
}

// limitFrom says where a limit comes from, and a learned limit that is
// not applied.
func limitFrom(src quota.Source, learned int64) string {
	if learned > 0 && src != quota.SourceUpstream {
		return fmt.Sprintf("%s (upstream says %d, not applied)", src, learned)
	}
	return string(src)
}

// budgetTable is budget list's table: with an OWNER column when some
// owner has a limit of its own.
func budgetTable(rows []budgetJSON, perOwner bool) *table {
	if !perOwner {
		t := &table{header: []string{"BUDGET", "LIMIT", "WINDOW", "DEFINED BY"}}
		for _, r := range rows {
			t.add(r.API+"/"+r.Budget, fmt.Sprint(r.Limit), r.Window, string(r.Source))
		}
		return t
	}
	t := &table{header: []string{"BUDGET", "OWNER", "LIMIT", "WINDOW", "DEFINED BY"}}
	for _, r := range rows {
		if r.Owner == "" {
			t.add(r.API+"/"+r.Budget, "-", fmt.Sprint(r.Limit), r.Window, string(r.Source))
			continue
		}
		t.add(r.API+"/"+r.Budget, r.Owner, fmt.Sprint(r.Limit), "-", limitFrom(r.LimitSource, r.LearnedLimit))
	}
	return t
}

// ownLimitsNote is what status says, on a terminal, of the owners with a
// limit of their own among rows: "limits of their own: youtube/units:
// audited 1000000 (operator), ...".
func ownLimitsNote(rows []view.Status) string {
	var parts []string
	for _, st := range rows {
		if st.Owner == "" || !st.OwnLimit && st.LearnedLimit == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s/%s %s %d (%s)", st.API, st.Budget, view.AccountName(st.Owner), st.Limit, limitFrom(st.LimitSource, st.LearnedLimit)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "limits per owner: " + strings.Join(parts, ", ")
}

// driftNote is what status says, on a terminal, of the budgets whose
// upstream reported spending the meter had not seen (true-ups) in their
// current window: "drift (spent upstream by unmetered clients, learned
// from reports): github/core octocat 2,000, ...".
func driftNote(rows []view.Status) string {
	var parts []string
	for _, st := range rows {
		if st.Drift == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s/%s %s %d", st.API, st.Budget, view.AccountName(st.Owner), st.Drift))
	}
	if len(parts) == 0 {
		return ""
	}
	return "drift (units the upstream reported spent this window that no metered call charged): " + strings.Join(parts, ", ")
}
