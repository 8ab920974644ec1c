package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/quota"
)

type takeOptions struct {
	*globals
	API    string
	Cred   credFlags
	Cost   int64
	Budget string
	Method string
}

func newCmdTake(g *globals, runF func(context.Context, *takeOptions) error) *cobra.Command {
	opts := &takeOptions{globals: g}
	c := &cobra.Command{
		Use:   "take API (--label L | --credential-env VAR | --credential-file F) --cost N [--budget B] [--method M]",
		Short: "Charge units to a credential's budgets and print the reservation ID",
		Long: `Charge --cost units to the API's budgets for one credential, atomically: every
budget charged pays, or none does. Without --budget, every budget of the API is
charged --cost units; with it, only that one. On success the reservation ID is
printed: 'quotactl refund ID' gives the units back.

The credential is --label L alone (one the store already knows by that label),
or its secret from --credential-env VAR or --credential-file F (first line),
with --label to record its label. A secret is never a flag value.

Exit code 3 when a budget cannot pay now (stderr names it and when it frees
up); 4 when the cost is larger than a budget's limit.

With --owner NAME the credential's budgets are kept under that owner, shared
with every credential of it (a Google Cloud project's keys). A label held by
another credential is refused (exit 2): rotate it with 'quotactl credential
rotate', or pick another label.

JSON fields: id, api, owner, credential (label), fingerprint, method, at, usage: an
array of {budget, cost, used, limit, remaining, reset}. When a budget is
spent (exit 3), stdout gets {exhausted: {api, budget, credential, used, limit,
cost, retry_at, retry_after_seconds, exhausted_until}}.`,
		Example: `  QUOTA_KEY=AIza... quotactl take youtube --credential-env QUOTA_KEY --label yt-key-1 --cost 1
  id=$(quotactl take youtube --label yt-key-1 --cost 100 --budget units --method search.list) || exit
  quotactl refund "$id"`,
		Args: exactArgs(1, "one API argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.API = args[0]
			if !cmd.Flags().Changed("cost") {
				return usageErrorf("missing --cost N")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return takeRun(cmd.Context(), opts)
		},
	}
	opts.Cred.register(c, "the credential's label: alone, a credential the store knows; with a secret, the label to record")
	c.Flags().Int64Var(&opts.Cost, "cost", 0, "units to charge each budget (> 0)")
	c.Flags().StringVar(&opts.Budget, "budget", "", "charge only this budget (default: every budget of the API)")
	c.Flags().StringVar(&opts.Method, "method", "", "the API method, for the record (e.g. videos.list)")
	return c
}

type usageJSON struct {
	Budget         string     `json:"budget"`
	Cost           int64      `json:"cost,omitempty"`
	Used           int64      `json:"used"`
	Limit          int64      `json:"limit"`
	Remaining      int64      `json:"remaining"`
	Reset          *time.Time `json:"reset,omitempty"`
	ExhaustedUntil *time.Time `json:"exhausted_until,omitempty"`
}

type reservationJSON struct {
	ID          string      `json:"id"`
	API         string      `json:"api"`
	Owner       string      `json:"owner"`
	Credential  string      `json:"credential"`
	Fingerprint string      `json:"fingerprint"`
	Method      string      `json:"method,omitempty"`
	At          time.Time   `json:"at"`
	Usage       []usageJSON `json:"usage"`
}

type exhaustedJSON struct {
	API               string     `json:"api"`
	Budget            string     `json:"budget"`
	Credential        string     `json:"credential"`
	Used              int64      `json:"used"`
	Limit             int64      `json:"limit"`
	Cost              int64      `json:"cost"`
	RetryAt           time.Time  `json:"retry_at"`
	RetryAfterSeconds float64    `json:"retry_after_seconds"`
	ExhaustedUntil    *time.Time `json:"exhausted_until,omitempty"`
}

func takeRun(ctx context.Context, opts *takeOptions) error {
	if opts.Cost <= 0 {
		return usageErrorf("--cost %d: must be > 0", opts.Cost)
	}
	l, info, err := opts.limiter(ctx, opts.API)
	if err != nil {
		return err
	}
	ch := quota.Charge{Method: opts.Method, Units: map[string]int64{}}
	if opts.Budget != "" {
		if _, err := budgetOf(info, opts.Budget); err != nil {
			return err
		}
		ch.Units[opts.Budget] = opts.Cost
	} else {
		for _, b := range info.Budgets {
			ch.Units[b.Name] = opts.Cost
		}
	}
	for _, b := range info.Budgets {
		if cost, ok := ch.Units[b.Name]; ok && cost > b.Limit {
			return &exitError{code: ExitNeverFits, err: fmt.Errorf("%s/%s: cost %d is more than the whole limit of %d: it can never succeed",
				info.Name, b.Name, cost, b.Limit)}
		}
	}
	c, err := opts.credential(ctx, opts.Cred, info)
	if err != nil {
		return err
	}
	res, err := l.Take(ctx, c.Credential, ch)
	if err != nil {
		var ex *quota.ExhaustedError
		if opts.json && errors.As(err, &ex) {
			_ = opts.printJSON(struct {
				Exhausted exhaustedJSON `json:"exhausted"`
			}{exhaustedJSON{
				API: ex.API, Budget: ex.Budget, Credential: ex.Credential, Used: ex.Used, Limit: ex.Limit, Cost: ex.Cost,
				RetryAt: ex.RetryAt.UTC(), RetryAfterSeconds: ex.RetryAfter.Seconds(), ExhaustedUntil: jsonTime(ex.ExhaustedUntil),
			}})
		}
		return err
	}
	if opts.json {
		out := reservationJSON{ID: res.ID(), API: res.API, Owner: res.Owner, Credential: res.Label, Fingerprint: res.Credential, Method: res.Method, At: res.At.UTC()}
		for _, u := range res.Usage {
			out.Usage = append(out.Usage, usageJSON{Budget: u.Budget, Cost: u.Cost, Used: u.Used, Limit: u.Limit, Remaining: u.Remaining, Reset: jsonTime(u.Reset)})
		}
		return opts.printJSON(out)
	}
	_, err = fmt.Fprintln(opts.io.Out, res.ID())
	return err
}
