package quota

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// TestStoreLossEvents: a Take that finds the store lost the owner's writes
// reports one EventStoreLoss per affected budget, its error wrapping
// ErrStoreLost.
func TestStoreLossEvents(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	st := &lossStore{MemoryStore: NewMemoryStore()}
	var mu sync.Mutex
	var losses []Event
	l, err := New(st, "api", []Budget{
		{Name: "units", Limit: 100, Window: Sliding(time.Hour)},
		{Name: "search", Limit: 10, Window: Sliding(time.Minute)},
	}, WithClock(func() time.Time { return now }), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		WithObserver(ObserverFunc(func(e Event) {
			if e.Kind == EventStoreLoss {
				mu.Lock()
				losses = append(losses, e)
				mu.Unlock()
			}
		})))
	if err != nil {
		t.Fatal(err)
	}
	cred := Credential{Secret: "s", Label: "k", Owner: "proj"}
	if _, err := l.Take(ctx, cred, Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	st.lose = true
	if _, err := l.Take(ctx, cred, Units("units", 1)); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Take that found a loss = %v, want refused", err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(losses) != 2 || losses[0].Budget != "units" || losses[1].Budget != "search" {
		t.Fatalf("store-loss events %+v; want units then search", losses)
	}
	for _, e := range losses {
		if !errors.Is(e.Err, ErrStoreLost) || e.Owner != "proj" || e.Label != "k" || e.API != "api" {
			t.Fatalf("event %+v (%v); want api, owner proj, label k, an error wrapping ErrStoreLost", e, e.Err)
		}
	}
}
