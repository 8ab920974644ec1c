package quota

import (
	"context"
	"slices"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/internal/memstore"
)

// decide asks the store for one decision on debits, under the nonce of seq
// (see appendNonce).
func (l *Limiter) decide(ctx context.Context, seq uint64, owner, method, job string, debits []backend.Debit) (*backend.TakeResult, error) {
	var nb [memstore.NonceMax]byte // the nonce is built on the stack: one allocation, the string
	req := &backend.TakeRequest{API: l.api, Owner: owner, Nonce: string(l.appendNonce(nb[:0], seq)), Method: method, Job: job, Now: l.now(), Debits: slices.Clone(debits), TrustStore: l.loss.trust}
	return l.store.Take(ctx, req)
}

// decideMemory is decide on the MemoryStore, which writes each debit's
// usage into us: the request and the debits stay on the caller's stack,
// and a decision allocates nothing. host is the host clock's time (µs)
// Take read, for the store's too unless the limiter has a clock of its own
// (WithClock). The store makes the nonce, and returns its number (see
// MemoryStore.take).
func (l *Limiter) decideMemory(ctx context.Context, ms *memstore.Store, host int64, owner, method, job string, debits []backend.Debit, us []Usage) (bool, time.Time, uint64, error) {
	// Set field by field: a literal is built apart and copied in, which
	// stalls on store forwarding.
	var req backend.TakeRequest
	req.API, req.Owner, req.Method, req.Job = l.api, owner, method, job
	if l.clock != nil {
		req.Now = l.now()
	}
	req.TrustStore = l.loss.trust
	return ms.Decide(ctx, &req, host, debits, us)
}

// memstore.NonceMax bounds a nonce: 8 characters of prefix and a base-32 uint64.

// newReservation allocates a Reservation with room for n budgets' usage,
// for up to two budgets in one piece: the one allocation of an admitted
// Take on the MemoryStore, which writes the usage in place. It returns
// the Reservation and its Usage.
func newReservation(n int) (*Reservation, []Usage) {
	switch n {
	case 1:
		s := new(struct {
			r Reservation
			u [1]Usage
		})
		s.r.Usage = s.u[:]
		return &s.r, s.u[:]
	case 2:
		s := new(struct {
			r Reservation
			u [2]Usage
		})
		s.r.Usage = s.u[:]
		return &s.r, s.u[:]
	}
	u := make([]Usage, n)
	return &Reservation{Usage: u}, u
}
