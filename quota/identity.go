package quota

import (
	"cmp"
	"context"
	"fmt"

	"github.com/quotactl/quotactl/quota/backend"
)

// Fingerprint returns the fingerprint the limiter stores for secret:
// DefaultFingerprint, or Fingerprint with the key of WithFingerprintKey.
func (l *Limiter) Fingerprint(secret string) string {
	if v, ok := l.fps.Load(secret); ok {
		return v.(string)
	}
	var fp string
	if l.fpKey != nil {
		fp = Fingerprint(l.fpKey, secret)
	} else {
		fp = DefaultFingerprint(secret)
	}
	l.fps.Store(secret, fp)
	return fp
}

// ident is a credential as the limiter meters it.
type ident struct {
	fp, label string
	account   string // what stores key budgets by: owner name or fingerprint
}

// identify resolves c: its fingerprint, label and account. The first time a
// process sees a credential it registers it in the store's catalog (one
// call), which enforces unique labels and tells the recorded owner; the
// answer is cached, so later calls cost nothing. An error (a label taken by
// another credential, an unknown label, an unreachable store) comes before
// anything is charged. The ident returned is shared: never written.
func (l *Limiter) identify(ctx context.Context, c Credential) (*ident, error) {
	id, _, err := l.resolve(ctx, c)
	return id, err
}

// resolve is identify, telling too whether it went past the caches (to
// the store, or to derive a fingerprint): whether it took time.
func (l *Limiter) resolve(ctx context.Context, c Credential) (*ident, bool, error) {
	owner := c.Owner
	if owner == "" {
		owner = l.owner
	}
	if c.Owner != "" {
		if err := backend.CheckName("owner", c.Owner); err != nil {
			return nil, false, err
		}
	}
	if c.Secret == "" {
		return l.identifyLabel(ctx, c.Label, owner)
	}
	if e := l.lastID.Load(); e != nil && e.secret == c.Secret && e.id.label == c.Label && e.owner == owner {
		return e.id, false, nil // the credential of the last registration: no map lookups
	}
	fp := l.Fingerprint(c.Secret)
	k := resolveKey{fp, c.Label, owner}
	if v, ok := l.accounts.Load(k); ok {
		return v.(*ident), false, nil
	}
	l.define(ctx)
	u := backend.CredentialUpdate{Op: backend.OpRegister, ID: fp, Label: c.Label, Owner: owner, Legacy: l.legacyFingerprint(c.Secret)}
	if owner == "" {
		// A Transport's unnamed owner: for a credential the store does not
		// record, decided in the store's atomic step, so that it never
		// replaces an owner another process just recorded. The account
		// cached below is the store's answer either way.
		u.OwnerIfNew = valuesOf(ctx).ownerIfNew(l)
	}
	info, err := l.store.UpdateCredential(ctx, l.api, u)
	if err != nil {
		return nil, true, err
	}
	// A credential given without a label is named by the label the store
	// holds for it (after a rotation, say), so refusals and events name
	// "yt-key-1", not a fingerprint.
	id := &ident{fp, cmp.Or(c.Label, info.Label), info.Account()}
	l.accounts.Store(k, id)
	l.lastID.Store(&lastIdent{secret: c.Secret, owner: owner, id: id})
	return id, true, nil
}

// noIdent is no credential's ident; never written.
var noIdent ident

// lastIdent is the credential identify registered last, kept so that a run
// of charges with one credential skips two map lookups.
type lastIdent struct {
	secret, owner string
	id            *ident
}

// lookup resolves c for a read (Status, Entries) without writing to the
// store: the cached account, else what the catalog records for the
// fingerprint (or its legacy one), else the owner named or the fingerprint.
func (l *Limiter) lookup(ctx context.Context, c Credential) (ident, error) {
	owner := c.Owner
	if owner == "" {
		owner = l.owner
	}
	if c.Owner != "" {
		if err := backend.CheckName("owner", c.Owner); err != nil {
			return ident{}, err
		}
	}
	if c.Secret == "" {
		if owner != "" && c.Label != "" {
			// the owner named, as for a secret below: the label's record
			// is read, and never moved to that owner (a charge would)
			rec, err := l.lookupLabel(ctx, c.Label)
			if err != nil {
				return ident{}, err
			}
			return ident{rec.ID, c.Label, owner}, nil
		}
		id, err := l.identify(ctx, c) // with no owner named, a label lookup reads only
		if err != nil {
			return ident{}, err
		}
		return *id, nil
	}
	fp := l.Fingerprint(c.Secret)
	if v, ok := l.accounts.Load(resolveKey{fp, c.Label, owner}); ok {
		return *v.(*ident), nil
	}
	if owner != "" {
		return ident{fp, c.Label, owner}, nil
	}
	r, found, err := l.recorded(ctx, c.Secret)
	if err != nil {
		return ident{}, err
	}
	account := fp
	if found {
		account = r.Account()
	}
	return ident{fp, c.Label, account}, nil
}

// legacyFingerprint returns secret's legacy fingerprint (see
// LegacyFingerprintKey), or "" when the limiter has a fingerprint key of
// its own (WithFingerprintKey), which never had one.
func (l *Limiter) legacyFingerprint(secret string) string {
	if l.fpKey != nil {
		return ""
	}
	return Fingerprint([]byte(LegacyFingerprintKey), secret)
}

// recorded returns what the store's catalog records for the credential with
// secret in this API: its record under its fingerprint, else under its
// legacy one; found is false when neither is recorded. It reads the
// catalog and writes nothing.
func (l *Limiter) recorded(ctx context.Context, secret string) (rec CredentialInfo, found bool, err error) {
	apis, err := l.store.List(ctx)
	if err != nil {
		return CredentialInfo{}, false, err
	}
	fp, legacy := l.Fingerprint(secret), l.legacyFingerprint(secret)
	for _, a := range apis {
		if a.Name != l.api {
			continue
		}
		for _, r := range a.Credentials {
			switch {
			case r.ID == fp:
				return r, true, nil
			case legacy != "" && r.ID == legacy:
				rec, found = r, true
			}
		}
	}
	return rec, found, nil
}

// identifyLabel is resolve for a credential given by its label alone.
func (l *Limiter) identifyLabel(ctx context.Context, label, owner string) (*ident, bool, error) {
	if label == "" {
		return nil, false, invalidf("empty credential: give a secret, or the label of a credential the store knows")
	}
	k := resolveKey{label: label, owner: owner}
	if v, ok := l.labels.Load(k); ok {
		return v.(*ident), false, nil
	}
	c, err := l.lookupLabel(ctx, label)
	if err != nil {
		return nil, true, err
	}
	if owner != "" && owner != c.Account() {
		if c, err = l.store.UpdateCredential(ctx, l.api, backend.CredentialUpdate{Op: backend.OpRegister, ID: c.ID, Owner: owner}); err != nil {
			return nil, true, err
		}
	}
	id := &ident{c.ID, label, c.Account()}
	l.labels.Store(k, id)
	return id, true, nil
}

func (l *Limiter) lookupLabel(ctx context.Context, label string) (CredentialInfo, error) {
	apis, err := l.store.List(ctx)
	if err != nil {
		return CredentialInfo{}, err
	}
	var found []CredentialInfo
	for _, a := range apis {
		if a.Name != l.api {
			continue
		}
		for _, c := range a.Credentials {
			if c.Label == label {
				found = append(found, c.Filled())
			}
		}
	}
	switch len(found) {
	case 0:
		return CredentialInfo{}, fmt.Errorf("%w: no credential labelled %q for api %q", ErrUnknownCredential, label, l.api)
	case 1:
		return found[0], nil
	}
	// Only a store written before labels were unique holds this.
	return CredentialInfo{}, invalidf("label %q names %d credentials of api %q: give the secret, or keep one label (quotactl credential relabel or forget, naming the other by fingerprint)", label, len(found), l.api)
}

// Rotate replaces the credential named from (its label or fingerprint) with
// next, a new secret of the same owner: next takes the label (next.Label if
// given, else the old one) and the old credential's account, so its usage
// continues; the old fingerprint stays recorded under the account without a
// label, so a process still using the old key during a rollout meters the
// same budgets. It returns the new record. A next the store already records
// is refused (ErrInvalid), unless it is an unlabelled credential of the same
// account (rotating back to the old key).
func (l *Limiter) Rotate(ctx context.Context, from string, next Credential) (CredentialInfo, error) {
	if next.Secret == "" {
		return CredentialInfo{}, invalidf("rotate %q: the new credential needs a secret", from)
	}
	return l.catalog(ctx, backend.CredentialUpdate{Op: backend.OpRotate, From: from, ID: l.Fingerprint(next.Secret), Label: next.Label, Owner: next.Owner})
}

// Relabel gives the credential named from (its label or fingerprint) the
// label label (empty: none). Labels are unique per API.
func (l *Limiter) Relabel(ctx context.Context, from, label string) (CredentialInfo, error) {
	return l.catalog(ctx, backend.CredentialUpdate{Op: backend.OpRelabel, From: from, Label: label})
}

// Forget removes the credential named from (its label or fingerprint) from
// the store's catalog. Its owner's usage stays; a later charge with the same
// secret records it again, as its own owner unless it names one.
func (l *Limiter) Forget(ctx context.Context, from string) (CredentialInfo, error) {
	return l.catalog(ctx, backend.CredentialUpdate{Op: backend.OpForget, From: from})
}

func (l *Limiter) catalog(ctx context.Context, u backend.CredentialUpdate) (CredentialInfo, error) {
	if err := checkContext(ctx, "credential update"); err != nil {
		return CredentialInfo{}, err
	}
	l.define(ctx)
	info, err := l.store.UpdateCredential(ctx, l.api, u)
	// This process's view of labels and owners is stale either way.
	l.accounts.Clear()
	l.lastID.Store(nil)
	l.labels.Clear()
	return info, err
}
