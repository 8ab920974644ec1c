package quota

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/internal/memstore"
)

// Reservation is a granted charge. Keep it to Refund the charge if the call
// never reached the upstream.
type Reservation struct {
	API        string `json:"api"`
	Credential string `json:"credential"` // fingerprint
	// Owner is the account charged: the owner's name, or the credential's
	// fingerprint when it is its own owner.
	Owner  string    `json:"owner"`
	Label  string    `json:"label,omitempty"`
	Method string    `json:"method,omitempty"`
	Job    string    `json:"job,omitempty"` // the job run charging (ContextWithJob)
	At     time.Time `json:"at"`
	// Usage has one element per charged budget: its cost, and used, limit
	// and remaining after the charge.
	Usage []Usage `json:"usage"`
	// Unmetered is true when the store was unreachable and the limiter
	// failed open (see FailOpen): nothing was recorded.
	Unmetered bool `json:"unmetered,omitempty"`

	// The rest lives in ext, shared by every reservation Take returns on the
	// MemoryStore and never written once set, so that the one allocation
	// of a Take stays small; seq, when not 0, is the number of the nonce
	// the limiter ext.lim made for it (see Limiter.appendNonce), or with
	// storeSeq the number of the one its MemoryStore made.
	ext *resExt
	seq uint64
}

// resExt is what a Reservation knows beside its exported fields.
type resExt struct {
	lim   *Limiter // the limiter that made it; nil when parsed
	id    string   // set by ParseReservationID; else built on demand by ID
	nonce string   // set with id; else built from the Reservation's seq
	// leases are the leases it was admitted from, one per Usage (WithLeases)
	leases []*lease
}

// limiter returns the Limiter that made r, or nil.
func (r *Reservation) limiter() *Limiter {
	if r.ext == nil {
		return nil
	}
	return r.ext.lim
}

// leases returns the leases r was admitted from, or nil.
func (r *Reservation) leases() []*lease {
	if r.ext == nil {
		return nil
	}
	return r.ext.leases
}

// nonce returns what identifies r's entries in the store: built from seq
// by the limiter that made r (the same every time), or the one its ID
// gave; "" when r has none.
func (r *Reservation) nonce() string {
	switch {
	case r.ext == nil:
		return ""
	case r.seq&storeSeq != 0 && r.ext.lim != nil:
		if ms := r.ext.lim.mem; ms != nil {
			return ms.Nonce(r.seq &^ storeSeq)
		}
	case r.seq != 0 && r.ext.lim != nil:
		var buf [memstore.NonceMax]byte
		return string(r.ext.lim.appendNonce(buf[:0], r.seq))
	}
	return r.ext.nonce
}

// storeSeq marks a Reservation's seq as numbering a nonce its Limiter's
// MemoryStore made.
const storeSeq = 1 << 63

// ID identifies the reservation across processes ("API/ACCOUNT/
// TIME.NONCE", ACCOUNT being Owner); ParseReservationID reads it back, so
// `quotactl refund ID` works from a shell script. Empty for an unmetered
// reservation. It is built on demand, so a Take that never asks for it does
// not pay for the string.
func (r *Reservation) ID() string {
	if r.ext != nil && r.ext.id != "" {
		return r.ext.id
	}
	nonce := r.nonce()
	if nonce == "" {
		return ""
	}
	return reservationID(r.API, r.Owner, r.At, nonce)
}

// MarshalJSON encodes the reservation with its ID under "id".
func (r *Reservation) MarshalJSON() ([]byte, error) {
	type plain Reservation // the fields, without this method
	return json.Marshal(struct {
		ID string `json:"id"`
		*plain
	}{r.ID(), (*plain)(r)})
}

// UnmarshalJSON decodes what MarshalJSON wrote; the ID's nonce comes back,
// so the decoded reservation can be refunded or settled.
func (r *Reservation) UnmarshalJSON(b []byte) error {
	type plain Reservation
	v := struct {
		ID string `json:"id"`
		*plain
	}{plain: (*plain)(r)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.ID != "" {
		p, err := ParseReservationID(v.ID)
		if err != nil {
			return err
		}
		var ext resExt
		if r.ext != nil {
			ext = *r.ext
		}
		ext.id, ext.nonce = v.ID, p.nonce()
		r.ext, r.seq = &ext, 0
	}
	return nil
}

// Remaining returns the units left in the named budget after this
// reservation, or -1 if the reservation did not charge it.
func (r *Reservation) Remaining(budget string) int64 {
	for _, u := range r.Usage {
		if u.Budget == budget {
			return u.Remaining
		}
	}
	return -1
}

// NextReset returns the earliest instant one of the charged budgets frees
// capacity (a daily reset or a sliding window's oldest entry expiring).
func (r *Reservation) NextReset() time.Time {
	var t time.Time
	for _, u := range r.Usage {
		if !u.Reset.IsZero() && (t.IsZero() || u.Reset.Before(t)) {
			t = u.Reset
		}
	}
	return t
}

func reservationID(api, fp string, at time.Time, nonce string) string {
	var b strings.Builder
	b.Grow(len(api) + len(fp) + len(nonce) + 14)
	b.WriteString(api)
	b.WriteByte('/')
	b.WriteString(fp)
	b.WriteByte('/')
	var buf [16]byte
	b.Write(strconv.AppendInt(buf[:0], at.UnixMicro(), 32))
	b.WriteByte('.')
	b.WriteString(nonce)
	return b.String()
}

// ParseReservationID reads a Reservation's ID back into a Reservation that
// Limiter.Refund accepts (API, Owner, At and the nonce; no Usage, so Refund
// looks in every budget of the API). IDs made before owners existed
// (API/FINGERPRINT/TIME.NONCE) read the same way: the fingerprint was the
// account. Credential is set when the account is a fingerprint.
func ParseReservationID(id string) (*Reservation, error) {
	parts := strings.Split(id, "/")
	if len(parts) != 3 {
		return nil, invalidf("reservation ID %q: want API/ACCOUNT/TIME.NONCE", id)
	}
	api, owner, rest := parts[0], parts[1], parts[2]
	if err := backend.CheckName("api", api); err != nil {
		return nil, invalidf("reservation ID %q: %v", id, trimInvalid(err))
	}
	if err := backend.CheckName("owner", owner); err != nil {
		return nil, invalidf("reservation ID %q: %v", id, trimInvalid(err))
	}
	var fp string
	if len(owner) == FingerprintLen && strings.Trim(owner, "0123456789abcdef") == "" {
		fp = owner
	}
	ts, nonce, ok := strings.Cut(rest, ".")
	us, err := strconv.ParseInt(ts, 32, 64)
	if !ok || err != nil || nonce == "" || us <= 0 {
		return nil, invalidf("reservation ID %q: bad TIME.NONCE part", id)
	}
	return &Reservation{API: api, Credential: fp, Owner: owner, At: time.UnixMicro(us), ext: &resExt{id: id, nonce: nonce}}, nil
}
