package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/redisstore"
)

var secret = quota.Credential{Secret: "AIzaSy-redisstore-test-secret-42", Label: "yt-key-1"}

func fingerprint(c quota.Credential) string {
	return quota.DefaultFingerprint(c.Secret)
}

func take(t *testing.T, l *quota.Limiter, cost int64) *quota.Reservation {
	t.Helper()
	r, err := l.Take(context.Background(), secret, quota.Units("units", cost))
	if err != nil {
		t.Fatalf("Take(%d): %v", cost, err)
	}
	return r
}

func refuse(t *testing.T, l *quota.Limiter, cost int64) *quota.ExhaustedError {
	t.Helper()
	r, err := l.Take(context.Background(), secret, quota.Units("units", cost))
	var ee *quota.ExhaustedError
	if !errors.As(err, &ee) {
		t.Fatalf("Take(%d) = %+v, %v; want *ExhaustedError", cost, r, err)
	}
	return ee
}

// countHook counts the commands (and pipelines) a client sends: round trips.
type countHook struct{ n, evalsha atomic.Int64 }

func (h *countHook) process(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
	h.n.Add(1)
	if strings.EqualFold(cmd.Name(), "evalsha") {
		h.evalsha.Add(1)
	}
	return next(ctx, cmd)
}
func (h *countHook) pipeline(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
	h.n.Add(1)
	return next(ctx, cmds)
}

// TestServerClockDailyDST takes on a daily America/Los_Angeles budget with
// no injected clock: the store's now is Redis TIME, moved with miniredis
// SetTime, across the 23-hour and 25-hour days of 2026. The test host's clock
// is far from those days, so the store must also learn Redis's clock.
func TestServerClockDailyDST(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		day   time.Time
		hours time.Duration
	}{
		{"spring-forward-23h", time.Date(2026, 3, 8, 0, 0, 0, 0, la), 23 * time.Hour},
		{"fall-back-25h", time.Date(2026, 11, 1, 0, 0, 0, 0, la), 25 * time.Hour},
		{"ordinary-24h", time.Date(2026, 6, 15, 0, 0, 0, 0, la), 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := redistest.Mini(t)
			st := redisstore.New(redistest.MiniClient(t, m))
			l, err := quota.New(st, "youtube", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Daily(la)}})
			if err != nil {
				t.Fatal(err)
			}
			next := time.Date(tc.day.Year(), tc.day.Month(), tc.day.Day()+1, 0, 0, 0, 0, la)
			if got := next.Sub(tc.day); got != tc.hours {
				t.Fatalf("setup: the day is %v long, want %v", got, tc.hours)
			}
			now := tc.day.Add(30 * time.Minute)
			m.SetTime(now)
			r := take(t, l, 4)
			if !r.At.Equal(now) || !r.Usage[0].Reset.Equal(next) || r.Usage[0].Used != 4 {
				t.Fatalf("reservation at %v: At %v Reset %v Used %d; want At %v Reset %v Used 4", now, r.At, r.Usage[0].Reset, r.Usage[0].Used, now, next)
			}
			logKey := "quota:{youtube/" + fingerprint(secret) + "}:log:units"
			if ttl, want := m.TTL(logKey), next.Sub(now)+backend.DailyKeep; ttl != want {
				t.Fatalf("TTL of %s = %v, want %v (until DailyKeep past the reset)", logKey, ttl, want)
			}

			now = tc.day.Add(tc.hours - time.Hour) // 23:00 local
			m.SetTime(now)
			take(t, l, 6)
			ee := refuse(t, l, 1)
			if !ee.RetryAt.Equal(next) || ee.RetryAfter != time.Hour || ee.Used != 10 {
				t.Fatalf("refusal at 23:00 = %+v; want RetryAt %v after 1h, used 10", ee, next)
			}
			m.SetTime(next.Add(-time.Microsecond))
			refuse(t, l, 1)
			m.SetTime(next)
			if r := take(t, l, 10); r.Usage[0].Used != 10 || !r.At.Equal(next) {
				t.Fatalf("after the reset: used %d at %v, want 10 at %v", r.Usage[0].Used, r.At, next)
			}
		})
	}
}

// TestServerClockSliding checks the Redis TIME path on a sliding window:
// exact RetryAfter, expiry, refund, and that the Go side needs one round
// trip per decision once it knows Redis's clock.
func TestServerClockSliding(t *testing.T) {
	ctx := context.Background()
	m := redistest.Mini(t)
	c := redistest.MiniClient(t, m)
	hook := &countHook{}
	c.AddHook(redistest.Hook{Process: hook.process, Pipeline: hook.pipeline})
	st := redisstore.New(c)
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2001, 2, 3, 4, 5, 6, 789000, time.UTC) // far from the host clock: sliding windows do not care
	m.SetTime(t0)
	r := take(t, l, 3)
	if !r.At.Equal(t0) || !r.Usage[0].Reset.Equal(t0.Add(time.Hour)) {
		t.Fatalf("reservation: At %v Reset %v, want %v and %v", r.At, r.Usage[0].Reset, t0, t0.Add(time.Hour))
	}
	m.SetTime(t0.Add(10 * time.Minute))
	before := hook.n.Load()
	take(t, l, 7)
	if n := hook.n.Load() - before; n != 1 {
		t.Fatalf("a decision took %d round trips, want 1", n)
	}
	ee := refuse(t, l, 4)
	if want := t0.Add(70 * time.Minute); !ee.RetryAt.Equal(want) || ee.RetryAfter != time.Hour {
		t.Fatalf("cost 4 needs the second entry to expire: RetryAt %v after %v, want %v after 1h", ee.RetryAt, ee.RetryAfter, want)
	}
	if ee := refuse(t, l, 3); !ee.RetryAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("cost 3: RetryAt %v, want %v", ee.RetryAt, t0.Add(time.Hour))
	}
	m.SetTime(t0.Add(time.Hour))
	r = take(t, l, 3)
	if r.Usage[0].Used != 10 {
		t.Fatalf("after the oldest entry expired: used %d, want 10", r.Usage[0].Used)
	}
	if err := l.Refund(ctx, r); err != nil {
		t.Fatal(err)
	}
	us, err := l.Status(ctx, secret)
	if err != nil || us[0].Used != 7 || !us[0].Reset.Equal(t0.Add(70*time.Minute)) {
		t.Fatalf("Status after refund = %+v, %v; want used 7, reset %v", us, err, t0.Add(70*time.Minute))
	}
}

// TestServerClockFarFromHost: with a daily window and Redis's clock days
// away from the host's, the first decision costs one extra script run (the
// script reports its now), and later ones one run each.
func TestServerClockFarFromHost(t *testing.T) {
	m := redistest.Mini(t)
	c := redistest.MiniClient(t, m)
	hook := &countHook{}
	c.AddHook(redistest.Hook{Process: hook.process, Pipeline: hook.pipeline})
	st := redisstore.New(c)
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Daily(tokyo)}})
	if err != nil {
		t.Fatal(err)
	}
	m.SetTime(time.Date(2001, 2, 3, 12, 0, 0, 0, tokyo))
	take(t, l, 1) // also defines the budgets and the credential
	before := hook.evalsha.Load()
	m.SetTime(time.Date(2001, 2, 3, 23, 59, 0, 0, tokyo))
	r := take(t, l, 1)
	if n := hook.evalsha.Load() - before; n != 1 {
		t.Fatalf("second decision ran %d scripts, want 1 (the skew is learned)", n)
	}
	if want := time.Date(2001, 2, 4, 0, 0, 0, 0, tokyo); r.Usage[0].Used != 2 || !r.Usage[0].Reset.Equal(want) {
		t.Fatalf("usage %+v; want used 2, reset %v", r.Usage[0], want)
	}
	// Jump two days further: Redis's clock is again outside the boundaries.
	m.SetTime(time.Date(2001, 2, 6, 1, 0, 0, 0, tokyo))
	if r := take(t, l, 10); r.Usage[0].Used != 10 {
		t.Fatalf("a new day: used %d, want 10", r.Usage[0].Used)
	}
}

// TestKeysExpire: every key of a credential carries its hash tag, expires
// no later than the window (twice a sliding window: its lifetime is renewed
// once a window; DailyKeep past the reset, a daily one: its entries are set
// aside for another zone's day), and is gone once that has passed.
func TestKeysExpire(t *testing.T) {
	ctx := context.Background()
	m := redistest.Mini(t)
	st := redisstore.New(redistest.MiniClient(t, m), redisstore.WithPrefix("app1:"))
	la, _ := time.LoadLocation("America/Los_Angeles")
	l, err := quota.New(st, "youtube", []quota.Budget{
		{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)},
		{Name: "daily", Limit: 100, Window: quota.Daily(la)},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 20, 0, 0, 0, la) // 4h before the LA reset
	m.SetTime(now)
	both := quota.Charge{Units: map[string]int64{"units": 5, "daily": 5}}
	if _, err := l.Take(ctx, secret, both); err != nil {
		t.Fatal(err)
	}
	if err := l.Exhaust(ctx, secret, "units", now.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	tag := redisstore.CredentialTag("youtube", fingerprint(secret))
	want := map[string]time.Duration{
		// a sliding log lives a tenth of its window past its newest entry
		// (room for a lease's held block, TakeRequest.Hold), doubled: its
		// lifetime is renewed once a window, not on every decision
		"app1:" + tag + ":log:units":  2 * (time.Hour + 6*time.Minute),
		"app1:" + tag + ":sum:units":  2 * (time.Hour + 6*time.Minute),
		"app1:" + tag + ":exh:units":  10 * time.Minute,
		"app1:" + tag + ":log:daily":  4*time.Hour + backend.DailyKeep,
		"app1:" + tag + ":sum:daily":  4*time.Hour + backend.DailyKeep,
		"app1:" + tag + ":keep:units": 2 * (time.Hour + 6*time.Minute),
		"app1:" + tag + ":keep:daily": 4*time.Hour + backend.DailyKeep,
		// the store-loss marker: twice the longest, extended once a window
		"app1:" + tag + ":mark": 8 * time.Hour,
		// the breakdown hash of the hour: kept an hour (the hour's end)
		// plus the longest of the budgets' windows (a daily one: 25h)
		"app1:" + tag + ":use:" + strconv.FormatInt(now.Unix(), 10): 26 * time.Hour,
		"app1:apis":            0,
		"app1:budgets:youtube": 0,
		"app1:creds:youtube":   0,
	}
	keys := m.Keys()
	if len(keys) != len(want) {
		t.Fatalf("keys = %q, want %d keys", keys, len(want))
	}
	slot := -1
	for _, k := range keys {
		ttl, ok := want[k]
		if !ok {
			t.Fatalf("unexpected key %q", k)
		}
		if got := m.TTL(k); got != ttl {
			t.Errorf("TTL of %s = %v, want %v", k, got, ttl)
		}
		if strings.Contains(k, tag) {
			if s := keySlot(k); slot >= 0 && s != slot {
				t.Errorf("key %s is in slot %d, others in %d", k, s, slot)
			} else {
				slot = s
			}
		}
	}
	m.FastForward(10 * time.Minute)
	if m.Exists("app1:" + tag + ":exh:units") {
		t.Fatal("exhausted-until key outlived its mark")
	}
	m.FastForward(2*time.Hour + 2*time.Minute)
	if m.Exists("app1:"+tag+":log:units") || m.Exists("app1:"+tag+":sum:units") || !m.Exists("app1:"+tag+":log:daily") {
		t.Fatalf("after 2h12m: keys %q; want the sliding budget's gone, the daily one's kept", m.Keys())
	}
	m.FastForward(time.Hour + 48*time.Minute)
	for _, k := range m.Keys() {
		if strings.Contains(k, tag) && !strings.HasSuffix(k, ":mark") && !strings.Contains(k, ":use:") && !strings.HasSuffix(k, ":daily") {
			t.Fatalf("after the daily reset key %s remains", k)
		}
	}
	m.FastForward(4 * time.Hour)
	if keys := m.Keys(); len(keys) != 7 || !strings.Contains(keys[6], ":use:") {
		t.Fatalf("after twice the longest window: keys %q; want the catalog's, the daily log's and the hour's breakdown hash", keys)
	}
	// Redis's clock moves with the keys: nothing is counted any more.
	m.SetTime(now.Add(4 * time.Hour))
	us, err := l.Status(ctx, secret)
	if err != nil || us[0].Used != 0 || us[1].Used != 0 {
		t.Fatalf("Status = %+v, %v; want nothing used", us, err)
	}
	m.FastForward(22 * time.Hour)
	for _, k := range m.Keys() {
		if strings.Contains(k, tag) {
			t.Fatalf("26h on, key %s remains", k)
		}
	}
}

// keySlot is Redis Cluster's key slot: CRC16 (XMODEM) of the hash tag, or
// of the whole key when it has none, mod 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
