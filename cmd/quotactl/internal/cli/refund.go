package cli

import (
	"context"
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

JSON fields: id, api, refunded (true).`,
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
		return err
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
