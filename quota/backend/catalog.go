package backend

import (
	"fmt"
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
	var ch CredentialChange
	byID := func(id string) (CredentialInfo, bool) {
		for _, c := range creds {
			if c.ID == id {
				return c, true
			}
		}
		return CredentialInfo{}, false
	}
	holder := func(label string, except ...string) (CredentialInfo, bool) {
		if label == "" {
			return CredentialInfo{}, false
		}
	next:
		for _, c := range creds {
			if c.Label != label {
				continue
			}
			for _, e := range except {
				if c.ID == e {
					continue next
				}
			}
			return c, true
		}
		return CredentialInfo{}, false
	}
	find := func(from string) (CredentialInfo, error) {
		if from == "" {
			return CredentialInfo{}, invalidf("name the credential to change: a label or a fingerprint")
		}
		var n int
		var found CredentialInfo
		for _, c := range creds {
			if c.Label == from {
				n, found = n+1, c
			}
		}
		if n > 1 {
			// Only a store written before labels were unique holds this.
			return CredentialInfo{}, invalidf("label %q names %d credentials of api %q (recorded before labels were unique): name one by its fingerprint (quotactl credential list)", from, n, api)
		}
		if n == 1 {
			return found, nil
		}
		if c, ok := byID(from); ok {
			return c, nil
		}
		return CredentialInfo{}, fmt.Errorf("%w: no credential of api %q has the label or fingerprint %q", ErrUnknownCredential, api, from)
	}
	taken := func(label string, c CredentialInfo) error {
		return fmt.Errorf("%w: %q of api %q is held by credential %s (owner %s): to replace that credential with this one, "+
			"rotate it (quotactl credential rotate %s %s --credential-env VAR; in Go, Limiter.Rotate), or give this credential another label",
			ErrLabelTaken, label, api, short(c.ID), short(c.Account()), api, label)
	}
	if err := CheckName("api", api); err != nil {
		return ch, CredentialInfo{}, err
	}
	switch u.Op {
	case OpRegister, OpRotate:
		if err := checkFingerprint(u.ID); err != nil {
			return ch, CredentialInfo{}, err
		}
	}
	if u.Owner != "" {
		if err := CheckName("owner", u.Owner); err != nil {
			return ch, CredentialInfo{}, err
		}
	}
	if u.OwnerIfNew != "" {
		if err := CheckName("owner", u.OwnerIfNew); err != nil {
			return ch, CredentialInfo{}, err
		}
	}
	switch u.Op {
	case OpRegister:
		cur, ok := byID(u.ID)
		if !ok && u.Legacy != "" && u.Legacy != u.ID {
			if old, found := byID(u.Legacy); found {
				// An owner named now wins for the new fingerprint; the
				// legacy record keeps its account for older processes.
				return rotate(ch, old, u, u.Owner, holder, taken)
			}
		}
		next := cur
		next.ID = u.ID
		if u.Label != "" && u.Label != cur.Label {
			if h, found := holder(u.Label, u.ID); found {
				return ch, CredentialInfo{}, taken(u.Label, h)
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
	case OpRotate:
		old, err := find(u.From)
		if err != nil {
			return ch, CredentialInfo{}, err
		}
		if old.ID == u.ID {
			return ch, CredentialInfo{}, invalidf("rotate %q: the new secret is the credential's own", u.From)
		}
		if u.Owner != "" && u.Owner != old.Account() {
			return ch, CredentialInfo{}, invalidf("rotate %q: a rotation keeps the owner %s; to move a credential to another owner, register it with that owner", u.From, old.Account())
		}
		if cur, ok := byID(u.ID); ok && !(cur.Label == "" && cur.Account() == old.Account()) {
			// The new secret already meters an account of its own (or holds
			// a label): making it old's successor would move it off that
			// account, so the usage recorded there would stop counting
			// against it, and take its label. Only a predecessor of old
			// (no label, same account: rotating back) may be rotated onto.
			name := short(cur.ID)
			if cur.Label != "" {
				name = fmt.Sprintf("%q (%s)", cur.Label, short(cur.ID))
			}
			return ch, CredentialInfo{}, invalidf("rotate %q: the new secret is already recorded as credential %s of api %q (owner %s): "+
				"a rotation hands the label and account to a new secret, and moving this one would stop counting the usage recorded for it; "+
				"rotate to a secret that is not recorded yet",
				u.From, name, api, short(cur.Account()))
		}
		return rotate(ch, old, u, "", holder, taken)
	case OpRelabel:
		c, err := find(u.From)
		if err != nil {
			return ch, CredentialInfo{}, err
		}
		if h, found := holder(u.Label, c.ID); found {
			return ch, CredentialInfo{}, taken(u.Label, h)
		}
		c.Label = u.Label
		ch.Put = append(ch.Put, c.StoredForm())
		return ch, c.Filled(), nil
	case OpForget:
		c, err := find(u.From)
		if err != nil {
			return ch, CredentialInfo{}, err
		}
		ch.Delete = append(ch.Delete, c.ID)
		return ch, c.Filled(), nil
	}
	return ch, CredentialInfo{}, invalidf("unknown credential operation %d", u.Op)
}

// rotate makes u.ID old's successor: it takes the label and old's account
// (owner, when given, instead); old stays recorded under its account without
// a label.
func rotate(ch CredentialChange, old CredentialInfo, u CredentialUpdate, owner string,
	holder func(string, ...string) (CredentialInfo, bool), taken func(string, CredentialInfo) error) (CredentialChange, CredentialInfo, error) {
	label := u.Label
	if label == "" {
		label = old.Label
	}
	if h, found := holder(label, old.ID, u.ID); found {
		return ch, CredentialInfo{}, taken(label, h)
	}
	account := old.Account()
	next := CredentialInfo{ID: u.ID, Label: label, Owner: account}
	if owner != "" {
		next.Owner = owner
	}
	prev := CredentialInfo{ID: old.ID, Owner: account}
	ch.Put = append(ch.Put, prev.StoredForm(), next.StoredForm())
	return ch, next.Filled(), nil
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
