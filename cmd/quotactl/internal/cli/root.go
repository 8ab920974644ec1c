package cli

import "github.com/spf13/cobra"

const rootLong = `quotactl inspects and adjusts the client-side quota budgets that
quotactl's limiter keeps in a store: what is left, what was spent, when it frees
up. It needs no configuration: budget definitions and credential labels live in
the store next to the usage.

The store is --store URL, else $QUOTA_STORE, else an SQLite file in the user's
state directory ($XDG_STATE_HOME/quotactl/quota.db, or
~/.local/state/quotactl/quota.db). An empty --store, or a $QUOTA_STORE set
but empty, is an error, not the default store. URLs: sqlite:PATH,
sqlite:///ABS/PATH, memory:, redis://[USER:PASS@]HOST:PORT/DB, rediss://..., 
redis+sentinel://[:PASS@]HOST:PORT[,HOST:PORT]/MASTER[/DB],
redis+cluster://HOST:PORT[,HOST:PORT...]; ?prefix= sets the Redis key prefix.

Budget definitions: a program defines its budgets (quota.New); 'quotactl budget
set' overrides one for every process sharing the store, until 'quotactl budget
delete' removes the override. 'budget list' says which applies.

Commands that only look (status, list, history, jobs, costs, budget list,
credential list) open the store read-only: they never write or create it.
Of the commands that write, only 'budget set' and 'proxy' (whose cost table
defines the budgets) create a store: the others need what one records, so on an SQLite file that does not exist they fail
(exit 2) and create nothing.

Credentials are never flag values: --credential-env VAR reads the secret from an
environment variable, --credential-file F from the first line of a file, and
--label L alone names a credential the store already knows. --owner NAME
names the account a credential's budgets are kept under (a Google Cloud
project for YouTube): every credential of one owner shares its quota; with
none, a credential is its own owner, or the owner the store recorded for it
('quotactl credential rotate'). Labels are unique per API. If the services
sharing the store fingerprint credentials with a key of their own, put it in
$QUOTA_FINGERPRINT_KEY.

Exit codes:
  0  success
  1  error: the store is unreachable or unreadable (not a database), a
     reservation was not found or only partly refunded (a budget it charged
     is no longer defined), any other failure
  2  usage: unknown command or flag, bad or missing value (duration, zone,
     cost <= 0, missing credential), unknown API, budget or label, malformed
     or empty store URL, no store at the URL (a command that writes), reset
     without --yes
  3  a budget is spent: stderr names the budget and when it frees up
  4  the cost is larger than a budget's limit: it can never succeed

Every error is one line on stderr, prefixed "quotactl: ".

--json prints machine-readable output with stable field names, listed in each
command's help.`

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "quotactl",
		Short:         "Inspect and adjust client-side API quota budgets",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          groupArgs,
		RunE:          func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	root.PersistentFlags().StringVar(&g.storeURL, "store", "", "store URL (default $QUOTA_STORE, else sqlite: in the user's state directory)")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print JSON with stable field names (see each command's help)")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return err })
	root.CompletionOptions.HiddenDefaultCmd = false

	root.AddCommand(
		newCmdBudget(g),
		newCmdTake(g, nil),
		newCmdRefund(g, nil),
		newCmdStatus(g, nil),
		newCmdHistory(g, nil),
		newCmdExhaust(g, nil),
		newCmdAdjust(g, nil),
		newCmdReset(g, nil),
		newCmdList(g, nil),
		newCmdCredential(g),
		newCmdCosts(g),
		newCmdJobs(g, nil),
		newCmdServe(g, nil),
		newCmdProxy(g, nil),
		newCmdVersion(g),
	)
	root.SetIn(g.io.In)
	root.SetOut(g.io.Out)
	root.SetErr(g.io.ErrOut)
	// cobra adds "completion" when the command runs; add it now (after
	// SetOut, which it captures) so that an unknown shell is a usage error
	// like any unknown subcommand.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = groupArgs
			c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
		}
	}
	addCompletions(g, root)
	markRun(g, root)
	return root
}

// readOnlyCommands only read the store: they open it read-only (an SQLite
// file is neither written nor created: see storeurl.OpenReadOnly), so an
// operator who may only read the file can run them.
var readOnlyCommands = map[string]bool{
	"quotactl status":          true,
	"quotactl list":            true,
	"quotactl history":         true,
	"quotactl jobs":            true,
	"quotactl costs estimate":  true,
	"quotactl costs show":      true,
	"quotactl budget list":     true,
	"quotactl credential list": true,
	"quotactl serve":           true,
}

// createsStore are the commands that write and can succeed on a store that
// does not exist yet: they create it. Every other command that writes needs
// what a store records (a budget, a credential, a reservation), so on an
// SQLite file that does not exist it fails without creating it (see
// globals.noCreate).
var createsStore = map[string]bool{
	"quotactl budget set": true,
	"quotactl proxy":      true, // the cost table defines the budgets, as in a Go service
}

// markRun wraps every command's RunE so that its errors are told apart from
// cobra's own (see describe), so that read-only commands open the store
// read-only, and so that only the commands that can create a store do.
func markRun(g *globals, c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			g.readOnly = readOnlyCommands[cmd.CommandPath()]
			g.noCreate = !g.readOnly && !createsStore[cmd.CommandPath()]
			g.storeGiven = cmd.Flags().Changed("store")
			if err := run(cmd, args); err != nil {
				return &runError{err: err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markRun(g, sub)
	}
}

// group returns a command that only holds subcommands: run alone it prints
// its help; with an unknown subcommand it is a usage error.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  groupArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	c.AddCommand(subs...)
	return c
}

// groupArgs refuses arguments to a command that only holds subcommands.
func groupArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return unknownCommand(cmd, args[0])
	}
	return nil
}

func unknownCommand(cmd *cobra.Command, name string) error {
	msg := "unknown command \"" + name + "\" for \"" + cmd.CommandPath() + "\""
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += " (did you mean \"" + s[0] + "\"?)"
	}
	return usageErrorf("%s", msg)
}

// exactArgs is cobra.ExactArgs with a message naming what is missing.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("%s takes %s; got %d argument(s)", cmd.CommandPath(), names, len(args))
		}
		return nil
	}
}

// rangeArgs accepts between lo and hi arguments.
func rangeArgs(lo, hi int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usageErrorf("%s takes %s; got %d argument(s)", cmd.CommandPath(), names, len(args))
		}
		return nil
	}
}
