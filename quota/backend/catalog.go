package backend

import (
	"fmt"
	"slices"
)

// CredentialOp is what a CredentialUpdate does.
type CredentialOp int

const (
	// OpRegister records a fingerprint with its label and owner. A
	// non-empty Label replaces the recorded one (and must not be held by
	// another credential); a non-empty Owner replaces the recorded owner;
	// with neither recorded, the credential's owner is OwnerIfNew, else
	// itself. A fingerprint first seen whose Legacy fingerprint is recorded
	// takes over the legacy record's label and account (see Legacy).
	OpRegister CredentialOp = iota
	// OpRotate gives the credential named by From (a label or a
	// fingerprint) a successor ID: the new fingerprint takes the label
	// (Label if given, else the old one) and the old credential's account,
	// so usage continues; the old fingerprint stays recorded under the same
	// account without a label, so a process still using the old key meters
	// the same account. ID must not be recorded already (ErrInvalid: it
	// meters an account of its own, whose usage would stop counting),
	// except as an unlabelled credential of the same account (rotating back
	// to a predecessor).
	OpRotate
	// OpRelabel sets the label of the credential named by From to Label
	// (empty: no label).
	OpRelabel
	// OpForget removes the credential named by From from the catalog. Its
	// account's usage stays.
	OpForget
)

// CredentialUpdate is one change to an API's credential catalog
// (Store.UpdateCredential).
type CredentialUpdate struct {
	Op    CredentialOp
	ID    string // OpRegister, OpRotate: the fingerprint to record
	Label string // OpRegister, OpRotate, OpRelabel: the label to give
	Owner string // OpRegister: the owner to record; empty keeps the recorded one
	From  string // OpRotate, OpRelabel, OpForget: the label or fingerprint of the credential changed
	// Legacy (OpRegister) is the fingerprint the same secret had under the
	// legacy derivation. When ID is not recorded and Legacy is, the new
	// fingerprint takes the legacy record's label and account, as OpRotate
	// would: existing usage continues under the slow derivation.
	Legacy string
	// OwnerIfNew (OpRegister, with Owner empty) is the owner to record for
	// a credential the catalog does not record yet, under ID or Legacy: a
	// default that never replaces an owner recorded before, even one
	// recorded an instant earlier by another process, since the check and
	// the write are one atomic step. Empty: a new credential is its own
	// owner.
	OwnerIfNew string
}

// CredentialChange is what ApplyCredentialUpdate asks a store to write:
// records to insert or replace (Owner empty when a credential is its own
// owner, the stored form) and fingerprints to delete.
type CredentialChange struct {
	Put    []CredentialInfo
	Delete []string
}

// Account returns the account c's budgets are kept under: its Owner, or
// its fingerprint when it is its own owner.
func (c CredentialInfo) Account() string {
	if c.Owner != "" {
		return c.Owner
	}
	return c.ID
}

// StoredForm returns c as stores keep it: Owner empty when the credential is
// its own owner, so records written before owners existed read the same.
func (c CredentialInfo) StoredForm() CredentialInfo {
	if c.Owner == c.ID {
		c.Owner = ""
	}
	return c
}

// Filled returns c with Owner set to its account, as stores return it.
func (c CredentialInfo) Filled() CredentialInfo {
	c.Owner = c.Account()
	return c
}

// ApplyCredentialUpdate applies u to the catalog creds of api (every record
// of the API, in stored or filled form) and returns the changes to write and
// the updated record (filled). Stores call it under their lock or inside one
// transaction, so that the catalog changes atomically. Errors wrap ErrInvalid,
// ErrLabelTaken or ErrUnknownCredential.
func ApplyCredentialUpdate(api string, creds []CredentialInfo, u CredentialUpdate) (CredentialChange, CredentialInfo, error) {
	if err := checkUpdate(api, u); err != nil {
		return CredentialChange{}, CredentialInfo{}, err
	}
	c := catalog{api: api, creds: creds}
	switch u.Op {
	case OpRegister:
		return c.register(u)
	case OpRotate:
		return c.rotateTo(u)
	case OpRelabel:
		return c.relabel(u)
	case OpForget:
		return c.forget(u)
	}
	return CredentialChange{}, CredentialInfo{}, invalidf("unknown credential operation %d", u.Op)
}

// checkUpdate validates the names and fingerprints u gives.
func checkUpdate(api string, u CredentialUpdate) error {
	if err := CheckName("api", api); err != nil {
		return err
	}
	if u.Op == OpRegister || u.Op == OpRotate {
		if err := checkFingerprint(u.ID); err != nil {
			return err
		}
	}
	for _, owner := range []string{u.Owner, u.OwnerIfNew} {
		if owner != "" {
			if err := CheckName("owner", owner); err != nil {
				return err
			}
		}
	}
	return nil
}

// catalog is an API's credential records, as ApplyCredentialUpdate reads
// them.
type catalog struct {
	api   string
	creds []CredentialInfo
}

// byID returns the record of fingerprint id.
func (c catalog) byID(id string) (CredentialInfo, bool) {
	for _, r := range c.creds {
		if r.ID == id {
			return r, true
		}
	}
	return CredentialInfo{}, false
}

// holder returns the credential holding label, but those of the IDs
// except; none for an empty label.
func (c catalog) holder(label string, except ...string) (CredentialInfo, bool) {
	if label == "" {
		return CredentialInfo{}, false
	}
	for _, r := range c.creds {
		if r.Label == label && !slices.Contains(except, r.ID) {
			return r, true
		}
	}
	return CredentialInfo{}, false
}

// find returns the credential from names: by label, else by fingerprint.
func (c catalog) find(from string) (CredentialInfo, error) {
	if from == "" {
		return CredentialInfo{}, invalidf("name the credential to change: a label or a fingerprint")
	}
	var n int
	var found CredentialInfo
	for _, r := range c.creds {
		if r.Label == from {
			n, found = n+1, r
		}
	}
	if n > 1 {
		// Only a store written before labels were unique holds this.
		return CredentialInfo{}, invalidf("label %q names %d credentials of api %q (recorded before labels were unique): name one by its fingerprint (quotactl credential list)", from, n, c.api)
	}
	if n == 1 {
		return found, nil
	}
	if r, ok := c.byID(from); ok {
		return r, nil
	}
	return CredentialInfo{}, fmt.Errorf("%w: no credential of api %q has the label or fingerprint %q", ErrUnknownCredential, c.api, from)
}

// taken is the error for label, held by h.
func (c catalog) taken(label string, h CredentialInfo) error {
	return fmt.Errorf("%w: %q of api %q is held by credential %s (owner %s): to replace that credential with this one, "+
		"rotate it (quotactl credential rotate %s %s --credential-env VAR; in Go, Limiter.Rotate), or give this credential another label",
		ErrLabelTaken, label, c.api, short(h.ID), short(h.Account()), c.api, label)
}

// register is OpRegister.
func (c catalog) register(u CredentialUpdate) (CredentialChange, CredentialInfo, error) {
	var ch CredentialChange
	cur, ok := c.byID(u.ID)
	if !ok && u.Legacy != "" && u.Legacy != u.ID {
		if old, found := c.byID(u.Legacy); found {
			// An owner named now wins for the new fingerprint; the
			// legacy record keeps its account for older processes.
			return c.succeed(old, u, u.Owner)
		}
	}
	next := cur
	next.ID = u.ID
	if u.Label != "" && u.Label != cur.Label {
		if h, found := c.holder(u.Label, u.ID); found {
			return ch, CredentialInfo{}, c.taken(u.Label, h)
		}
		next.Label = u.Label
	}
	switch {
	case u.Owner != "":
		next.Owner = u.Owner
	case !ok && u.OwnerIfNew != "":
		next.Owner = u.OwnerIfNew // new: the default owner; a recorded one stays
	}
	next = next.StoredForm()
	if !ok || next != cur.StoredForm() {
		ch.Put = append(ch.Put, next)
	}
	return ch, next.Filled(), nil
}

// rotateTo is OpRotate.
func (c catalog) rotateTo(u CredentialUpdate) (CredentialChange, CredentialInfo, error) {
	old, err := c.find(u.From)
	if err != nil {
		return CredentialChange{}, CredentialInfo{}, err
	}
	if old.ID == u.ID {
		return CredentialChange{}, CredentialInfo{}, invalidf("rotate %q: the new secret is the credential's own", u.From)
	}
	if u.Owner != "" && u.Owner != old.Account() {
		return CredentialChange{}, CredentialInfo{}, invalidf("rotate %q: a rotation keeps the owner %s; to move a credential to another owner, register it with that owner", u.From, old.Account())
	}
	if cur, ok := c.byID(u.ID); ok && !(cur.Label == "" && cur.Account() == old.Account()) {
		// The new secret already meters an account of its own (or holds
		// a label): making it old's successor would move it off that
		// account, so the usage recorded there would stop counting
		// against it, and take its label. Only a predecessor of old
		// (no label, same account: rotating back) may be rotated onto.
		name := short(cur.ID)
		if cur.Label != "" {
			name = fmt.Sprintf("%q (%s)", cur.Label, short(cur.ID))
		}
		return CredentialChange{}, CredentialInfo{}, invalidf("rotate %q: the new secret is already recorded as credential %s of api %q (owner %s): "+
			"a rotation hands the label and account to a new secret, and moving this one would stop counting the usage recorded for it; "+
			"rotate to a secret that is not recorded yet",
			u.From, name, c.api, short(cur.Account()))
	}
	return c.succeed(old, u, "")
}

// relabel is OpRelabel.
func (c catalog) relabel(u CredentialUpdate) (CredentialChange, CredentialInfo, error) {
	r, err := c.find(u.From)
	if err != nil {
		return CredentialChange{}, CredentialInfo{}, err
	}
	if h, found := c.holder(u.Label, r.ID); found {
		return CredentialChange{}, CredentialInfo{}, c.taken(u.Label, h)
	}
	r.Label = u.Label
	return CredentialChange{Put: []CredentialInfo{r.StoredForm()}}, r.Filled(), nil
}

// forget is OpForget.
func (c catalog) forget(u CredentialUpdate) (CredentialChange, CredentialInfo, error) {
	r, err := c.find(u.From)
	if err != nil {
		return CredentialChange{}, CredentialInfo{}, err
	}
	return CredentialChange{Delete: []string{r.ID}}, r.Filled(), nil
}

// succeed makes u.ID old's successor: it takes u.Label (else old's label)
// and old's account, or owner when given; old stays recorded under the
// same account without a label.
func (c catalog) succeed(old CredentialInfo, u CredentialUpdate, owner string) (CredentialChange, CredentialInfo, error) {
	label := u.Label
	if label == "" {
		label = old.Label
	}
	if h, found := c.holder(label, old.ID, u.ID); found {
		return CredentialChange{}, CredentialInfo{}, c.taken(label, h)
	}
	account := old.Account()
	next := CredentialInfo{ID: u.ID, Label: label, Owner: account}
	if owner != "" {
		next.Owner = owner
	}
	prev := CredentialInfo{ID: old.ID, Owner: account}
	return CredentialChange{Put: []CredentialInfo{prev.StoredForm(), next.StoredForm()}}, next.Filled(), nil
}

func checkFingerprint(fp string) error {
	if fp == "" {
		return invalidf("empty credential fingerprint")
	}
	if err := CheckName("fingerprint", fp); err != nil {
		return err
	}
	return nil
}

func short(fp string) string {
	if len(fp) > 8 {
		return fp[:8]
	}
	return fp
}
