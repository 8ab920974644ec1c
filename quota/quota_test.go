package quota_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

func TestWindowParseAndString(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{"sliding:24h", "sliding:24h0m0s", false},
		{"90m", "sliding:1h30m0s", false},
		{"daily:America/Los_Angeles", "daily:America/Los_Angeles", false},
		{"daily:UTC", "daily:UTC", false},
		{"daily:", "", true},
		{"daily:Nowhere/Atlantis", "", true},
		{"monthly:Europe/Paris", "monthly:Europe/Paris", false},
		{" monthly:UTC ", "monthly:UTC", false},
		{"monthly:", "", true},
		{"monthly:Nowhere/Atlantis", "", true},
		{"Monthly:UTC", "", true},
		{"sliding:0s", "", true},
		{"sliding:-1h", "", true},
		{"weekly:1", "", true},
		{"", "", true},
	} {
		w, err := quota.ParseWindow(tc.in)
		if tc.err {
			if !errors.Is(err, quota.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.in)) {
				t.Errorf("ParseWindow(%q) = %v, %v; want an ErrInvalid naming the input", tc.in, w, err)
			}
			continue
		}
		if err != nil || w.String() != tc.want {
			t.Errorf("ParseWindow(%q) = %v, %v; want %s", tc.in, w, err, tc.want)
		}
		var back quota.Window
		if b, _ := w.MarshalText(); back.UnmarshalText(b) != nil || back.String() != w.String() {
			t.Errorf("text round trip of %v failed", w)
		}
	}
}

func TestDailyWindowAcrossDST(t *testing.T) {
	la, _ := time.LoadLocation("America/Los_Angeles")
	w := quota.Daily(la)
	for _, tc := range []struct {
		now       time.Time
		start     time.Time
		reset     time.Time
		dayLength time.Duration
	}{
		{time.Date(2026, 3, 8, 12, 0, 0, 0, la), time.Date(2026, 3, 8, 0, 0, 0, 0, la), time.Date(2026, 3, 9, 0, 0, 0, 0, la), 23 * time.Hour},
		{time.Date(2026, 11, 1, 1, 30, 0, 0, la), time.Date(2026, 11, 1, 0, 0, 0, 0, la), time.Date(2026, 11, 2, 0, 0, 0, 0, la), 25 * time.Hour},
		{time.Date(2026, 11, 22, 23, 59, 59, 0, la), time.Date(2026, 11, 22, 0, 0, 0, 0, la), time.Date(2026, 11, 23, 0, 0, 0, 0, la), 24 * time.Hour},
	} {
		if got := w.Start(tc.now); !got.Equal(tc.start) {
			t.Errorf("Start(%v) = %v, want %v", tc.now, got, tc.start)
		}
		if got := w.NextReset(tc.now); !got.Equal(tc.reset) || got.Sub(tc.start) != tc.dayLength {
			t.Errorf("NextReset(%v) = %v (day of %v), want %v (%v)", tc.now, got, got.Sub(tc.start), tc.reset, tc.dayLength)
		}
		if got := w.Expiry(tc.now); !got.Equal(tc.reset) {
			t.Errorf("Expiry(%v) = %v, want %v", tc.now, got, tc.reset)
		}
		b := w.Boundaries(tc.now)
		if len(b) != 4 || !b[1].Equal(tc.start) || !b[2].Equal(tc.reset) || !b[0].Before(b[1]) || !b[2].Before(b[3]) {
			t.Errorf("Boundaries(%v) = %v", tc.now, b)
		}
	}
	s := quota.Sliding(time.Hour)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if !s.Start(now).Equal(now.Add(-time.Hour+time.Microsecond)) || !s.Expiry(now).Equal(now.Add(time.Hour)) || !s.NextReset(now).IsZero() {
		t.Errorf("sliding window bounds wrong")
	}
}

// TestCredentialNeverPrinted formats a credential every way a careless
// caller might and checks the secret is in none of them.
func TestCredentialNeverPrinted(t *testing.T) {
	const secret = "AIzaSyD-THIS-IS-A-SECRET-KEY-123"
	c := quota.Credential{Secret: secret, Label: "yt-key-1"}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "cred", c)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "cred", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), logs.String(), quota.Credential{Secret: secret}.String()} {
		if strings.Contains(s, secret) || strings.Contains(s, "SECRET") {
			t.Fatalf("secret printed: %s", s)
		}
	}
	fp := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), secret)
	if len(fp) != quota.FingerprintLen || strings.Contains(fp, secret) || fp == quota.Fingerprint([]byte("other key"), secret) {
		t.Fatalf("fingerprint %q: wrong length, holds the secret, or ignores the key", fp)
	}
	// Errors name the label, never the secret.
	clock := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	st := quota.NewMemoryStore()
	l, _ := quota.New(st, "yt", []quota.Budget{{Name: "units", Limit: 1, Window: quota.Sliding(time.Hour)}}, quota.WithClock(clock))
	_, _ = l.Take(context.Background(), c, quota.Units("units", 1))
	_, err := l.Take(context.Background(), c, quota.Units("units", 1))
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "yt-key-1") {
		t.Fatalf("exhausted error = %v", err)
	}
	apis, _ := st.List(context.Background())
	fp = quota.DefaultFingerprint(secret)
	if fmt.Sprint(apis) != fmt.Sprintf("[{yt [{units 1 sliding:1h0m0s }] [{%s yt-key-1 %s}]}]", fp, fp) {
		t.Fatalf("stored catalog = %v", apis)
	}
}

// flakyStore is a MemoryStore whose connection can be cut, to exercise the
// limiter's failure policy.
type flakyStore struct {
	*quota.MemoryStore
	down atomic.Bool
}

func (f *flakyStore) Take(ctx context.Context, req *backend.TakeRequest) (*backend.TakeResult, error) {
	if f.down.Load() {
		return nil, fmt.Errorf("flaky: take: %w: dial tcp 127.0.0.1:6379: connection refused", quota.ErrStoreUnavailable)
	}
	return f.MemoryStore.Take(ctx, req)
}

func TestFailurePolicy(t *testing.T) {
	ctx := context.Background()
	budgets := []quota.Budget{{Name: "units", Limit: 1000, Window: quota.Sliding(time.Hour)}}
	cred := quota.Credential{Secret: "s3cret", Label: "k"}

	st := &flakyStore{MemoryStore: quota.NewMemoryStore()}
	closed, _ := quota.New(st, "yt", budgets)
	st.down.Store(true)
	if _, err := closed.Take(ctx, cred, quota.Units("units", 1)); !errors.Is(err, quota.ErrStoreUnavailable) {
		t.Fatalf("fail closed: %v, want ErrStoreUnavailable", err)
	}

	var logs bytes.Buffer
	open, _ := quota.New(st, "yt", budgets, quota.FailOpen(5), quota.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	for range 3 {
		r, err := open.Take(ctx, cred, quota.Units("units", 5))
		if err != nil || !r.Unmetered || r.ID() != "" {
			t.Fatalf("fail open at the threshold: %+v, %v", r, err)
		}
		if err := open.Refund(ctx, r); err != nil {
			t.Fatalf("refund of an unmetered reservation: %v", err)
		}
	}
	if _, err := open.Take(ctx, cred, quota.Units("units", 6)); !errors.Is(err, quota.ErrStoreUnavailable) {
		t.Fatalf("fail open above the threshold: %v, want ErrStoreUnavailable", err)
	}
	if n := open.Unmetered(); n != 3 {
		t.Fatalf("Unmetered() = %d, want 3", n)
	}
	if got := strings.Count(logs.String(), "admitted unmetered"); got != 3 || strings.Contains(logs.String(), "s3cret") {
		t.Fatalf("logged %d unmetered decisions (want 3), or logged the secret:\n%s", got, logs.String())
	}
	st.down.Store(false)
	r, err := open.Take(ctx, cred, quota.Units("units", 6))
	if err != nil || r.Unmetered || r.Usage[0].Used != 6 {
		t.Fatalf("after recovery: %+v, %v", r, err)
	}
	// Exhaustion is an answer, not an outage: never admitted unmetered.
	if _, err := open.Take(ctx, cred, quota.Units("units", 995)); !errors.Is(err, quota.ErrExhausted) {
		t.Fatalf("exhausted while failing open: %v", err)
	}
}

func TestObserverAndAllocation(t *testing.T) {
	clock := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	l, err := quota.New(quota.NewMemoryStore(), "yt", []quota.Budget{
		{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)},
		{Name: "backfill", Limit: 20, Window: quota.Sliding(time.Hour)},
	}, quota.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	cred := quota.Credential{Secret: "k"}
	var spent int64
	ctx := quota.ContextWithChargeFunc(context.Background(), func(r *quota.Reservation, refund bool) {
		for _, u := range r.Usage {
			if u.Budget == "units" {
				if refund {
					spent -= u.Cost
				} else {
					spent += u.Cost
				}
			}
		}
	})
	bctx := quota.ContextWithAllocation(ctx, "backfill", "units")
	r1, err := l.Take(bctx, cred, quota.Units("units", 15))
	if err != nil || r1.Remaining("backfill") != 5 || r1.Remaining("units") != 85 {
		t.Fatalf("allocated take: %+v, %v", r1, err)
	}
	// The allocation refuses, and the shared budget is not charged either.
	var ee *quota.ExhaustedError
	if _, err := l.Take(bctx, cred, quota.Units("units", 6)); !errors.As(err, &ee) || ee.Budget != "backfill" {
		t.Fatalf("over the allocation: %v, want backfill exhausted", err)
	}
	// Others still use the shared budget.
	if _, err := l.Take(ctx, cred, quota.Units("units", 80)); err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, r1); err != nil {
		t.Fatal(err)
	}
	if spent != 80 {
		t.Fatalf("observer counted %d units, want 80 (15 + 80 - 15)", spent)
	}
	st, _ := l.Status(ctx, cred)
	if st[0].Used != 80 || st[1].Used != 0 {
		t.Fatalf("status = %+v", st)
	}
}

func TestReservationIDRoundTrip(t *testing.T) {
	l, _ := quota.New(quota.NewMemoryStore(), "youtube", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}})
	r, err := l.Take(context.Background(), quota.Credential{Secret: "k"}, quota.Units("units", 1))
	if err != nil {
		t.Fatal(err)
	}
	p, err := quota.ParseReservationID(r.ID())
	if err != nil || p.API != "youtube" || p.Credential != r.Credential || !p.At.Equal(r.At) {
		t.Fatalf("ParseReservationID(%q) = %+v, %v", r.ID(), p, err)
	}
	for _, bad := range []string{"", "a/b", "youtube/z z/1.x", "youtube/-zz/1.x", "you tube/" + r.Credential + "/1.x", "youtube/" + r.Credential + "/nonce", "youtube/" + r.Credential + "/-1.x"} {
		if _, err := quota.ParseReservationID(bad); !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("ParseReservationID(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}
