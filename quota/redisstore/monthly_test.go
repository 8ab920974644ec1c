package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestMonthlyKeysLive: a monthly log's keys live MonthlyKeep past the
// month's reset (its entries are set aside for another zone's month), its
// breakdown hash a month and a DST hour past its hour, and all go once
// that has passed; the month's first decision sets last month's entries
// aside, kept MonthlyKeep after their instant.
func TestMonthlyKeysLive(t *testing.T) {
	ctx := context.Background()
	m := redistest.Mini(t)
	st := redisstore.New(redistest.MiniClient(t, m), redisstore.WithPrefix("app1:"))
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	l, err := quota.New(st, "api", []quota.Budget{{Name: "month", Limit: 100, Window: quota.Monthly(paris)}})
	if err != nil {
		t.Fatal(err)
	}
	next := time.Date(2026, 12, 1, 0, 0, 0, 0, paris)
	now := next.Add(-4 * time.Hour)
	m.SetTime(now)
	if _, err := l.Take(ctx, secret, quota.Units("month", 60)); err != nil {
		t.Fatal(err)
	}
	tag := redisstore.CredentialTag("api", fingerprint(secret))
	p := "app1:" + tag + ":"
	for k, want := range map[string]time.Duration{
		p + "log:month":  4*time.Hour + backend.MonthlyKeep,
		p + "sum:month":  4*time.Hour + backend.MonthlyKeep,
		p + "keep:month": 4*time.Hour + backend.MonthlyKeep,
		p + "mark":       8 * time.Hour, // twice until the entry's expiry, the reset
		p + "use:" + strconv.FormatInt(now.Unix(), 10): time.Hour + backend.BreakdownKeep(quota.Monthly(paris)),
	} {
		if got := m.TTL(k); got != want {
			t.Errorf("TTL of %s = %v, want %v", k, got, want)
		}
	}
	// 20 days into December: the keys are there, the month counts nothing
	m.FastForward(4*time.Hour + 20*24*time.Hour)
	m.SetTime(next.Add(20 * 24 * time.Hour))
	if !m.Exists(p+"log:month") || !m.Exists(p+"sum:month") {
		t.Fatalf("20 days after the reset: keys %q; want the log kept MonthlyKeep past it", m.Keys())
	}
	r, err := l.Take(ctx, secret, quota.Units("month", 100))
	if err != nil || r.Usage[0].Used != 100 {
		t.Fatalf("December: %+v, %v; want 100 admitted", r, err)
	}
	// the decision set November's entry aside, for MonthlyKeep after it
	left := now.Add(backend.MonthlyKeep).Sub(next.Add(20 * 24 * time.Hour))
	if got := m.TTL(p + "old:month"); got != left {
		t.Errorf("TTL of the set-aside entries = %v, want %v (MonthlyKeep after the entry)", got, left)
	}
	// past MonthlyKeep after December's reset, nothing of the credential
	// is left but the breakdown hash of December's decision
	m.FastForward(backend.MonthlyKeep + 11*24*time.Hour)
	for _, k := range m.Keys() {
		if strings.Contains(k, tag) && !strings.Contains(k, ":use:") {
			t.Errorf("MonthlyKeep past January's reset, key %s remains", k)
		}
	}
}

// TestMonthlyServerClockFarFromHost: with a monthly window and Redis's
// clock years away from the host's, the store learns the skew and picks
// the month of Redis's own now, and again once that now is months on.
func TestMonthlyServerClockFarFromHost(t *testing.T) {
	m := redistest.Mini(t)
	st := redisstore.New(redistest.MiniClient(t, m))
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 10, Window: quota.Monthly(tokyo)}})
	if err != nil {
		t.Fatal(err)
	}
	m.SetTime(time.Date(2001, 2, 3, 12, 0, 0, 0, tokyo))
	take(t, l, 4)
	m.SetTime(time.Date(2001, 2, 28, 23, 59, 0, 0, tokyo))
	r := take(t, l, 6)
	if want := time.Date(2001, 3, 1, 0, 0, 0, 0, tokyo); r.Usage[0].Used != 10 || !r.Usage[0].Reset.Equal(want) {
		t.Fatalf("usage %+v; want used 10, reset %v", r.Usage[0], want)
	}
	m.SetTime(time.Date(2001, 7, 15, 1, 0, 0, 0, tokyo))
	r = take(t, l, 10)
	if want := time.Date(2001, 8, 1, 0, 0, 0, 0, tokyo); r.Usage[0].Used != 10 || !r.Usage[0].Reset.Equal(want) {
		t.Fatalf("July: usage %+v; want used 10, reset %v", r.Usage[0], want)
	}
}
