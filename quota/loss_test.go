package quota

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// lossStore is a MemoryStore that reports, on the next Take, that it lost
// the owner's acknowledged writes, as a Redis store does after a flush.
type lossStore struct {
	*MemoryStore
	lose bool
}

func (s *lossStore) Take(ctx context.Context, req *backend.TakeRequest) (*backend.TakeResult, error) {
	res, err := s.MemoryStore.Take(ctx, req)
	if err != nil || !s.lose {
		return res, err
	}
	s.lose = false
	res.StoreLoss = true
	if !req.TrustStore { // the store marked the debited budgets itself
		res.OK = false
		for i := range res.Usage {
			res.Usage[i].StoreLoss = true
			res.Usage[i].ExhaustedUntil = req.Debits[i].Window.Expiry(res.At)
			res.Usage[i].RetryAt = res.Usage[i].ExhaustedUntil
			// and it keeps the mark, as a Redis store does
			if err := s.MemoryStore.Exhaust(ctx, &backend.ExhaustRequest{API: req.API, Owner: req.Owner, Budget: req.Debits[i].Budget,
				Until: res.Usage[i].ExhaustedUntil, Now: req.Now, StoreLoss: true}); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// TestStoreLossHook: a finding of lost state is counted, handed to the hook
// with every budget of the owner (the one the charge did not name is marked
// spent by the limiter), and described by an error wrapping ErrStoreLost.
func TestStoreLossHook(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	st := &lossStore{MemoryStore: NewMemoryStore()}
	l, err := New(st, "api", []Budget{
		{Name: "units", Limit: 100, Window: Sliding(time.Hour)},
		{Name: "search", Limit: 10, Window: Sliding(time.Minute)},
	}, WithClock(func() time.Time { return now }), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	var got []storeLoss
	l.loss.hook = func(_ context.Context, f storeLoss) { got = append(got, f) }
	cred := Credential{Secret: "s", Label: "k"}
	if _, err := l.Take(ctx, cred, Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	st.lose = true
	if _, err := l.Take(ctx, cred, Units("units", 1)); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Take that found a loss = %v, want refused", err)
	}
	if l.StoreLosses() != 1 || len(got) != 1 {
		t.Fatalf("StoreLosses %d, hook calls %d; want 1, 1", l.StoreLosses(), len(got))
	}
	f := got[0]
	if !f.OwnerWide || f.Trusted || len(f.Budgets) != 2 || !f.Until["search"].Equal(now.Add(time.Minute)) || !errors.Is(f.err(), ErrStoreLost) {
		t.Fatalf("finding %+v (%v); want owner-wide, both budgets, search spent for its minute", f, f.err())
	}
	if _, err := l.Take(ctx, cred, Units("search", 1)); !errors.Is(err, ErrExhausted) {
		t.Fatalf("search after the loss = %v, want refused (marked by the limiter)", err)
	}
	us, err := l.Status(ctx, cred)
	if err != nil || us[1].ExhaustedUntil.IsZero() {
		t.Fatalf("Status = %+v, %v; want search marked", us, err)
	}
}

// TestStoreLossUnderLeases: a lease's block take that finds a loss acts on
// it as a plain decision does: counted, reported, and under SpendOnLoss
// refused; under TrustStore the store is trusted and the block admitted.
// (Block takes once sent no policy and ignored what the store found.)
func TestStoreLossUnderLeases(t *testing.T) {
	for _, trust := range []bool{false, true} {
		t.Run(fmt.Sprintf("trust=%v", trust), func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
			st := &lossStore{MemoryStore: NewMemoryStore()}
			opts := []Option{WithClock(func() time.Time { return now }), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
				WithLeases(LeaseOptions{Block: 10, MaxTime: time.Second})}
			if trust {
				opts = append(opts, WithStoreLoss(TrustStore))
			}
			l, err := New(st, "api", []Budget{{Name: "units", Limit: 1000, Window: Daily(time.UTC)}}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			var got []storeLoss
			l.loss.hook = func(_ context.Context, f storeLoss) { got = append(got, f) }
			cred := Credential{Secret: "s", Label: "k"}
			if _, err := l.Take(ctx, cred, Units("units", 1)); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(ctx); err != nil { // the next charge takes a new block
				t.Fatal(err)
			}
			st.lose = true
			_, err = l.Take(ctx, cred, Units("units", 1))
			if trust && err != nil {
				t.Fatalf("Take that found a loss, trusting the store = %v, want admitted", err)
			}
			if !trust && !errors.Is(err, ErrExhausted) {
				t.Fatalf("Take that found a loss = %v, want refused", err)
			}
			if l.StoreLosses() != 1 || len(got) != 1 || got[0].Trusted != trust {
				t.Fatalf("StoreLosses %d, findings %+v; want 1 finding, trusted %v", l.StoreLosses(), got, trust)
			}
		})
	}
}

// TestStoreLossLogNamesTheOwner: the loss is logged under the owner's
// name when the credential has a named owner (it used to give the
// credential's label, sending an operator to the wrong owner), and under
// the credential's label when the credential is its own owner.
func TestStoreLossLogNamesTheOwner(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		cred Credential
		want string
	}{
		{Credential{Secret: "s1", Label: "hkey", Owner: "hproj"}, "owner=hproj"},
		{Credential{Secret: "s2", Label: "own-key"}, "owner=own-key"},
	} {
		var logs bytes.Buffer
		st := &lossStore{MemoryStore: NewMemoryStore()}
		l, err := New(st, "api", []Budget{{Name: "units", Limit: 100, Window: Sliding(time.Hour)}},
			WithClock(func() time.Time { return now }), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Take(ctx, c.cred, Units("units", 1)); err != nil {
			t.Fatal(err)
		}
		st.lose = true
		if _, err := l.Take(ctx, c.cred, Units("units", 1)); !errors.Is(err, ErrExhausted) {
			t.Fatalf("Take that found a loss = %v, want refused", err)
		}
		if !strings.Contains(logs.String(), "the store lost recorded usage") || !strings.Contains(logs.String(), " "+c.want+" ") {
			t.Fatalf("loss log for %+v:\n%s\nwant %s", c.cred, logs.String(), c.want)
		}
	}
}
