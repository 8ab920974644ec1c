package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/internal/view"
)

type listOptions struct {
	*globals
}

func newCmdList(g *globals, runF func(context.Context, *listOptions) error) *cobra.Command {
	opts := &listOptions{globals: g}
	return &cobra.Command{
		Use:   "list",
		Short: "List the APIs, budgets and credentials the store knows",
		Long: `List every API the store knows, with its budgets and the credentials used with
it, under their owner (label and fingerprint; never a secret). A credential
that is its own owner shows its short fingerprint as the owner.

JSON: an array of {api, budgets: [{name, limit, window, unit}], credentials:
[{label, fingerprint, owner}]}.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
}

type listJSON struct {
	API         string           `json:"api"`
	Budgets     []budgetDefJSON  `json:"budgets"`
	Credentials []credentialJSON `json:"credentials"`
}

type budgetDefJSON struct {
	Name   string `json:"name"`
	Limit  int64  `json:"limit"`
	Window string `json:"window"`
	Unit   string `json:"unit"`
}

type credentialJSON struct {
	Label       string `json:"label"`
	Fingerprint string `json:"fingerprint"`
	Owner       string `json:"owner,omitempty"`
}

func listRun(ctx context.Context, opts *listOptions) error {
	apis, err := opts.apis(ctx)
	if err != nil {
		return err
	}
	out := []listJSON{}
	t := &table{header: []string{"API", "KIND", "NAME", "DETAIL"}}
	for _, a := range apis {
		l := listJSON{API: a.Name, Budgets: []budgetDefJSON{}, Credentials: []credentialJSON{}}
		for _, b := range a.Budgets {
			l.Budgets = append(l.Budgets, budgetDefJSON{b.Name, b.Limit, b.Window.String(), b.UnitOf()})
			t.add(a.Name, "budget", b.Name, limitText(b)+" per "+windowText(b.Window))
		}
		for _, o := range view.Owners(a.Credentials) {
			for _, c := range o.Credentials {
				l.Credentials = append(l.Credentials, credentialJSON{c.Label, c.ID, c.Owner})
				name := c.Label
				if name == "" {
					name = "(no label)"
				}
				t.add(a.Name, "credential", name, "fingerprint "+c.ID+", owner "+view.AccountName(c.Account()))
			}
		}
		out = append(out, l)
	}
	if opts.json {
		return opts.printJSON(out)
	}
	if len(out) == 0 {
		fmt.Fprintln(opts.io.ErrOut, "the store is empty; define a budget with 'quotactl budget set API/BUDGET --limit N --daily ZONE'")
		return nil
	}
	return t.print(opts.io.Out, opts.io.TTY)
}

// Version is quotactl's version, set at build time with
// -ldflags "-X github.com/quotactl/quotactl/cmd/quotactl/internal/cli.Version=v1.2.3".
// When empty, the module version from the build info is shown.
var Version = ""

func newCmdVersion(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print quotactl's version",
		Long: `Print quotactl's version, the Go version it was built with and the platform.

JSON fields: version, commit (when known), go, os, arch.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := struct {
				Version string `json:"version"`
				Commit  string `json:"commit,omitempty"`
				Go      string `json:"go"`
				OS      string `json:"os"`
				Arch    string `json:"arch"`
			}{Version: Version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
			if bi, ok := debug.ReadBuildInfo(); ok {
				if v.Version == "" {
					v.Version = bi.Main.Version
				}
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						v.Commit = s.Value
					}
				}
			}
			if v.Version == "" {
				v.Version = "(devel)"
			}
			if g.json {
				return g.printJSON(v)
			}
			s := "quotactl " + v.Version
			if v.Commit != "" {
				s += " (" + v.Commit[:min(8, len(v.Commit))] + ")"
			}
			_, err := fmt.Fprintf(g.io.Out, "%s %s %s/%s\n", s, v.Go, v.OS, v.Arch)
			return err
		},
	}
}
