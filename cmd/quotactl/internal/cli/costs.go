package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/quota"
)

func newCmdCosts(g *globals) *cobra.Command {
	return group("costs", "Show cost tables and estimate what a planned run costs",
		newCmdCostsShow(g, nil), newCmdCostsEstimate(g, nil))
}

// loadTable returns the cost table for api: --table (a built-in name or a
// JSON/YAML file), else the built-in table named api.
func loadTable(api, tableFlag string) (name string, t *costs.Table, err error) {
	name = tableFlag
	if name == "" {
		name = api
	}
	if slices.Contains(costs.Builtins(), name) {
		t, err = costs.Builtin(name)
		return name, t, err
	}
	if tableFlag == "" {
		return "", nil, usageErrorf("no built-in cost table for %q (built in: %s); give --table FILE", api, strings.Join(costs.Builtins(), ", "))
	}
	t, err = costs.Load(tableFlag)
	if err != nil {
		var se *costs.SpecError
		if errors.As(err, &se) {
			return "", nil, &exitError{code: ExitUsage, err: err}
		}
		return "", nil, usageErrorf("--table %s: %v", tableFlag, err)
	}
	return tableFlag, t, nil
}

// costText is "search=1 units=100", or "free": each budget's amount in its
// unit (unit maps a budget to it), as unitsText says it.
func costText(m costs.Method, unit map[string]string) string {
	if m.Free {
		return "free"
	}
	return unitsText(m.Cost, unit)
}

// unitsText says what a charge takes from each budget, in the budget's
// unit (unit maps a budget to it; absent: the default unit), as amountText
// says amounts: "requests=1 spend=$0.40 tokens=1,234 tokens", and
// "search=1 units=100" in the default unit.
func unitsText(units map[string]int64, unit map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(units)) {
		parts = append(parts, k+"="+amountText(units[k], unit[k]))
	}
	return strings.Join(parts, " ")
}

type costsShowOptions struct {
	*globals
	API   string // empty: list the built-in tables
	Table string
}

func newCmdCostsShow(g *globals, runF func(context.Context, *costsShowOptions) error) *cobra.Command {
	opts := &costsShowOptions{globals: g}
	c := &cobra.Command{
		Use:   "show [API] [--table NAME|FILE]",
		Short: "Show a cost table: budgets and what each method costs",
		Long: `Show a cost table: the hosts it prices, the API's budgets and, per method,
what one call costs in each budget, in the budget's unit ("units=100",
"tokens=1,234 tokens", "spend=$0.40"), and the routes that call it. A request to
another host is not the API's; a table that names no hosts prices every host.
API names a built-in table
("youtube": Google's current YouTube Data API v3 rules; "youtube-legacy": the
older single-pool rules); --table names a built-in table or a JSON or YAML
file. Without either, list the built-in tables.

The budgets are kept per owner: the table's owner kind ("project": every
credential of one Google Cloud project shares them), or, when it names none,
per credential (KEPT PER). A method the upstream no longer supports is marked
deprecated: a Transport refuses it rather than spend units on it.

JSON: {table, api, source, hosts (absent: any host), owner (absent: each
credential is its own owner), budgets: [{name, limit, window}], methods:
[{name, routes, cost, free, note, deprecated}]}, each cost a number in the
budget's unit (micro-dollars for a spend budget); the list is an array of
{table, api, source, owner, budgets, methods (a count)}.`,
		Example: `  quotactl costs show youtube
  quotactl costs show --table youtube-legacy
  quotactl costs show --table ./mycosts.yaml --json`,
		Args: rangeArgs(0, 1, "at most one API argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.API = args[0]
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return costsShowRun(cmd.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Table, "table", "", "a built-in table name or a JSON/YAML cost table file")
	return c
}

func costsShowRun(ctx context.Context, opts *costsShowOptions) error {
	if opts.API == "" && opts.Table == "" {
		return costsListRun(opts)
	}
	name, tb, err := loadTable(opts.API, opts.Table)
	if err != nil {
		return err
	}
	if opts.API != "" && tb.API != opts.API {
		return usageErrorf("table %s is for API %q, not %q", name, tb.API, opts.API)
	}
	if opts.json {
		return opts.printJSON(struct {
			Table   string         `json:"table"`
			API     string         `json:"api"`
			Source  string         `json:"source,omitempty"`
			Hosts   []string       `json:"hosts,omitempty"`
			Owner   string         `json:"owner,omitempty"`
			Budgets []quota.Budget `json:"budgets"`
			Methods []costs.Method `json:"methods"`
		}{name, tb.API, tb.Source, tb.Hosts(), tb.Owner, tb.Budgets, tb.Methods()})
	}
	w := opts.io.Out
	if opts.io.TTY {
		tableHeader(w, name, tb)
	}
	per := cmp.Or(tb.Owner, "credential")
	bt := &table{header: []string{"BUDGET", "LIMIT", "WINDOW", "KEPT PER"}}
	for _, b := range tb.Budgets {
		bt.add(b.Name, amountText(b.Limit, b.Unit), b.Window.String(), per) // "10000", "30,000 tokens", "$500.00"
	}
	if err := bt.print(w, opts.io.TTY); err != nil {
		return err
	}
	if opts.io.TTY {
		fmt.Fprintln(w)
	}
	return methodTable(w, tb, opts.io.TTY)
}

// costsListRun is costs show with no table named: the built-in tables.
func costsListRun(opts *costsShowOptions) error {
	type entry struct {
		Table   string         `json:"table"`
		API     string         `json:"api"`
		Source  string         `json:"source,omitempty"`
		Owner   string         `json:"owner,omitempty"`
		Budgets []quota.Budget `json:"budgets"`
		Methods int            `json:"methods"`
	}
	var out []entry
	t := &table{header: []string{"TABLE", "API", "BUDGETS", "METHODS", "SOURCE"}}
	for _, name := range costs.Builtins() {
		tb, err := costs.Builtin(name)
		if err != nil {
			return err
		}
		out = append(out, entry{name, tb.API, tb.Source, tb.Owner, tb.Budgets, len(tb.Methods())})
		var bs []string
		for _, b := range tb.Budgets {
			bs = append(bs, fmt.Sprintf("%s=%d", b.Name, b.Limit))
		}
		t.add(name, tb.API, strings.Join(bs, " "), fmt.Sprint(len(tb.Methods())), tb.Source)
	}
	if opts.json {
		return opts.printJSON(out)
	}
	return t.print(opts.io.Out, opts.io.TTY)
}

// tableHeader writes what a terminal shows above a table's budgets: its
// name, source, hosts and owner kind.
func tableHeader(w io.Writer, name string, tb *costs.Table) {
	fmt.Fprintf(w, "Cost table %s for API %s\n", name, tb.API)
	if tb.Source != "" {
		fmt.Fprintf(w, "Source: %s\n", tb.Source)
	}
	if hosts := tb.Hosts(); len(hosts) > 0 {
		fmt.Fprintf(w, "Hosts: %s\n", strings.Join(hosts, ", "))
	} else {
		fmt.Fprintln(w, "Hosts: any (the table names none)")
	}
	if tb.Owner != "" {
		fmt.Fprintf(w, "Owner: %s (the budgets are kept per %s: every credential of one %s shares them)\n", tb.Owner, tb.Owner, tb.Owner)
	} else {
		fmt.Fprintln(w, "Owner: none (the table names no owner kind: each credential has budgets of its own)")
	}
	fmt.Fprintln(w)
}

// methodTable writes a table's methods with their costs and routes, and on
// a terminal the methods the upstream deprecated.
func methodTable(w io.Writer, tb *costs.Table, tty bool) error {
	unit := map[string]string{}
	for _, b := range tb.Budgets {
		unit[b.Name] = b.Unit
	}
	mt := &table{header: []string{"METHOD", "COST", "ROUTES"}}
	var deprecated []costs.Method
	for _, m := range tb.Methods() {
		cost := costText(m, unit)
		if m.Deprecated != "" {
			cost += " (deprecated)"
			deprecated = append(deprecated, m)
		}
		mt.add(m.Name, cost, strings.Join(m.Routes, ", "))
	}
	if def, ok := tb.Default(); ok {
		mt.add("(any other)", unitsText(def.Units, unit), "-")
	}
	if err := mt.print(w, tty); err != nil {
		return err
	}
	if tty && len(deprecated) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Deprecated upstream (a Transport refuses them; estimates still price them):")
		for _, m := range deprecated {
			fmt.Fprintf(w, "  %s: %s\n", m.Name, m.Deprecated)
		}
	}
	return nil
}

type costsEstimateOptions struct {
	*globals
	API    string
	Counts map[string]int64
	Order  []string // methods in the order given
	Table  string
	Cred   credFlags
	Body   string // --body FILE: price one request body instead of a run
	Method string // --method: the table method the body is sent to
	Prices string // --prices: a built-in price table name or a file
}

func newCmdCostsEstimate(g *globals, runF func(context.Context, *costsEstimateOptions) error) *cobra.Command {
	opts := &costsEstimateOptions{globals: g}
	c := &cobra.Command{
		Use:   "estimate API METHOD=COUNT... [--table NAME|FILE] [--label L]",
		Short: "Estimate what a planned run costs against what is left now",
		Long: `Price a planned run, COUNT calls of each METHOD, with the API's cost table, and
hold it against what is left now in each budget for a credential: the cost per
budget, what is left, what would be left after, and which budget runs out
first. The credential is --label L (or --credential-env / --credential-file);
without one, the API's only credential, or, when none has been used, whole
budgets.

Exit code 0 when the run fits in what is left; 3 when a budget cannot pay for
it now (stderr names the budget that runs out first and when it frees up); 4
when the run costs more than a budget's whole limit.

JSON: {api, table, credential, fingerprint, counts: {METHOD: COUNT}, fits,
runs_out_first, budgets: [{budget, cost, left, limit, after, fits, unit, reset}]};
runs_out_first is the budget that can pay for the smallest share of the run
(empty when nothing is charged).

With --body FILE, price one request body instead (an LLM request for the
openai or anthropic table, a GraphQL request for shopify-admin): what a
Transport takes before sending it, per budget (the prompt's bound, never
below what the provider counts, plus the output ceiling), and what it may
cost in micro-dollars at the model's price (--prices: a built-in price table,
openai or anthropic, or a file; default: the price table of the table's spend
budget, else the one named like the table's API). Each budget's units are
shown in its unit ("116 tokens"; a spend budget, which a table file declares
in its spend section, in dollars).
--method names the table's method when the body fits several; without it
the body's fields decide (messages: a chat, max_output_tokens or
instructions: a response, input: embeddings). A body whose tokens cannot be
bounded (an image, a server tool, no output ceiling) is refused, exit code 2.
JSON: {table, api, method, format, model, input_tokens, output_tokens, units:
{BUDGET: N}, micro_dollars, price_source}.`,
		Example: `  quotactl costs estimate youtube videos.list=800 search.list=40 --label yt-key-1
  quotactl costs estimate youtube captions.download=30 --table youtube-legacy --json
  quotactl costs estimate --table openai --body request.json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if opts.Body != "" {
				if len(args) > 1 {
					return usageErrorf("%s --body takes at most one API argument", cmd.CommandPath())
				}
				return nil
			}
			if len(args) < 2 {
				return usageErrorf("%s takes an API and at least one METHOD=COUNT", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Body != "" {
				if len(args) == 1 {
					opts.API = args[0]
				}
				if runF != nil {
					return runF(cmd.Context(), opts)
				}
				return costsEstimateBodyRun(opts)
			}
			opts.API = args[0]
			opts.Counts = map[string]int64{}
			for _, a := range args[1:] {
				m, n, ok := strings.Cut(a, "=")
				count, err := strconv.ParseInt(n, 10, 64)
				if !ok || m == "" || err != nil || count < 0 {
					return usageErrorf("%q: want METHOD=COUNT with a count >= 0, such as videos.list=500", a)
				}
				if _, dup := opts.Counts[m]; dup {
					return usageErrorf("method %s given twice", m)
				}
				opts.Counts[m] = count
				opts.Order = append(opts.Order, m)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return costsEstimateRun(cmd.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Table, "table", "", "a built-in table name or a JSON/YAML cost table file (default: the built-in table named API)")
	c.Flags().StringVar(&opts.Body, "body", "", "price one request body read from `FILE` (- for stdin) instead of a planned run")
	c.Flags().StringVar(&opts.Method, "method", "", "with --body: the table's method the body is sent to")
	c.Flags().StringVar(&opts.Prices, "prices", "", "with --body: a built-in price table (openai, anthropic) or a price file")
	opts.Cred.register(c, "the credential whose budgets to hold the run against")
	return c
}

// estimateBudgetJSON is one budget of an estimate: the view jobs --json
// shows a plan's expected cost in too.
type estimateBudgetJSON = view.BudgetCost

type estimateJSON struct {
	API          string               `json:"api"`
	Table        string               `json:"table"`
	Credential   string               `json:"credential"`
	Fingerprint  string               `json:"fingerprint"`
	Counts       map[string]int64     `json:"counts"`
	Fits         bool                 `json:"fits"`
	RunsOutFirst string               `json:"runs_out_first"`
	Budgets      []estimateBudgetJSON `json:"budgets"`
}

func costsEstimateRun(ctx context.Context, opts *costsEstimateOptions) error {
	name, tb, err := loadTable(opts.API, opts.Table)
	if err != nil {
		return err
	}
	if tb.API != opts.API {
		return usageErrorf("table %s is for API %q, not %q", name, tb.API, opts.API)
	}
	for _, m := range opts.Order {
		if _, err := tb.Charge(m); err != nil {
			if errors.Is(err, costs.ErrUnknownMethod) {
				return usageErrorf("table %s has no method %q (see 'quotactl costs show %s')", name, m, opts.API)
			}
			return err
		}
	}
	est, err := tb.Estimate(opts.Counts)
	if err != nil {
		return err
	}

	// What is left now: the store's definitions and usage when it has them.
	budgets, c, usage, err := opts.left(ctx, tb)
	if err != nil {
		return err
	}

	out := estimateJSON{API: opts.API, Table: name, Credential: c.Label, Fingerprint: c.Fingerprint, Counts: opts.Counts, Fits: true, Budgets: view.Costs(budgets, est, usage, opts.now())}
	first, never := -1, -1 // indexes in out.Budgets
	bestShare := 0.0
	for i, b := range out.Budgets {
		// The share of the run what is left pays for: the smallest runs
		// out first, and the run fits if and only if it is >= 1.
		if share := float64(b.Left) / float64(b.Cost); first < 0 || share < bestShare {
			first, bestShare = i, share
		}
		if !b.Fits {
			out.Fits = false
		}
		if b.Cost > b.Limit && never < 0 {
			never = i
		}
	}
	if first >= 0 {
		out.RunsOutFirst = out.Budgets[first].Budget
	}

	if opts.json {
		if err := opts.printJSON(out); err != nil {
			return err
		}
	} else if err := opts.printEstimate(out, c, bestShare); err != nil {
		return err
	}
	switch {
	case never >= 0:
		b := out.Budgets[never]
		return &exitError{code: ExitNeverFits, err: fmt.Errorf("%s/%s: the run costs %s but the limit is %s: it can never fit in one window", opts.API, b.Budget, amountText(b.Cost, b.Unit), amountText(b.Limit, b.Unit))}
	case !out.Fits:
		b := out.Budgets[first]
		msg := fmt.Sprintf("%s/%s cannot pay for the run: it costs %s, %s left", opts.API, b.Budget, amountText(b.Cost, b.Unit), amountText(b.Left, b.Unit))
		if b.Reset != nil {
			msg += "; capacity frees up " + opts.when(*b.Reset)
		}
		return &exitError{code: ExitExhausted, err: errors.New(msg)}
	}
	return nil
}

// left returns what a run is held against: the table's budgets with the
// store's definitions in force, the credential whose owner pays (the one
// named, else the API's only one) and that owner's usage per budget (none
// when no credential is known: whole budgets).
func (opts *costsEstimateOptions) left(ctx context.Context, tb *costs.Table) ([]quota.Budget, cred, map[string]quota.Usage, error) {
	if _, err := opts.apis(ctx); err != nil {
		return nil, cred{}, nil, err
	}
	var a view.API
	if i := slices.IndexFunc(opts.catalog, func(a view.API) bool { return a.Name == opts.API }); i >= 0 {
		a = opts.catalog[i]
	}
	budgets := a.InForce(tb.Budgets)
	usage := map[string]quota.Usage{}
	var c cred
	switch {
	case opts.Cred.given():
		var err error
		if c, err = opts.credential(ctx, opts.Cred, a.APIInfo); err != nil {
			return nil, cred{}, nil, err
		}
		if err := otherOwner(opts.Cred, c, a.APIInfo, "an estimate only reads: it moves no credential to another owner", "hold the run against"); err != nil {
			return nil, cred{}, nil, err
		}
	case len(a.Credentials) == 1:
		k := a.Credentials[0]
		c = cred{Credential: quota.Credential{Label: k.Label}, Fingerprint: k.ID, Account: k.Account()}
	case len(a.Credentials) > 1:
		return nil, cred{}, nil, usageErrorf("%s has %d credentials: say which with --label", opts.API, len(a.Credentials))
	}
	if c.Fingerprint == "" {
		return budgets, c, usage, nil
	}
	r, err := opts.reader(ctx)
	if err != nil {
		return nil, cred{}, nil, err
	}
	l, err := r.Limiter(view.API{APIInfo: quota.APIInfo{Name: opts.API, Budgets: budgets}})
	if err != nil {
		return nil, cred{}, nil, err
	}
	us, err := l.StatusOf(ctx, c.Account)
	if err != nil {
		return nil, cred{}, nil, err
	}
	for _, u := range us {
		usage[u.Budget] = u
	}
	return budgets, c, usage, nil
}

func (opts *costsEstimateOptions) printEstimate(out estimateJSON, c cred, share float64) error {
	w := opts.io.Out
	var plan []string
	for _, m := range opts.Order {
		plan = append(plan, fmt.Sprintf("%s=%d", m, opts.Counts[m]))
	}
	who := "no credential used yet: whole budgets"
	if c.Fingerprint != "" {
		who = "for " + c.name()
	}
	if opts.io.TTY {
		fmt.Fprintf(w, "Planned run on %s (cost table %s), %s: %s\n", out.API, out.Table, who, strings.Join(plan, " "))
	}
	t := &table{header: []string{"BUDGET", "COST", "LEFT", "LIMIT", "AFTER", "FITS"}}
	for _, b := range out.Budgets {
		fits := "yes"
		if !b.Fits {
			fits = "NO"
		}
		t.add(b.Budget, amountText(b.Cost, b.Unit), amountText(b.Left, b.Unit), amountText(b.Limit, b.Unit), amountText(b.After, b.Unit), fits)
	}
	if err := t.print(w, opts.io.TTY); err != nil {
		return err
	}
	if !opts.io.TTY {
		return nil
	}
	switch {
	case out.RunsOutFirst == "":
		fmt.Fprintln(w, "The run charges nothing.")
	case out.Fits:
		fmt.Fprintf(w, "Fits. Tightest budget: %s (what is left pays for %.1fx the run).\n", out.RunsOutFirst, share)
	default:
		fmt.Fprintf(w, "Does not fit: %s runs out first, after %.0f%% of the run.\n", out.RunsOutFirst, share*100)
	}
	return nil
}
