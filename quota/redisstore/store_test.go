package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestLostKeys: when eviction (or an operator) removes one key of a
// budget, the store trusts the log: a lost sum is recounted from the log,
// and a sum that claims more than the whole log holds is corrected when the
// log cannot cover a refusal. A lost log is lost usage: its sum counts for
// nothing, and the next decision finds the loss (the owner's marker says
// the log must hold an entry) and counts the budget as spent for a window.
func TestLostKeys(t *testing.T) {
	ctx := context.Background()
	m := redistest.Mini(t)
	st := redisstore.New(redistest.MiniClient(t, m))
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}},
		quota.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	tag := "quota:" + redisstore.CredentialTag("api", fingerprint(secret))
	logKey, sumKey := tag+":log:units", tag+":sum:units"
	status := func() int64 {
		t.Helper()
		us, err := l.Status(ctx, secret)
		if err != nil {
			t.Fatal(err)
		}
		return us[0].Used
	}
	take(t, l, 30)
	take(t, l, 20)

	m.Del(sumKey)
	if got := status(); got != 50 {
		t.Fatalf("after losing the sum: used %d, want 50 recounted from the log", got)
	}
	if v, _ := m.Get(sumKey); v != "50" || m.TTL(sumKey) != m.TTL(logKey) {
		t.Fatalf("recounted sum %q with TTL %v, want 50 with the log's TTL %v", v, m.TTL(sumKey), m.TTL(logKey))
	}

	if err := m.Set(sumKey, "150"); err != nil { // more than the limit, and than the log
		t.Fatal(err)
	}
	if r := take(t, l, 40); r.Usage[0].Used != 90 {
		t.Fatalf("a stale sum of 150 with 50 logged: charge of 40 gave used %d, want 90", r.Usage[0].Used)
	}

	m.Del(logKey)
	if got := status(); got != 0 {
		t.Fatalf("after losing the log: used %d, want 0", got)
	}
	if m.Exists(sumKey) {
		t.Fatal("the orphaned sum key was kept")
	}
	if e := refuse(t, l, 1); !e.RetryAt.Equal(t0.Add(time.Hour)) || l.StoreLosses() != 1 {
		t.Fatalf("after losing the log: refusal %+v, %d losses; want spent for one window, 1 loss", e, l.StoreLosses())
	}
	if err := l.Adjust(ctx, secret, "units", 90); err != nil { // the true usage
		t.Fatal(err)
	}
	take(t, l, 10)
	refuse(t, l, 1)
	if l.StoreLosses() != 1 {
		t.Fatalf("%d losses after Adjust, want the one", l.StoreLosses())
	}
}

// TestBadRequests: the store itself rejects what its scripts cannot
// handle, with ErrInvalid naming it, before any I/O.
func TestBadRequests(t *testing.T) {
	ctx := context.Background()
	st := redisstore.New(redistest.MiniClient(t, redistest.Mini(t)))
	units := quota.Budget{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}
	fp := fingerprint(secret)
	for name, req := range map[string]*backend.TakeRequest{
		"empty credential":   {API: "api", Nonce: "n1", Debits: []backend.Debit{{Budget: units, Cost: 1}}},
		"brace":              {API: "api", Owner: "a}b", Nonce: "n1", Debits: []backend.Debit{{Budget: units, Cost: 1}}},
		"bad api":            {API: "a/b", Owner: fp, Nonce: "n1", Debits: []backend.Debit{{Budget: units, Cost: 1}}},
		"nonce with colon":   {API: "api", Owner: fp, Nonce: "n:1", Debits: []backend.Debit{{Budget: units, Cost: 1}}},
		"empty nonce":        {API: "api", Owner: fp, Debits: []backend.Debit{{Budget: units, Cost: 1}}},
		"no debits":          {API: "api", Owner: fp, Nonce: "n1"},
		"zero cost":          {API: "api", Owner: fp, Nonce: "n1", Debits: []backend.Debit{{Budget: units, Cost: 0}}},
		"cost over limit":    {API: "api", Owner: fp, Nonce: "n1", Debits: []backend.Debit{{Budget: units, Cost: 101}}},
		"limit over 2^53":    {API: "api", Owner: fp, Nonce: "n1", Debits: []backend.Debit{{Budget: quota.Budget{Name: "u", Limit: 1 << 53, Window: quota.Sliding(time.Hour)}, Cost: 1}}},
		"zero window":        {API: "api", Owner: fp, Nonce: "n1", Debits: []backend.Debit{{Budget: quota.Budget{Name: "u", Limit: 5}, Cost: 1}}},
		"bad budget name":    {API: "api", Owner: fp, Nonce: "n1", Debits: []backend.Debit{{Budget: quota.Budget{Name: "a b", Limit: 5, Window: quota.Sliding(time.Hour)}, Cost: 1}}},
		"daily without zone": {API: "api", Owner: fp, Nonce: "n1", Debits: []backend.Debit{{Budget: quota.Budget{Name: "u", Limit: 5, Window: quota.Daily(nil)}, Cost: 1}}},
	} {
		if _, err := st.Take(ctx, req); !errors.Is(err, quota.ErrInvalid) || errors.Is(err, quota.ErrStoreUnavailable) {
			t.Errorf("%s: Take = %v, want ErrInvalid", name, err)
		}
	}
	big := quota.Budget{Name: "units", Limit: 1<<53 - 1, Window: quota.Sliding(time.Hour)}
	res, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: fp, Nonce: "n1", Now: t0, Debits: []backend.Debit{{Budget: big, Cost: 1<<53 - 2}}})
	if err != nil || !res.OK || res.Usage[0].Used != 1<<53-2 {
		t.Fatalf("the largest exact limit: %+v, %v", res, err)
	}
	res, err = st.Take(ctx, &backend.TakeRequest{API: "api", Owner: fp, Nonce: "n2", Now: t0, Debits: []backend.Debit{{Budget: big, Cost: 2}}})
	if err != nil || res.OK || res.Usage[0].Used != 1<<53-2 || !res.Usage[0].RetryAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("one unit over the largest exact limit: %+v, %v", res, err)
	}
}
