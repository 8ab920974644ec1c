package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// TestMemoryDailySetAsideBounded: a daily log sets the entries its day
// ends aside for DailyKeep, and no longer: charged every 10 minutes for
// five days, it never holds more than a day's entries and DailyKeep's
// worth of set-aside ones; idle past DailyKeep, a sweep drops it.
func TestMemoryDailySetAsideBounded(t *testing.T) {
	ctx := context.Background()
	st := New()
	b := backend.Budget{Name: "units", Limit: 1 << 40, Window: backend.Daily(time.UTC)}
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	const every = 10 * time.Minute
	most := int(24*time.Hour/every) + int(backend.DailyKeep/every) + 1
	var lg *memLog
	for i := range 5 * 24 * 6 {
		now := t0.Add(time.Duration(i) * every)
		req := &backend.TakeRequest{API: "api", Owner: "o", Nonce: "n", Now: now, Debits: []backend.Debit{{Budget: b, Cost: 1}}}
		res, err := st.Take(ctx, req)
		if err != nil || !res.OK {
			t.Fatalf("take at %v: %v, %v", now, res, err)
		}
		lg = st.logs[logKey{"api", "o", "units"}]
		if lg.n+lg.old > most {
			t.Fatalf("at %v the log holds %d entries and %d set aside; want at most %d", now, lg.n, lg.old, most)
		}
		if lg.old > 0 && lg.aside(0).at < now.Add(-backend.DailyKeep).UnixMicro() {
			t.Fatalf("at %v an entry of %v is still set aside", now, time.UnixMicro(lg.aside(0).at))
		}
		if want := int64(now.Sub(t0.Truncate(24*time.Hour))%(24*time.Hour)/every) + 1; res.Usage[0].Used != want {
			t.Fatalf("at %v used %d, want %d", now, res.Usage[0].Used, want)
		}
	}
	if lg.old == 0 {
		t.Fatal("no entry set aside")
	}
	st.mu.Lock()
	st.sweep(t0.Add(5*24*time.Hour + backend.DailyKeep).UnixMicro())
	_, ok := st.logs[logKey{"api", "o", "units"}]
	st.mu.Unlock()
	if ok {
		t.Fatal("an idle daily log outlived DailyKeep")
	}
}
