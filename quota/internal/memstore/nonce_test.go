package memstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// TestLongNonceRefused: a nonce the store cannot keep whole is refused, by
// Take and by Adjust, rather than kept cut (a refund or settle by the
// whole nonce would then find nothing).
func TestLongNonceRefused(t *testing.T) {
	ctx := context.Background()
	s := New()
	b := backend.Budget{Name: "units", Limit: 10, Window: backend.Sliding(time.Hour)}
	long := strings.Repeat("n", maxMemNonce+1)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if _, err := s.Take(ctx, &backend.TakeRequest{API: "api", Owner: "o", Nonce: long, Now: now, Debits: []backend.Debit{{Budget: b, Cost: 1}}}); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("Take with a %d-byte nonce: %v; want ErrInvalid", len(long), err)
	}
	if err := s.Adjust(ctx, &backend.AdjustRequest{API: "api", Owner: "o", Budget: b, Used: 3, Nonce: long, Now: now}); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("Adjust with a %d-byte nonce: %v; want ErrInvalid", len(long), err)
	}
	ok := strings.Repeat("n", maxMemNonce)
	if err := s.Adjust(ctx, &backend.AdjustRequest{API: "api", Owner: "o", Budget: b, Used: 3, Nonce: ok, Now: now}); err != nil {
		t.Fatal(err)
	}
	es, err := s.Entries(ctx, &backend.EntriesRequest{API: "api", Owner: "o", Budget: b, Now: now})
	if err != nil || len(es) != 1 || es[0].Nonce != ok {
		t.Errorf("entries = %+v, %v; want the %d-byte nonce whole", es, err, len(ok))
	}
}
