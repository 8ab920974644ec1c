package quota_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotactl/quotactl/quota"
)

// eventLog is an Observer that keeps every event.
type eventLog struct {
	mu     sync.Mutex
	events []quota.Event
}

func (r *eventLog) Observe(e quota.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *eventLog) take() []quota.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// line describes an event in one line, without its latency.
func line(e quota.Event) string {
	s := fmt.Sprintf("%s %s owner=%q label=%q method=%q job=%q", e.Kind, e.Time.UTC().Format("15:04:05"), e.Owner, e.Label, e.Method, e.Job)
	if e.Outcome != "" {
		s += " " + string(e.Outcome)
	}
	if e.Budget != "" {
		s += " budget=" + e.Budget
	}
	if e.Percent != 0 {
		s += fmt.Sprintf(" %d%%", e.Percent)
	}
	if e.RetryAfter != 0 {
		s += " retry=" + e.RetryAfter.String()
	}
	if !e.Until.IsZero() {
		s += " until=" + e.Until.UTC().Format("15:04:05")
	}
	for _, u := range e.Usage {
		s += fmt.Sprintf(" [%s cost=%d used=%d/%d]", u.Budget, u.Cost, u.Used, u.Limit)
	}
	if e.Err != nil {
		s += " err"
	}
	return s
}

func TestObserverEvents(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := t0
	rec := &eventLog{}
	l, err := quota.New(quota.NewMemoryStore(), "yt", []quota.Budget{
		{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)},
		{Name: "search", Limit: 100, Window: quota.Daily(time.UTC)},
	}, quota.WithClock(func() time.Time { return now }), quota.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "s3cret-key", Label: "yt-key-1", Owner: "project-a"}
	job := quota.ContextWithJob(ctx, "trending")
	r1, err := l.Take(job, key, quota.Charge{Method: "search.list", Units: map[string]int64{"units": 5, "search": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); err != nil { // the 50% crossing is recorded off the decision path
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if _, err := l.Take(ctx, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 5}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if _, err := l.Take(ctx, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 1}}); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("third take: %v, want ErrExhausted", err)
	}
	if err := l.Refund(job, r1); err != nil {
		t.Fatal(err)
	}
	if err := l.Exhaust(ctx, key, "search", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Bad input is no decision: no event.
	if _, err := l.Take(ctx, key, quota.Units("nope", 1)); !errors.Is(err, quota.ErrInvalid) {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range rec.take() {
		if strings.Contains(fmt.Sprint(e), "s3cret") {
			t.Fatalf("event holds the secret: %+v", e)
		}
		if e.Kind == quota.EventDecision && e.Latency <= 0 {
			t.Errorf("decision without latency: %s", line(e))
		}
		got = append(got, line(e))
	}
	want := []string{
		`decision 10:00:00 owner="project-a" label="yt-key-1" method="search.list" job="trending" admitted [units cost=5 used=5/10] [search cost=1 used=1/100]`,
		`threshold 10:00:00 owner="project-a" label="yt-key-1" method="search.list" job="trending" budget=units 50% until=11:00:00 [units cost=5 used=5/10]`,
		`decision 10:01:00 owner="project-a" label="yt-key-1" method="videos.list" job="" admitted [units cost=5 used=10/10]`,
		`threshold 10:01:00 owner="project-a" label="yt-key-1" method="videos.list" job="" budget=units 80% until=11:01:00 [units cost=5 used=10/10]`,
		`threshold 10:01:00 owner="project-a" label="yt-key-1" method="videos.list" job="" budget=units 95% until=11:01:00 [units cost=5 used=10/10]`,
		`threshold 10:01:00 owner="project-a" label="yt-key-1" method="videos.list" job="" budget=units 100% until=11:01:00 [units cost=5 used=10/10]`,
		`decision 10:02:00 owner="project-a" label="yt-key-1" method="videos.list" job="" refused budget=units retry=58m0s [units cost=1 used=10/10]`,
		`refund 10:02:00 owner="project-a" label="yt-key-1" method="search.list" job="trending" [units cost=5 used=0/10] [search cost=1 used=0/100]`,
		`exhaust 10:02:00 owner="project-a" label="yt-key-1" method="" job="" budget=search until=11:02:00`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if l.DroppedEvents() != 0 {
		t.Fatalf("DroppedEvents = %d", l.DroppedEvents())
	}
	// Back over 80% in the same window (the refund took it to 50%): the
	// crossing was reported once this window, so not again.
	now = now.Add(time.Minute)
	before := len(rec.take())
	if _, err := l.Take(ctx, key, quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 4}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range rec.take()[before:] {
		if e.Kind == quota.EventThreshold {
			t.Fatalf("threshold reported twice in a window: %s", line(e))
		}
	}
}

// TestObserverStoreErrors: an unreachable store is reported as a store
// error and a decision that failed, or went through unmetered.
func TestObserverStoreErrors(t *testing.T) {
	ctx := context.Background()
	st := &flakyStore{MemoryStore: quota.NewMemoryStore()}
	rec := &eventLog{}
	budgets := []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}}
	l, err := quota.New(st, "yt", budgets, quota.FailOpen(1), quota.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "s3cret", Label: "k"}
	st.down.Store(true)
	if _, err := l.Take(ctx, key, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx, key, quota.Units("units", 2)); !errors.Is(err, quota.ErrStoreUnavailable) {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range rec.take() {
		k := e.Kind.String()
		if e.Outcome != "" {
			k += ":" + string(e.Outcome)
		}
		if e.Kind == quota.EventStoreError && !errors.Is(e.Err, quota.ErrStoreUnavailable) {
			t.Fatalf("store error event without the cause: %v", e.Err)
		}
		kinds = append(kinds, k)
	}
	if want := []string{"store_error", "decision:unmetered", "store_error", "decision:failed"}; !slices.Equal(kinds, want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
}

// blocker is an Observer that blocks until released.
type blocker struct {
	release chan struct{}
	mu      sync.Mutex
	seen    int
}

func (b *blocker) Observe(quota.Event) {
	<-b.release
	b.mu.Lock()
	b.seen++
	b.mu.Unlock()
}

// TestStuckObserverNeverBlocksTake: an observer that never returns does not
// stall decisions; the queue holds WithEventQueue events and the rest are
// dropped and counted.
func TestStuckObserverNeverBlocksTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := &blocker{release: make(chan struct{})}
		l, err := quota.New(quota.NewMemoryStore(), "yt", []quota.Budget{{Name: "units", Limit: 1000, Window: quota.Sliding(time.Hour)}},
			quota.WithObserver(b), quota.WithEventQueue(4), quota.WithThresholds())
		if err != nil {
			t.Fatal(err)
		}
		key := quota.Credential{Secret: "s", Label: "k"}
		if _, err := l.Take(ctx, key, quota.Units("units", 1)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the delivering goroutine is now stuck in Observe
		for i := range 99 {
			if _, err := l.Take(ctx, key, quota.Units("units", 1)); err != nil {
				t.Fatalf("take %d: %v", i, err)
			}
		}
		if n := l.DroppedEvents(); n != 95 {
			t.Fatalf("DroppedEvents = %d, want 95 (1 in delivery, 4 queued)", n)
		}
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := l.Flush(fctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Flush with a stuck observer = %v, want the deadline", err)
		}
		close(b.release)
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if b.seen != 5 {
			t.Fatalf("delivered %d events, want 5", b.seen)
		}
	})
}

// TestThresholdsValidated: a threshold out of 1..100 is an error naming it.
func TestThresholdsValidated(t *testing.T) {
	if _, err := quota.New(quota.NewMemoryStore(), "yt", []quota.Budget{{Name: "units", Limit: 1, Window: quota.Sliding(time.Hour)}}, quota.WithThresholds(0)); !errors.Is(err, quota.ErrInvalid) {
		t.Fatalf("WithThresholds(0): %v, want ErrInvalid", err)
	}
}

// TestTransportObserver: a Transport's observer sees the decisions and
// refunds of its own requests, next to the limiter's observers, and not
// those of other callers.
func TestTransportObserver(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	lim := &eventLog{}
	tr := &eventLog{}
	l, err := quota.New(quota.NewMemoryStore(), "yt", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.WithObserver(lim), quota.WithThresholds())
	if err != nil {
		t.Fatal(err)
	}
	pricer := quota.PricerFunc(func(*http.Request) (quota.Charge, error) {
		return quota.Charge{Method: "videos.list", Units: map[string]int64{"units": 1}}, nil
	})
	client := &http.Client{Transport: quota.NewTransport(l, pricer, quota.WithTransportObserver(tr),
		quota.WithCredential(quota.Credential{Secret: "s3cret", Label: "k"}))}
	resp, err := client.Get(srv.URL + "/videos")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// A request that never reaches the upstream is refunded.
	srv.Close()
	if _, err := client.Get(srv.URL + "/videos"); err == nil {
		t.Fatal("request to a closed server succeeded")
	}
	if _, err := l.Take(ctx, quota.Credential{Secret: "s3cret", Label: "k"}, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	kinds := func(r *eventLog) string {
		var k []string
		for _, e := range r.take() {
			k = append(k, e.Kind.String()+":"+e.Method)
		}
		return strings.Join(k, " ")
	}
	if got, want := kinds(tr), "decision:videos.list decision:videos.list refund:videos.list"; got != want {
		t.Fatalf("transport observer saw %q, want %q", got, want)
	}
	if got, want := kinds(lim), "decision:videos.list decision:videos.list refund:videos.list decision:"; got != want {
		t.Fatalf("limiter observer saw %q, want %q", got, want)
	}
}
