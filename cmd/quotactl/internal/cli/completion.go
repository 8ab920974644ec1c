package cli

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// addCompletions makes `quotactl completion bash|zsh|fish` complete the
// APIs, budgets, credentials (labels, or fingerprints where there is no
// label), owners, jobs and reservation IDs the store knows (the store of
// --store or $QUOTA_STORE on the command line being completed). They are
// attached here, by command name, so each command's file stays a plain flag
// parser.
func addCompletions(g *globals, root *cobra.Command) {
	apiArg := func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return g.completeAPIs(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
	}
	labels := func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		return g.completeLabels(cmd.Context(), firstArg(args)), cobra.ShellCompDirectiveNoFileComp
	}
	budgets := func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		return g.completeBudgets(cmd.Context(), firstArg(args)), cobra.ShellCompDirectiveNoFileComp
	}
	budgetPath := func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return g.completeBudgetPaths(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
	}
	owners := func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		return g.completeOwners(cmd.Context(), firstArg(args)), cobra.ShellCompDirectiveNoFileComp
	}
	jobNames := func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return g.completeJobs(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
	}
	// API, then a credential of it (its label, or the fingerprint of one
	// without), then nothing: credential rotate, relabel and forget.
	apiThenCredential := func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			return g.completeAPIs(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
		case 1:
			return g.completeCredentials(cmd.Context(), args[0]), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	reservation := func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return g.completeReservations(cmd.Context(), toComplete)
	}
	walk(root, func(c *cobra.Command) {
		switch c.CommandPath() {
		case "quotactl status", "quotactl history", "quotactl take", "quotactl exhaust", "quotactl adjust",
			"quotactl reset", "quotactl costs estimate", "quotactl credential list":
			c.ValidArgsFunction = apiArg
		case "quotactl credential rotate", "quotactl credential relabel", "quotactl credential forget":
			c.ValidArgsFunction = apiThenCredential
		case "quotactl refund":
			c.ValidArgsFunction = reservation
		case "quotactl budget set", "quotactl budget delete":
			c.ValidArgsFunction = budgetPath
		case "quotactl jobs":
			c.ValidArgsFunction = jobNames
		}
		if c.Flags().Lookup("label") != nil {
			_ = c.RegisterFlagCompletionFunc("label", labels)
		}
		if f := c.Flags().Lookup("budget"); f != nil {
			_ = c.RegisterFlagCompletionFunc("budget", budgets)
		}
		if c.Flags().Lookup("owner") != nil {
			_ = c.RegisterFlagCompletionFunc("owner", owners)
		}
	})
}

func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walk(sub, f)
	}
}

func firstArg(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return ""
}

// completionAPIs lists the store's APIs for completion; nothing when it
// cannot be read (a completion never prints an error).
func (g *globals) completionAPIs(ctx context.Context) []quota.APIInfo {
	if ctx == nil {
		ctx = context.Background()
	}
	g.readOnly = true // completing only reads the store
	apis, err := g.apis(ctx)
	if err != nil {
		return nil
	}
	return apis
}

func (g *globals) completeAPIs(ctx context.Context) []string {
	var out []string
	for _, a := range g.completionAPIs(ctx) {
		if len(a.Budgets) > 0 {
			out = append(out, a.Name)
		}
	}
	return out
}

// completeLabels lists the credential labels of api (every API's when
// empty).
func (g *globals) completeLabels(ctx context.Context, api string) []string {
	var out []string
	for _, a := range g.completionAPIs(ctx) {
		if api != "" && a.Name != api {
			continue
		}
		for _, c := range a.Credentials {
			if c.Label != "" && !strings.ContainsAny(c.Label, " \t\n") {
				out = append(out, c.Label)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// completeCredentials lists what names a credential of api where a command
// takes LABEL|FINGERPRINT: its label, or, for a credential without one (an
// old key left by a rotation), its fingerprint, described.
func (g *globals) completeCredentials(ctx context.Context, api string) []string {
	var out []string
	for _, a := range g.completionAPIs(ctx) {
		if a.Name != api {
			continue
		}
		for _, c := range a.Credentials {
			switch {
			case c.Label == "":
				out = append(out, c.ID+"\tno label, owner "+view.AccountName(c.Account()))
			case !strings.ContainsAny(c.Label, " \t\n"):
				out = append(out, c.Label)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// maxReservations bounds the reservation IDs one completion offers: the
// newest first.
const maxReservations = 100

// completeReservations completes a reservation ID (API/ACCOUNT/TIME.NONCE)
// a part at a time, as a path: the APIs, then API/ACCOUNT/ for the
// accounts of the API's credentials, then the IDs of the charges still
// counted in the account's budgets, newest first.
func (g *globals) completeReservations(ctx context.Context, prefix string) ([]string, cobra.ShellCompDirective) {
	const partial = cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	if ctx == nil {
		ctx = context.Background()
	}
	apis := g.completionAPIs(ctx)
	parts := strings.Split(prefix, "/")
	var out []string
	switch len(parts) {
	case 1:
		for _, a := range apis {
			if len(a.Budgets) > 0 && strings.HasPrefix(a.Name+"/", prefix) {
				out = append(out, a.Name+"/")
			}
		}
		return out, partial
	case 2:
		for _, a := range apis {
			if a.Name != parts[0] {
				continue
			}
			for _, c := range a.Credentials {
				if id := a.Name + "/" + c.Account() + "/"; strings.HasPrefix(id, prefix) {
					out = append(out, id)
				}
			}
		}
		slices.Sort(out)
		return slices.Compact(out), partial
	case 3:
	default:
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	r, err := g.reader(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	type charge struct {
		id string
		at time.Time
	}
	var charges []charge
	seen := map[string]bool{}
	for _, a := range apis {
		if a.Name != parts[0] {
			continue
		}
		for _, b := range a.Budgets {
			entries, err := r.Store().Entries(ctx, &backend.EntriesRequest{API: a.Name, Owner: parts[1], Budget: b, Now: r.StoreNow()})
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, e := range entries {
				// A charge of several budgets is one reservation.
				id := reservationID(a.Name, parts[1], e.At, e.Nonce)
				if e.Nonce != "" && !seen[id] && strings.HasPrefix(id, prefix) {
					seen[id] = true
					charges = append(charges, charge{id, e.At})
				}
			}
		}
	}
	slices.SortFunc(charges, func(x, y charge) int { return y.at.Compare(x.at) })
	for _, c := range charges[:min(len(charges), maxReservations)] {
		out = append(out, c.id)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// reservationID is the ID of the reservation that recorded an entry, as
// quota.Reservation.ID makes it: API/ACCOUNT/TIME.NONCE, TIME being the
// entry's time in microseconds in base 32.
func reservationID(api, account string, at time.Time, nonce string) string {
	return api + "/" + account + "/" + strconv.FormatInt(at.UnixMicro(), 32) + "." + nonce
}

// completeOwners lists the owner names of api's credentials (every API's
// when empty); a credential that is its own owner has no name to complete.
func (g *globals) completeOwners(ctx context.Context, api string) []string {
	var out []string
	for _, a := range g.completionAPIs(ctx) {
		if api != "" && a.Name != api {
			continue
		}
		for _, c := range a.Credentials {
			if c.Owner != "" && c.Owner != c.ID {
				out = append(out, c.Owner)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// completeBudgets lists the budgets of api (every API's when empty).
func (g *globals) completeBudgets(ctx context.Context, api string) []string {
	var out []string
	for _, a := range g.completionAPIs(ctx) {
		if api != "" && a.Name != api {
			continue
		}
		for _, b := range a.Budgets {
			out = append(out, b.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// completeBudgetPaths lists API/BUDGET of every budget.
func (g *globals) completeBudgetPaths(ctx context.Context) []string {
	var out []string
	for _, a := range g.completionAPIs(ctx) {
		for _, b := range a.Budgets {
			out = append(out, a.Name+"/"+b.Name)
		}
	}
	return out
}

// completeJobs lists the jobs with a run history in the store.
func (g *globals) completeJobs(ctx context.Context) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	g.readOnly = true // completing only reads the store
	ss, err := g.stateStore(ctx)
	if err != nil {
		return nil
	}
	names, err := jobs.Names(ctx, ss)
	if err != nil {
		return nil
	}
	return names
}
