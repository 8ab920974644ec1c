package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// credFlags are the ways to name a credential. The secret is never a flag
// value: it comes from the environment or a file.
type credFlags struct {
	Label string // --label
	Env   string // --credential-env VAR
	File  string // --credential-file F
	Owner string // --owner NAME
}

func (c *credFlags) register(cmd *cobra.Command, labelHelp string) {
	cmd.Flags().StringVar(&c.Label, "label", "", labelHelp)
	cmd.Flags().StringVar(&c.Owner, "owner", "", "the owner `NAME` the credential's budgets are kept under (default: the owner the store recorded, else the credential itself)")
	cmd.Flags().StringVar(&c.Env, "credential-env", "", "read the credential's secret from environment variable `VAR`")
	cmd.Flags().StringVar(&c.File, "credential-file", "", "read the credential's secret from the first line of `FILE`")
}

func (c credFlags) given() bool { return c.Label != "" || c.Env != "" || c.File != "" }

// cred is a resolved credential: what to pass the limiter, and how to show
// it.
type cred struct {
	quota.Credential
	Fingerprint string
	// Account is the account the budgets are kept under, as far as the
	// store's catalog tells before the command runs: --owner, the recorded
	// owner, or the fingerprint.
	Account string
}

// name is the label, or the short fingerprint.
func (c cred) name() string {
	if c.Label != "" {
		return c.Label
	}
	return view.ShortFingerprint(c.Fingerprint)
}

// credential resolves the credential flags against the store's credentials
// of info's API. A label alone must name a credential the store knows.
func (g *globals) credential(ctx context.Context, c credFlags, info quota.APIInfo) (cred, error) {
	if err := checkLabel("--label", c.Label); err != nil {
		return cred{}, err
	}
	secret, err := g.secret(c)
	if err != nil {
		return cred{}, err
	}
	if c.Owner != "" {
		if err := backend.CheckName("owner", c.Owner); err != nil {
			return cred{}, usageErrorf("bad --owner %q: letters, digits, '.', '_' and '-' only", c.Owner)
		}
	}
	account := func(fp string) string {
		if c.Owner != "" {
			return c.Owner
		}
		for _, k := range info.Credentials {
			if k.ID == fp {
				return k.Owner
			}
		}
		return fp
	}
	if secret != "" {
		fp := g.fingerprint(secret)
		return cred{Credential: quota.Credential{Secret: secret, Label: c.Label, Owner: c.Owner}, Fingerprint: fp, Account: account(fp)}, nil
	}
	if c.Label == "" {
		return cred{}, usageErrorf("missing credential: give --label L (a credential the store knows), --credential-env VAR or --credential-file FILE")
	}
	var found []string
	var labels []string
	for _, k := range info.Credentials {
		if k.Label == c.Label {
			found = append(found, k.ID)
		}
		if k.Label != "" {
			labels = append(labels, k.Label)
		}
	}
	switch len(found) {
	case 1:
		return cred{Credential: quota.Credential{Label: c.Label, Owner: c.Owner}, Fingerprint: found[0], Account: account(found[0])}, nil
	case 0:
		known := "it knows none"
		if len(labels) > 0 {
			known = "known: " + strings.Join(labels, ", ")
		}
		return cred{}, usageErrorf("unknown label %q: the store knows no credential of %s by that label (%s); the first take with --credential-env or --credential-file and --label records it", c.Label, info.Name, known)
	}
	return cred{}, usageErrorf("label %q names %d credentials of %s (recorded before labels were unique): give the secret with --credential-env or --credential-file, or keep one label with 'quotactl credential relabel %s FINGERPRINT NEW-LABEL'", c.Label, len(found), info.Name, info.Name)
}

// secret reads the secret from --credential-env or --credential-file, or
// returns "" when neither is given.
func (g *globals) secret(c credFlags) (string, error) {
	switch {
	case c.Env != "" && c.File != "":
		return "", usageErrorf("give --credential-env or --credential-file, not both")
	case c.Env != "":
		v, ok := g.env(c.Env)
		if !ok {
			return "", usageErrorf("--credential-env %s: $%s is not set", c.Env, c.Env)
		}
		v = strings.TrimSpace(v)
		if v == "" {
			return "", usageErrorf("--credential-env %s: $%s is empty", c.Env, c.Env)
		}
		return v, nil
	case c.File != "":
		f, err := os.Open(c.File)
		if err != nil {
			return "", usageErrorf("--credential-file: %v", err)
		}
		defer f.Close()
		r := bufio.NewReader(f)
		line, err := r.ReadString('\n')
		if err != nil && err != io.EOF {
			return "", usageErrorf("--credential-file %s: %v", c.File, err)
		}
		line = strings.TrimSpace(line)
		if line == "" {
			return "", usageErrorf("--credential-file %s: the first line is empty", c.File)
		}
		return line, nil
	}
	return "", nil
}

// selectCredentials returns the credentials of info that label selects (all
// of them when label is empty).
func selectCredentials(info quota.APIInfo, label string) []quota.CredentialInfo {
	var out []quota.CredentialInfo
	for _, c := range info.Credentials {
		if label == "" || c.Label == label {
			out = append(out, c)
		}
	}
	return out
}

// ownerIs reports whether the --owner given names account: its name, or,
// for an account that is a credential's own fingerprint, the fingerprint
// or any prefix of it at least as long as the short form status prints.
func ownerIs(account, given string) bool {
	if account == given {
		return true
	}
	return view.IsFingerprint(account) && len(given) >= len(view.ShortFingerprint(account)) && strings.HasPrefix(account, given)
}

func newCmdCredential(g *globals) *cobra.Command {
	return group("credential", "List, rotate, relabel or forget the credentials the store knows",
		newCmdCredentialList(g, nil), newCmdCredentialRotate(g, nil), newCmdCredentialRelabel(g, nil), newCmdCredentialForget(g, nil))
}

type credentialListOptions struct {
	*globals
	API string // empty: every API
}

func newCmdCredentialList(g *globals, runF func(context.Context, *credentialListOptions) error) *cobra.Command {
	opts := &credentialListOptions{globals: g}
	return &cobra.Command{
		Use:   "list [API]",
		Short: "List credentials under their owners",
		Long: `List the credentials the store knows, per API, under the owner (the account
their budgets are kept under): label and fingerprint, never a secret. A
credential that is its own owner shows its short fingerprint as the owner.

JSON: an array of {api, owner, label, fingerprint}.`,
		Args: rangeArgs(0, 1, "at most one API argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.API = args[0]
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return credentialListRun(cmd.Context(), opts)
		},
	}
}

type credentialRowJSON struct {
	API         string `json:"api"`
	Owner       string `json:"owner"`
	Label       string `json:"label"`
	Fingerprint string `json:"fingerprint"`
}

func credentialListRun(ctx context.Context, opts *credentialListOptions) error {
	apis, err := opts.apis(ctx)
	if err != nil {
		return err
	}
	out := []credentialRowJSON{}
	t := &table{header: []string{"API", "OWNER", "CREDENTIAL", "FINGERPRINT"}}
	seen := false
	for _, a := range apis {
		if opts.API != "" && a.Name != opts.API {
			continue
		}
		seen = true
		for _, o := range view.Owners(a.Credentials) {
			for _, c := range o.Credentials {
				out = append(out, credentialRowJSON{a.Name, c.Owner, c.Label, c.ID})
				label := c.Label
				if label == "" {
					label = "(no label)"
				}
				t.add(a.Name, view.AccountName(c.Account()), label, c.ID)
			}
		}
	}
	if opts.API != "" && !seen {
		return usageErrorf("unknown API %q: the store knows no credential of it", opts.API)
	}
	if opts.json {
		return opts.printJSON(out)
	}
	if len(out) == 0 {
		fmt.Fprintln(opts.io.ErrOut, "no credentials yet; the first take records one")
		return nil
	}
	return t.print(opts.io.Out, opts.io.TTY)
}

type credentialRotateOptions struct {
	*globals
	API  string
	From string // label or fingerprint of the credential replaced
	Cred credFlags
}

func newCmdCredentialRotate(g *globals, runF func(context.Context, *credentialRotateOptions) error) *cobra.Command {
	opts := &credentialRotateOptions{globals: g}
	c := &cobra.Command{
		Use:   "rotate API LABEL (--credential-env VAR | --credential-file F) [--label NEW]",
		Short: "Replace a credential with a new secret that continues its usage",
		Long: `Replace the credential named LABEL (or its fingerprint) with a new secret of
the same owner, as after rotating an API key: the new secret takes the label
(or --label NEW) and the old credential's owner, so the budgets it spent stay
spent. The old fingerprint stays listed under the same owner, without a
label: a process still using the old key during a rollout meters the same
budgets. 'quotactl credential forget API FINGERPRINT' drops it afterwards.
The new secret must not be a credential the store already records (it meters
an account of its own, and moving it would stop counting that usage): that is
refused with exit 2. Rotating back onto the old key, listed without a label
under the same owner, is allowed.

JSON fields: api, label, fingerprint, owner, previous (the old fingerprint).`,
		Example: `  NEW_KEY=AIza... quotactl credential rotate youtube yt-key-1 --credential-env NEW_KEY`,
		Args:    exactArgs(2, "API and LABEL arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.API, opts.From = args[0], args[1]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return credentialRotateRun(cmd.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Cred.Label, "label", "", "the label of the new secret (default: the old credential's)")
	c.Flags().StringVar(&opts.Cred.Env, "credential-env", "", "read the new secret from environment variable `VAR`")
	c.Flags().StringVar(&opts.Cred.File, "credential-file", "", "read the new secret from the first line of `FILE`")
	return c
}

func credentialRotateRun(ctx context.Context, opts *credentialRotateOptions) error {
	l, info, err := opts.limiter(ctx, opts.API)
	if err != nil {
		return err
	}
	secret, err := opts.secret(opts.Cred)
	if err != nil {
		return err
	}
	if secret == "" {
		return usageErrorf("missing new secret: give --credential-env VAR or --credential-file FILE")
	}
	var prev quota.CredentialInfo
	for _, c := range info.Credentials {
		if c.Label == opts.From || c.ID == opts.From {
			prev = c
		}
	}
	got, err := l.Rotate(ctx, opts.From, quota.Credential{Secret: secret, Label: opts.Cred.Label})
	if err != nil {
		return err
	}
	if opts.json {
		return opts.printJSON(struct {
			API         string `json:"api"`
			Label       string `json:"label"`
			Fingerprint string `json:"fingerprint"`
			Owner       string `json:"owner"`
			Previous    string `json:"previous"`
		}{info.Name, got.Label, got.ID, got.Owner, prev.ID})
	}
	_, err = fmt.Fprintf(opts.io.Out, "%s: %s is now %s, owner %s, usage kept; the old key %s stays under the same owner without a label\n",
		info.Name, view.CredentialName(got), view.ShortFingerprint(got.ID), view.AccountName(got.Account()), view.ShortFingerprint(prev.ID))
	return err
}

type credentialRelabelOptions struct {
	*globals
	API, From, To string
}

func newCmdCredentialRelabel(g *globals, runF func(context.Context, *credentialRelabelOptions) error) *cobra.Command {
	opts := &credentialRelabelOptions{globals: g}
	return &cobra.Command{
		Use:   "relabel API LABEL|FINGERPRINT NEW-LABEL",
		Short: "Change a credential's label",
		Long: `Give the credential named by its label (or its fingerprint) a new label. Labels
are unique per API: a label another credential holds is refused (exit 2).

JSON fields: api, label, fingerprint, owner.`,
		Example: `  quotactl credential relabel youtube yt-key-1 yt-key-old`,
		Args:    exactArgs(3, "API, LABEL|FINGERPRINT and NEW-LABEL arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.API, opts.From, opts.To = args[0], args[1], args[2]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return credentialRelabelRun(cmd.Context(), opts)
		},
	}
}

func credentialRelabelRun(ctx context.Context, opts *credentialRelabelOptions) error {
	if strings.TrimSpace(opts.To) == "" {
		return usageErrorf("empty NEW-LABEL")
	}
	if err := checkLabel("NEW-LABEL", opts.To); err != nil {
		return err
	}
	l, info, err := opts.limiter(ctx, opts.API)
	if err != nil {
		return err
	}
	got, err := l.Relabel(ctx, opts.From, opts.To)
	if err != nil {
		return err
	}
	if opts.json {
		return opts.printJSON(credentialRowJSON{info.Name, got.Owner, got.Label, got.ID})
	}
	_, err = fmt.Fprintf(opts.io.Out, "%s: %s (%s) is now labelled %s\n", info.Name, opts.From, view.ShortFingerprint(got.ID), got.Label)
	return err
}

type credentialForgetOptions struct {
	*globals
	API, From string
}

func newCmdCredentialForget(g *globals, runF func(context.Context, *credentialForgetOptions) error) *cobra.Command {
	opts := &credentialForgetOptions{globals: g}
	return &cobra.Command{
		Use:   "forget API LABEL|FINGERPRINT",
		Short: "Remove a credential from the store's list; its owner keeps its usage",
		Long: `Remove the credential named by its label (or its fingerprint) from the store's
list of credentials, for a key that was revoked. Its owner's recorded usage
stays: other credentials of the owner still see it. A later take with the
same secret records it again.

JSON fields: api, label, fingerprint, owner.`,
		Example: `  quotactl credential forget youtube 3db441d676bd011c80be8520`,
		Args:    exactArgs(2, "API and LABEL|FINGERPRINT arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.API, opts.From = args[0], args[1]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return credentialForgetRun(cmd.Context(), opts)
		},
	}
}

func credentialForgetRun(ctx context.Context, opts *credentialForgetOptions) error {
	l, info, err := opts.limiter(ctx, opts.API)
	if err != nil {
		return err
	}
	got, err := l.Forget(ctx, opts.From)
	if err != nil {
		return err
	}
	if opts.json {
		return opts.printJSON(credentialRowJSON{info.Name, got.Owner, got.Label, got.ID})
	}
	what := view.ShortFingerprint(got.ID)
	if got.Label != "" {
		what = got.Label + " (" + what + ")"
	}
	_, err = fmt.Fprintf(opts.io.Out, "%s: forgot %s; owner %s keeps its usage\n", info.Name, what, view.AccountName(got.Account()))
	return err
}
