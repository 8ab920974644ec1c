package quota_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// hungStore is a MemoryStore whose Take and Usage, once hung, answers only when the
// caller's context ends, with ErrStoreUnavailable wrapping ctx.Err(), as
// redisstore and sqlitestore do for a server or lock that does not answer.
type hungStore struct {
	*quota.MemoryStore
	hung atomic.Bool
}

func (s *hungStore) Take(ctx context.Context, req *backend.TakeRequest) (*backend.TakeResult, error) {
	if s.hung.Load() {
		<-ctx.Done()
		return nil, fmt.Errorf("hung: take: %w: i/o timeout (%w)", quota.ErrStoreUnavailable, ctx.Err())
	}
	return s.MemoryStore.Take(ctx, req)
}

func (s *hungStore) Usage(ctx context.Context, req *backend.UsageRequest) ([]quota.Usage, error) {
	if s.hung.Load() {
		<-ctx.Done()
		return nil, fmt.Errorf("hung: usage: %w: i/o timeout (%w)", quota.ErrStoreUnavailable, ctx.Err())
	}
	return s.MemoryStore.Usage(ctx, req)
}

// failOpenLimiter returns a limiter over st that fails open for charges of
// up to 5 units, logging into the buffer returned.
func failOpenLimiter(t *testing.T, st quota.Store) (*quota.Limiter, *testkit.Buffer) {
	t.Helper()
	logs := &testkit.Buffer{}
	l, err := quota.New(st, "yt", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.FailOpen(5), quota.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	return l, logs
}

// A caller that cancels its context while the store is asked (a job
// stopping on SIGTERM) gets an error wrapping context.Canceled, not
// ErrStoreUnavailable: no failure policy, nothing unmetered, no warning.
// A deadline that passes while the store is asked is the store not
// answering in time: FailOpen applies, as for a store that is down.
func TestTakeCancelledWhileStoreAsked(t *testing.T) {
	st := &hungStore{MemoryStore: quota.NewMemoryStore()}
	l, logs := failOpenLimiter(t, st)
	cred := quota.Credential{Secret: "s3cret-cancel", Label: "k"}
	if _, err := l.Take(context.Background(), cred, quota.Units("units", 1)); err != nil {
		t.Fatal(err)
	}
	st.hung.Store(true)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	r, err := l.Take(ctx, cred, quota.Units("units", 1))
	if r != nil || !errors.Is(err, context.Canceled) || errors.Is(err, quota.ErrStoreUnavailable) {
		t.Fatalf("Take cancelled while the store is asked = %+v, %v; want an error wrapping context.Canceled, not ErrStoreUnavailable", r, err)
	}
	if n := l.Unmetered(); n != 0 || logs.String() != "" {
		t.Fatalf("a cancelled caller: Unmetered() = %d, logged %q; want 0 and nothing", n, logs.String())
	}

	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer dcancel()
	r, err = l.Take(dctx, cred, quota.Units("units", 1))
	if err != nil || r == nil || !r.Unmetered {
		t.Fatalf("Take whose deadline passed while the store hung = %+v, %v; want admitted unmetered (FailOpen)", r, err)
	}
	if n := l.Unmetered(); n != 1 || !strings.Contains(logs.String(), "store unavailable, charge admitted unmetered") {
		t.Fatalf("Unmetered() = %d (want 1), logs %q", n, logs.String())
	}
}
