// Package cli is the quotactl command line: one cobra command per verb,
// each a thin flag parser over a run function that takes an options struct
// (with the IO and the store) and does the work, so tests call the run
// functions directly with fake IO and a real store.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quotactl/quotactl/internal/view"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/storeurl"
)

// Exit codes. They are documented in the root command's help and in the
// quotactl package doc; scripts rely on them.
const (
	ExitOK        = 0 // success
	ExitError     = 1 // any other failure: store unreachable or unreadable, not found, ...
	ExitUsage     = 2 // the command line is wrong: unknown command or flag, bad value, unknown API, budget or label
	ExitExhausted = 3 // a budget is spent: stderr names it and when it frees up
	ExitNeverFits = 4 // the cost is larger than a budget's limit: it can never succeed
)

// IO is what a command reads and writes: streams, the environment and the
// clock. Tests fill it with buffers, a map and a fake clock.
type IO struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// LookupEnv reads an environment variable (os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// Clock, when set, is the time for everything: limiters get it through
	// quota.WithClock. When nil, decisions use the store's clock (Redis
	// TIME, the host clock) and displays use time.Now.
	Clock func() time.Time
	// TTY is true when Out is a terminal: tables are aligned, with a
	// header. Otherwise rows are tab-separated, without one.
	TTY bool
	// Location is the zone times are shown in; nil means time.Local.
	Location *time.Location
	// Width is the terminal's width in columns, when Out is one and it is
	// known; $COLUMNS overrides it; 0 and unknown mean 80.
	Width int
}

// Main runs quotactl with args (without the program name) and returns the
// exit code. Every error is one line on io.ErrOut, prefixed "quotactl: ".
//
// Text written to io.Out and io.ErrOut has control characters escaped (see
// escapingWriter): data from the store never drives the terminal.
func Main(ctx context.Context, args []string, io *IO) int {
	safe := *io
	safe.Out, safe.ErrOut = escapingWriter{io.Out}, escapingWriter{io.ErrOut}
	g := &globals{io: &safe}
	return g.main(ctx, args)
}

// globals is the state every command shares: IO, global flags and the
// store, opened on first use.
type globals struct {
	io       *IO
	storeURL string // --store; empty when not given
	// storeGiven is set when --store was given, even empty (an error).
	storeGiven bool
	json       bool

	// readOnly is set while a command that only reads runs: the store is
	// opened with storeurl.OpenReadOnly.
	readOnly bool
	// mustExist makes a read-only open of a store that does not exist an
	// error, instead of the empty store it would be: for serve, which would
	// otherwise watch an empty store forever.
	mustExist bool
	// noCreate is set while a command that writes, but can only succeed
	// on a store that already records something (every one but budget
	// set), runs: an SQLite file that does not exist is an error, and
	// nothing is created (not the file, nor the default store's
	// directory).
	noCreate bool

	store    quota.Store
	ownStore bool
	// catalog is what the store knows, with the definitions in force and
	// where each comes from (filled by apis).
	catalog []view.API
	// open opens a store URL; storeurl.Open unless a test says otherwise.
	open func(ctx context.Context, rawURL string) (quota.Store, error)
}

func (g *globals) main(ctx context.Context, args []string) int {
	root := newRoot(g)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if g.ownStore && g.store != nil {
		if cerr := g.store.Close(); cerr != nil && err == nil {
			err = cerr
		}
		g.store = nil
	}
	if err == nil {
		return ExitOK
	}
	code, msg := g.describe(cmd, err)
	fmt.Fprintln(g.io.ErrOut, "quotactl: "+msg)
	return code
}

// exitError is an error with its exit code decided where it was made.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf returns an error that exits with ExitUsage.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// runError marks an error returned by a command's run function, as opposed
// to one cobra made while reading the command line (always ExitUsage).
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// describe returns the exit code for err and its one-line message.
func (g *globals) describe(cmd *cobra.Command, err error) (int, string) {
	oneLine := strings.NewReplacer("\r\n", " ", "\n", " ", "\t", " ")
	var run *runError
	if !errors.As(err, &run) {
		// cobra's own: unknown command or flag, bad flag value, wrong
		// number of arguments.
		return ExitUsage, oneLine.Replace(err.Error()) + helpHint(cmd)
	}
	err = run.err
	code := exitCode(err)
	var ex *quota.ExhaustedError
	msg := err.Error()
	if errors.As(err, &ex) {
		msg = g.exhaustedMessage(ex)
	}
	if code == ExitUsage {
		msg += helpHint(cmd)
	}
	return code, oneLine.Replace(msg)
}

func helpHint(cmd *cobra.Command) string {
	if cmd == nil {
		return " (see 'quotactl --help')"
	}
	return " (see '" + cmd.CommandPath() + " --help')"
}

// exitCode classifies an error a command returned.
func exitCode(err error) int {
	var ee *exitError
	var ex *quota.ExhaustedError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ex):
		return ExitExhausted
	case errors.Is(err, quota.ErrCostExceedsLimit):
		return ExitNeverFits
	case errors.Is(err, quota.ErrInvalid), errors.Is(err, quota.ErrUnknownCredential), errors.Is(err, quota.ErrLabelTaken):
		return ExitUsage
	}
	return ExitError
}

// exhaustedMessage says which budget is spent, for whom, and when it frees
// up, relative and absolute.
func (g *globals) exhaustedMessage(e *quota.ExhaustedError) string {
	s := fmt.Sprintf("%s/%s is spent for %s (used %d of %d, this charge needs %d)", e.API, e.Budget, e.Credential, e.Used, e.Limit, e.Cost)
	if !e.ExhaustedUntil.IsZero() {
		s = fmt.Sprintf("%s/%s is marked spent for %s until %s", e.API, e.Budget, e.Credential, g.absolute(e.ExhaustedUntil))
	}
	return s + fmt.Sprintf(": frees up %s, at %s", relative(e.RetryAt.Sub(g.now())), g.absolute(e.RetryAt))
}

// now is the time displays are computed from.
func (g *globals) now() time.Time {
	if g.io.Clock != nil {
		return g.io.Clock()
	}
	return time.Now()
}

func (g *globals) location() *time.Location {
	if g.io.Location != nil {
		return g.io.Location
	}
	return time.Local
}

func (g *globals) env(name string) (string, bool) {
	if g.io.LookupEnv == nil {
		return "", false
	}
	return g.io.LookupEnv(name)
}

// storeEnv is the environment variable naming the store.
const storeEnv = "QUOTA_STORE"

// fingerprintKeyEnv is the environment variable holding the HMAC key of
// credential fingerprints, when the services sharing the store use one of
// their own (quota.WithFingerprintKey).
const fingerprintKeyEnv = "QUOTA_FINGERPRINT_KEY"

// Store returns the store, opening it on first use: --store, else
// $QUOTA_STORE, else storeurl.Default() (see storeSource).
func (g *globals) Store(ctx context.Context) (quota.Store, error) {
	if g.store != nil {
		return g.store, nil
	}
	u, from, err := g.storeSource()
	if err != nil {
		return nil, err
	}
	if u == "" {
		if g.readOnly || g.noCreate {
			// The default file, not created (nor its directory) to read
			// nothing from it.
			p, err := storeurl.DefaultPath()
			if err != nil {
				return nil, err
			}
			u = storeurl.SQLiteURL(p)
		} else {
			d, err := storeurl.Default()
			if err != nil {
				return nil, err
			}
			u = d
		}
	}
	if g.noCreate && !g.readOnly {
		if err := checkExists(u, from); err != nil {
			return nil, err
		}
	}
	open := g.open
	if open == nil {
		open = storeurl.Open
		if g.readOnly {
			open = storeurl.OpenReadOnly
		}
	}
	st, err := open(ctx, u)
	if err != nil && g.readOnly && !g.mustExist && errors.Is(err, quota.ErrNotFound) {
		// A command that only reads, on an SQLite file that does not
		// exist (or holds no store yet): say so, create nothing, and
		// show the empty store it would be.
		what := storeurl.Redact(u)
		if from == defaultStore {
			what += " (the default store)"
		}
		fmt.Fprintf(g.io.ErrOut, "quotactl: no store at %s yet: nothing is recorded (the first command that writes, such as 'quotactl budget set', creates it)\n", what)
		g.store, g.ownStore = quota.NewMemoryStore(), true
		return g.store, nil
	}
	if err != nil {
		var ue *storeurl.Error
		if errors.As(err, &ue) {
			return nil, &exitError{code: ExitUsage, err: err}
		}
		// Not a database, unreachable, cannot lock: the command line is
		// fine, the store is not.
		return nil, &exitError{code: ExitError, err: err}
	}
	g.store, g.ownStore = st, true
	return st, nil
}

// defaultStore is what storeSource says of a store named by neither
// --store nor $QUOTA_STORE.
const defaultStore = "the default store"

// storeSource returns the store URL given and where it comes from: --store
// when the flag is given, else $QUOTA_STORE when it is set, else "" from
// the default store (which Store picks). A --store or $QUOTA_STORE given
// empty is a usage error, not the default store: a script whose variable is
// unset must not meter against another store than the one it meant.
func (g *globals) storeSource() (u, from string, err error) {
	if g.storeGiven || g.storeURL != "" {
		if strings.TrimSpace(g.storeURL) == "" {
			return "", "", usageErrorf("--store %q: empty store URL; give a URL (such as sqlite:quota.db or redis://HOST:6379/0), or leave --store out for $%s or the default store", g.storeURL, storeEnv)
		}
		return g.storeURL, "--store", nil
	}
	if v, ok := g.env(storeEnv); ok {
		if strings.TrimSpace(v) == "" {
			return "", "", usageErrorf("$%s is set but empty: give it a store URL (such as sqlite:quota.db), or unset it for the default store", storeEnv)
		}
		return v, "$" + storeEnv, nil
	}
	return "", defaultStore, nil
}

// checkExists returns a usage error when u, from where storeSource says,
// names an SQLite file that does not exist: for a command that needs what a
// store records, which opening the file would create empty, and then fail
// on anyway.
func checkExists(u, from string) error {
	spec, err := storeurl.Parse(u)
	if err != nil || spec.Kind != storeurl.SQLite {
		return nil // Open says what is wrong with the URL
	}
	if _, err := os.Stat(spec.Path); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	fix := "check the URL"
	if from == defaultStore {
		fix = "name the store with --store URL or $" + storeEnv
	}
	return usageErrorf("no store at %s (%s): nothing is recorded there yet; %s, or create the store with 'quotactl budget set API/BUDGET --limit N --daily ZONE'",
		storeurl.Redact(u), from, fix)
}

// limiterOptions are the options every limiter the CLI makes gets.
func (g *globals) limiterOptions() []quota.Option {
	var opts []quota.Option
	if g.io.Clock != nil {
		opts = append(opts, quota.WithClock(g.io.Clock))
	}
	if k, ok := g.env(fingerprintKeyEnv); ok && k != "" {
		opts = append(opts, quota.WithFingerprintKey([]byte(k)))
	}
	return opts
}

// fingerprint is the fingerprint the CLI's limiters store for secret:
// quota.DefaultFingerprint, or the keyed hash when $QUOTA_FINGERPRINT_KEY
// is set.
func (g *globals) fingerprint(secret string) string {
	if k, ok := g.env(fingerprintKeyEnv); ok && k != "" {
		return quota.Fingerprint([]byte(k), secret)
	}
	return quota.DefaultFingerprint(secret)
}

// reader reads the views every tool shows (internal/view) from the store,
// on the IO's clock and in its zone.
func (g *globals) reader(ctx context.Context) (*view.Reader, error) {
	st, err := g.Store(ctx)
	if err != nil {
		return nil, err
	}
	opts := []view.Option{view.WithLocation(g.location())}
	if g.io.Clock != nil {
		opts = append(opts, view.WithClock(g.io.Clock))
	}
	return view.New(st, opts...), nil
}

// apis lists what the store knows, with the definitions in force: an
// operator's (budget set) over a program's. It keeps the catalog in
// g.catalog.
func (g *globals) apis(ctx context.Context) ([]quota.APIInfo, error) {
	r, err := g.reader(ctx)
	if err != nil {
		return nil, err
	}
	if g.catalog, err = r.APIs(ctx); err != nil {
		return nil, err
	}
	out := make([]quota.APIInfo, len(g.catalog))
	for i, a := range g.catalog {
		out[i] = a.APIInfo
	}
	return out, nil
}

// source says where the definition of api's budget in force comes from.
func (g *globals) source(api, budget string) quota.Source {
	for _, a := range g.catalog {
		if a.Name == api {
			return a.Source(budget)
		}
	}
	return quota.SourceProgram
}

// limiter loads api's limiter from the budgets recorded in the store. An
// API the store has no budgets for is a usage error listing the known ones.
func (g *globals) limiter(ctx context.Context, api string) (*quota.Limiter, quota.APIInfo, error) {
	if err := backend.CheckName("api", api); err != nil {
		return nil, quota.APIInfo{}, usageErrorf("bad API name %q: letters, digits, '.', '_' and '-' only", api)
	}
	apis, err := g.apis(ctx)
	if err != nil {
		return nil, quota.APIInfo{}, err
	}
	var names []string
	for _, a := range apis {
		if a.Name == api && len(a.Budgets) > 0 {
			l, err := quota.New(g.store, api, a.Budgets, g.limiterOptions()...)
			if err != nil {
				return nil, quota.APIInfo{}, fmt.Errorf("stored budgets of %s: %w", api, err)
			}
			return l, a, nil
		}
		if len(a.Budgets) > 0 {
			names = append(names, a.Name)
		}
	}
	known := "the store has none"
	if len(names) > 0 {
		known = "known: " + strings.Join(names, ", ")
	}
	return nil, quota.APIInfo{}, usageErrorf("no budgets for API %q (%s); define one with 'quotactl budget set %s/BUDGET --limit N --daily ZONE'", api, known, api)
}

// budgetOf returns the named budget of info or a usage error listing them.
func budgetOf(info quota.APIInfo, name string) (quota.Budget, error) {
	for _, b := range info.Budgets {
		if b.Name == name {
			return b, nil
		}
	}
	return quota.Budget{}, usageErrorf("no budget %q in API %q (budgets: %s)", name, info.Name, strings.Join(budgetNames(info), ", "))
}

func budgetNames(info quota.APIInfo) []string {
	var out []string
	for _, b := range info.Budgets {
		out = append(out, b.Name)
	}
	slices.Sort(out)
	return out
}
