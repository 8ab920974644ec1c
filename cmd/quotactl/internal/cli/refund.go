package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/quota"
)

type refundOptions struct {
	*globals
	ID string
}

func newCmdRefund(g *globals, runF func(context.Context, *refundOptions) error) *cobra.Command {
	opts := &refundOptions{globals: g}
	return &cobra.Command{
		Use:   "refund RESERVATION-ID",
		Short: "Give a reservation's units back",
		Long: `Give back the units a 'quotactl take' (or any limiter's Take) charged, given the
reservation ID it printed: for a call that never reached the upstream. A
reservation already refunded, or whose entries have left their window, is not
found (exit 1).

A reservation that charged a budget the store no longer defines ('quotactl
budget delete') is refunded in the budgets still defined; the command then
exits 1 naming the budgets it could not refund, whose units stay recorded.
Define them again ('quotactl budget set') and refund the same ID again to give
those back.

JSON fields: id, api, refunded (true). When the refund is partial (exit 1):
id, api, refunded (false), partial (true), refunded_units ({budget: units}),
not_refunded (budget names).`,
		Example: `  id=$(quotactl take youtube --label yt-key-1 --cost 1) && call-upstream || quotactl refund "$id"`,
		Args:    exactArgs(1, "one RESERVATION-ID argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return refundRun(cmd.Context(), opts)
		},
	}
}

func refundRun(ctx context.Context, opts *refundOptions) error {
	res, err := quota.ParseReservationID(opts.ID)
	if err != nil {
		return usageErrorf("bad reservation ID %q: want API/ACCOUNT/TIME.NONCE, as 'quotactl take' prints", opts.ID)
	}
	l, _, err := opts.limiter(ctx, res.API)
	if err != nil {
		return err
	}
	if err := l.Refund(ctx, res); err != nil {
		var pe *quota.PartialRefundError
		if opts.json && errors.As(err, &pe) {
			units := pe.Refunded
			if units == nil {
				units = map[string]int64{}
			}
			_ = opts.printJSON(struct {
				ID            string           `json:"id"`
				API           string           `json:"api"`
				Refunded      bool             `json:"refunded"`
				Partial       bool             `json:"partial"`
				RefundedUnits map[string]int64 `json:"refunded_units"`
				NotRefunded   []string         `json:"not_refunded"`
			}{res.ID(), res.API, false, true, units, pe.NotRefunded})
		}
		return err // a partial refund is exit 1: stderr names what was not refunded
	}
	if opts.json {
		return opts.printJSON(struct {
			ID       string `json:"id"`
			API      string `json:"api"`
			Refunded bool   `json:"refunded"`
		}{res.ID(), res.API, true})
	}
	_, err = fmt.Fprintf(opts.io.Out, "refunded %s\n", res.ID())
	return err
}
