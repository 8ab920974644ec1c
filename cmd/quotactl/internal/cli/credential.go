package cli

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/quota"
)

// credFlags are the ways to name a credential. The secret is never a flag
// value: it comes from the environment or a file.
type credFlags struct {
	Label string // --label
	Env   string // --credential-env VAR
	File  string // --credential-file F
}

func (c *credFlags) register(cmd *cobra.Command, labelHelp string) {
	cmd.Flags().StringVar(&c.Label, "label", "", labelHelp)
	cmd.Flags().StringVar(&c.Env, "credential-env", "", "read the credential's secret from environment variable `VAR`")
	cmd.Flags().StringVar(&c.File, "credential-file", "", "read the credential's secret from the first line of `FILE`")
}

func (c credFlags) given() bool { return c.Label != "" || c.Env != "" || c.File != "" }

// cred is a resolved credential: what to pass the limiter, and how to show
// it.
type cred struct {
	quota.Credential
	Fingerprint string
}

// name is the label, or the short fingerprint.
func (c cred) name() string {
	if c.Label != "" {
		return c.Label
	}
	return shortFP(c.Fingerprint)
}

func shortFP(fp string) string {
	if len(fp) > 8 {
		return fp[:8]
	}
	return fp
}

// credential resolves the credential flags against the store's credentials
// of info's API. A label alone must name a credential the store knows.
func (g *globals) credential(ctx context.Context, c credFlags, info quota.APIInfo) (cred, error) {
	secret, err := g.secret(c)
	if err != nil {
		return cred{}, err
	}
	if secret != "" {
		return cred{Credential: quota.Credential{Secret: secret, Label: c.Label}, Fingerprint: quota.Fingerprint(g.fingerprintKey(), secret)}, nil
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
		return cred{Credential: quota.Credential{Label: c.Label}, Fingerprint: found[0]}, nil
	case 0:
		known := "it knows none"
		if len(labels) > 0 {
			known = "known: " + strings.Join(labels, ", ")
		}
		return cred{}, usageErrorf("unknown label %q: the store knows no credential of %s by that label (%s); the first take with --credential-env or --credential-file and --label records it", c.Label, info.Name, known)
	}
	return cred{}, usageErrorf("label %q names %d credentials of %s: give the secret with --credential-env or --credential-file", c.Label, len(found), info.Name)
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

func credName(c quota.CredentialInfo) string {
	if c.Label != "" {
		return c.Label
	}
	return shortFP(c.ID)
}
