// Package view is the view model quotactl's operator tools share: what is
// used and left of every budget of every owner (Status), a budget's window
// in buckets (History) and the thresholds each budget crossed (Thresholds),
// read from a quota.Store. `quotactl ... --json`, the dashboard (its page
// and /api) and promquota's StoreCollector all build their figures here, so
// they agree by construction: the same field names, the same numbers, and
// one rule for each (Percent, ResetSeconds, Every, Owners).
//
// The package imports quota alone (the job view, which needs the jobs and
// costs packages, is view/jobview), so that the Prometheus adapter pulls in
// no scheduler.
package view

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// Reader reads views from a store. It only reads. It is safe for
// concurrent use. Build one with New.
type Reader struct {
	store quota.Store
	clock func() time.Time
	loc   *time.Location
}

// Option configures a Reader in New.
type Option func(*Reader)

// WithClock makes the Reader read usage as of clock's time instead of the
// store's own clock, and count durations (ResetSeconds) from it. For tests.
// Default: the store's clock for store reads, the host's for durations.
func WithClock(clock func() time.Time) Option { return func(r *Reader) { r.clock = clock } }

// WithLocation sets the display zone: the zone a sliding budget's chart
// counts hours in (a daily or monthly budget's chart is always in its own
// zone).
// Default: time.Local.
func WithLocation(loc *time.Location) Option {
	return func(r *Reader) {
		if loc != nil {
			r.loc = loc
		}
	}
}

// New returns a Reader of store. The store stays the caller's.
func New(store quota.Store, opts ...Option) *Reader {
	r := &Reader{store: store, loc: time.Local}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Store returns the store r reads.
func (r *Reader) Store() quota.Store { return r.store }

// Location returns the display zone (WithLocation).
func (r *Reader) Location() *time.Location { return r.loc }

// Now is the instant views are computed at: the injected clock's, else the
// host's.
func (r *Reader) Now() time.Time {
	if r.clock != nil {
		return r.clock()
	}
	return time.Now()
}

// StoreNow is the Now of a store request: the injected clock's, or zero
// for the store's own clock.
func (r *Reader) StoreNow() time.Time {
	if r.clock != nil {
		return r.clock()
	}
	return time.Time{}
}

// Limiter returns a limiter of a's budgets in force, for reading usage: it
// charges nothing unless the caller does.
func (r *Reader) Limiter(a API) (*quota.Limiter, error) {
	var opts []quota.Option
	if r.clock != nil {
		opts = append(opts, quota.WithClock(r.clock))
	}
	l, err := quota.New(r.store, a.Name, a.Budgets, opts...)
	if err != nil {
		return nil, fmt.Errorf("stored budgets of %s: %w", a.Name, err)
	}
	return l, nil
}

// API is one API as the tools show it: the budgets in force, sorted by
// name, where each definition comes from, the credentials the store
// records and the owners they make.
type API struct {
	quota.APIInfo
	// Sources says, per budget, whose definition is in force: an
	// operator's ('quotactl budget set', over the program's) or the
	// program's.
	Sources map[string]quota.Source
	// Owners are the accounts of Credentials (see Owners).
	Owners []Owner
}

// Source says whose definition of budget is in force (SourceProgram when
// the API does not define it).
func (a API) Source(budget string) quota.Source {
	if s, ok := a.Sources[budget]; ok {
		return s
	}
	return quota.SourceProgram
}

// Budget returns the definition in force of the budget named name.
func (a API) Budget(name string) (quota.Budget, bool) {
	i := slices.IndexFunc(a.Budgets, func(b quota.Budget) bool { return b.Name == name })
	if i < 0 {
		return quota.Budget{}, false
	}
	return a.Budgets[i], true
}

// InForce returns budgets (a cost table's, say) each replaced by a's
// definition in force of the same name, where a has one: it is what is
// enforced.
func (a API) InForce(budgets []quota.Budget) []quota.Budget {
	out := slices.Clone(budgets)
	for i, b := range out {
		if d, ok := a.Budget(b.Name); ok {
			out[i] = d
		}
	}
	return out
}

// APIs reads every API the store knows, in the store's order, with the
// definitions in force: an operator's definition of a budget replaces the
// program's.
func (r *Reader) APIs(ctx context.Context) ([]API, error) {
	infos, err := r.store.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]API, len(infos))
	for i, info := range infos {
		over, err := quota.Overrides(ctx, r.store, info.Name)
		if err != nil {
			return nil, fmt.Errorf("overrides of %s: %w", info.Name, err)
		}
		a := API{APIInfo: info}
		a.Budgets, a.Sources = quota.ApplyOverrides(info.Budgets, over)
		slices.SortFunc(a.Budgets, func(x, y quota.Budget) int { return strings.Compare(x.Name, y.Name) })
		a.Owners = Owners(info.Credentials)
		out[i] = a
	}
	return out, nil
}

// Owner is one account of an API and the credentials kept under it.
type Owner struct {
	// Account is what the store keys the budgets by: the owner's name, or
	// the fingerprint of a credential that is its own owner (and of the
	// keys rotated under it). See quota.CredentialInfo.Account.
	Account string
	// Name is how every tool names the owner (the dashboard's rows,
	// /metrics' owner label): the owner's name; for an account that is a
	// credential's fingerprint, that credential's label, else the short
	// fingerprint. Names are unique within an API: an account whose label
	// is taken (a key labelled "k1" beside a project named "k1") is named
	// by its short fingerprint, the whole one if that is taken too.
	Name string
	// Credentials are the credentials of the account, labelled ones first
	// (by label), then by fingerprint.
	Credentials []quota.CredentialInfo
}

// Owners groups credentials by account, sorted by account, and names each
// account (see Owner.Name).
func Owners(creds []quota.CredentialInfo) []Owner {
	sorted := slices.Clone(creds)
	slices.SortStableFunc(sorted, func(a, b quota.CredentialInfo) int {
		return cmp.Or(cmp.Compare(a.Account(), b.Account()), cmp.Compare(unlabelled(a), unlabelled(b)), cmp.Compare(a.Label, b.Label), cmp.Compare(a.ID, b.ID))
	})
	var out []Owner
	for _, c := range sorted {
		if n := len(out); n > 0 && out[n-1].Account == c.Account() {
			out[n-1].Credentials = append(out[n-1].Credentials, c)
			continue
		}
		out = append(out, Owner{Account: c.Account(), Credentials: []quota.CredentialInfo{c}})
	}
	// Named owners keep their names; a credential's own account takes its
	// label, else its short fingerprint, unless another account has it.
	taken := map[string]bool{}
	for i, o := range out {
		if !IsFingerprint(o.Account) {
			out[i].Name = o.Account
			taken[o.Account] = true
		}
	}
	for i, o := range out {
		if !IsFingerprint(o.Account) {
			continue
		}
		label := ""
		if j := slices.IndexFunc(o.Credentials, func(c quota.CredentialInfo) bool { return c.ID == o.Account }); j >= 0 {
			label = o.Credentials[j].Label
		}
		out[i].Name = o.Account
		for _, try := range []string{label, ShortFingerprint(o.Account)} {
			if try != "" && !taken[try] {
				out[i].Name = try
				break
			}
		}
		taken[out[i].Name] = true
	}
	return out
}

func unlabelled(c quota.CredentialInfo) int {
	if c.Label == "" {
		return 1
	}
	return 0
}

// ShortFingerprint is the first 8 digits of a fingerprint: how the tools
// show a credential without a label.
func ShortFingerprint(fp string) string { return fp[:min(8, len(fp))] }

// IsFingerprint reports whether an account is a credential's fingerprint
// (its own account) rather than an owner's name.
func IsFingerprint(account string) bool {
	return len(account) == quota.FingerprintLen && strings.Trim(account, "0123456789abcdef") == ""
}

// AccountName shows an account in one word: an owner's name, or the short
// fingerprint of a credential's own account.
func AccountName(account string) string {
	if IsFingerprint(account) {
		return ShortFingerprint(account)
	}
	return account
}

// CredentialName shows a credential: its label, else its short
// fingerprint.
func CredentialName(c quota.CredentialInfo) string {
	if c.Label != "" {
		return c.Label
	}
	return ShortFingerprint(c.ID)
}
