package quota

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestStoreLossUnderOverride: after a loss, a budget the charge did not
// name is marked spent for the window in force: an operator's override,
// not the program's definition.
func TestStoreLossUnderOverride(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	st := &lossStore{MemoryStore: NewMemoryStore()}
	over := Budget{Name: "search", Limit: 10, Window: Sliding(time.Hour)}
	if err := SetOverride(ctx, st, "api", over, now); err != nil {
		t.Fatal(err)
	}
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
	if len(got) != 1 || !got[0].Until["search"].Equal(now.Add(time.Hour)) {
		t.Fatalf("findings %+v; want search spent for the override's hour", got)
	}
	now = now.Add(2 * time.Minute) // the program's minute is over, the override's hour is not
	var ee *ExhaustedError
	if _, err := l.Take(ctx, cred, Units("search", 1)); !errors.As(err, &ee) || !ee.RetryAt.Equal(now.Add(58*time.Minute)) {
		t.Fatalf("search after the loss = %v, want refused until the override's hour ends", err)
	}
}
