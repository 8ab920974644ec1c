package cli

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/jobs"
	"github.com/quotactl/quotactl/quota"
)

// addCompletions makes `quotactl completion bash|zsh|fish` complete the
// APIs, budgets, credential labels, owners and jobs the store knows (the store of
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
	walk(root, func(c *cobra.Command) {
		switch c.CommandPath() {
		case "quotactl status", "quotactl history", "quotactl take", "quotactl exhaust", "quotactl adjust",
			"quotactl reset", "quotactl costs estimate":
			c.ValidArgsFunction = apiArg
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
