package storetest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
)

// cancelledTake: a Take whose caller's context is done (cancelled, or past
// its deadline) is the caller stopping, not a store outage: it returns an
// error wrapping ctx.Err() and not ErrStoreUnavailable, admits nothing
// (not from a lease either), and a limiter that fails open neither admits
// it unmetered, counts it (Unmetered), logs it, nor reports a store error
// or a decision to its observers. For a credential the store has not seen
// yet and for one it has, with and without leases.
func (s suite) cancelledTake(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	for _, leases := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "leases"}[leases], func(t *testing.T) {
			st := s.store(t)
			clock := NewClock(T0)
			logs := &testkit.Buffer{}
			obs := &events{}
			opts := []quota.Option{quota.WithClock(clock.Now), quota.FailOpen(5),
				quota.WithLogger(slog.New(slog.NewTextHandler(logs, nil))), quota.WithObserver(obs)}
			if leases {
				opts = append(opts, quota.WithLeases(quota.LeaseOptions{Block: 10}))
			}
			b := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
			l, err := quota.New(st, "api", []quota.Budget{b}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close(context.Background())
			fresh := quota.Credential{Secret: "AIzaSy-never-seen-0123456789", Label: "fresh"}
			for _, c := range []struct {
				name string
				ctx  context.Context
				want error
			}{{"cancelled", cancelled, context.Canceled}, {"expired", expired, context.DeadlineExceeded}} {
				r, err := l.Take(c.ctx, fresh, quota.Units("units", 1))
				if r != nil || !errors.Is(err, c.want) || errors.Is(err, quota.ErrStoreUnavailable) {
					t.Errorf("%s Take, new credential = %+v, %v; want no reservation and an error wrapping %v, not ErrStoreUnavailable", c.name, r, err, c.want)
				}
			}
			mustTake(t, l, key, quota.Units("units", 1)) // the store knows key now; with leases, a lease holds units
			before := used(t, l, key, "units")
			for _, c := range []struct {
				name string
				ctx  context.Context
				want error
			}{{"cancelled", cancelled, context.Canceled}, {"expired", expired, context.DeadlineExceeded}} {
				r, err := l.Take(c.ctx, key, quota.Units("units", 1))
				if r != nil || !errors.Is(err, c.want) || errors.Is(err, quota.ErrStoreUnavailable) {
					t.Errorf("%s Take, known credential = %+v, %v; want no reservation and an error wrapping %v, not ErrStoreUnavailable", c.name, r, err, c.want)
				}
				if _, err := l.Wait(c.ctx, key, quota.Units("units", 1)); !errors.Is(err, c.want) || errors.Is(err, quota.ErrStoreUnavailable) {
					t.Errorf("%s Wait = %v; want an error wrapping %v, not ErrStoreUnavailable", c.name, err, c.want)
				}
			}
			if after := used(t, l, key, "units"); after != before {
				t.Errorf("used %d after the stopped Takes, %d before: a stopped caller was charged", after, before)
			}
			if n := l.Unmetered(); n != 0 {
				t.Errorf("Unmetered() = %d, want 0: a stopped caller is no store outage", n)
			}
			if err := l.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, e := range obs.take() {
				if e.Kind == quota.EventStoreError || e.Outcome == quota.OutcomeUnmetered || e.Outcome == quota.OutcomeFailed {
					t.Errorf("observer saw %v %s (%v) for a stopped caller", e.Kind, e.Outcome, e.Err)
				}
			}
			if logs.String() != "" {
				t.Errorf("logged for a stopped caller:\n%s", logs.String())
			}
			// The caller's next Take, under a live context, is metered.
			if r := mustTake(t, l, key, quota.Units("units", 1)); r.Unmetered {
				t.Errorf("a live Take after the stopped ones went unmetered")
			}
		})
	}
}

// events records what an Observer is told.
type events struct {
	mu sync.Mutex
	es []quota.Event
}

func (o *events) Observe(e quota.Event) {
	o.mu.Lock()
	o.es = append(o.es, e)
	o.mu.Unlock()
}

func (o *events) take() []quota.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]quota.Event(nil), o.es...)
}
