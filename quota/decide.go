package quota

import (
	"context"
	"slices"
	"unsafe"
)

// takeScratch is what one Take allocates, at once: the Reservation
// returned, the store's result and its usage (the MemoryStore fills them in
// place), and the nonce's bytes. newScratch sizes the usage to the charge.
type takeScratch struct {
	res      Reservation
	tr       TakeResult
	nonceStr string
	nonce    [nonceMax]byte
}

func newScratch(budgets int) *takeScratch {
	switch budgets {
	case 1:
		s := new(struct {
			takeScratch
			u [1]Usage
		})
		s.tr.Usage = s.u[:0]
		return &s.takeScratch
	case 2:
		s := new(struct {
			takeScratch
			u [2]Usage
		})
		s.tr.Usage = s.u[:0]
		return &s.takeScratch
	}
	return new(takeScratch)
}

// decide asks the store for one decision on debits. On the MemoryStore the
// request and debits stay on the stack and the result is written into sc:
// a decision allocates nothing beyond sc.
func (l *Limiter) decide(ctx context.Context, sc *takeScratch, owner, method string, debits []Debit) (*TakeResult, error) {
	sc.nonceStr = l.nonceIn(&sc.nonce)
	if ms, ok := l.store.(*MemoryStore); ok {
		req := TakeRequest{API: l.api, Owner: owner, Nonce: sc.nonceStr, Method: method, Job: JobFromContext(ctx), Now: l.now(), TrustStore: l.loss.trust}
		return ms.take(ctx, &req, debits, &sc.tr)
	}
	req := &TakeRequest{API: l.api, Owner: owner, Nonce: sc.nonceStr, Method: method, Job: JobFromContext(ctx), Now: l.now(), Debits: slices.Clone(debits), TrustStore: l.loss.trust}
	return l.store.Take(ctx, req)
}

// nonceMax bounds a nonce: 8 characters of prefix and a base-32 uint64.
const nonceMax = 24

// nonceIn writes a fresh nonce into buf and returns it as a string that
// shares buf's memory: buf belongs to one Take's scratch and is never
// written again, so the string stays immutable, and costs no allocation.
func (l *Limiter) nonceIn(buf *[nonceMax]byte) string {
	b := l.appendNonce(buf[:0])
	return unsafe.String(&b[0], len(b))
}
