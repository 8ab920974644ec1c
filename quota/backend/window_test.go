package backend_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("zone %s: %v", name, err)
	}
	return loc
}

// TestMonthlyLengths: a monthly window in UTC spans its calendar month, 28
// to 31 days, February 29 days in leap years (2000, 2024) and 28 in others
// (1900 and 2100 are not leap years, 2026 neither).
func TestMonthlyLengths(t *testing.T) {
	w := backend.Monthly(time.UTC)
	for _, tc := range []struct {
		y    int
		m    time.Month
		days int
	}{
		{2026, time.January, 31}, {2026, time.February, 28}, {2026, time.April, 30},
		{2026, time.December, 31}, {2024, time.February, 29}, {2000, time.February, 29},
		{2100, time.February, 28}, {1900, time.February, 28}, {2025, time.November, 30},
	} {
		first := time.Date(tc.y, tc.m, 1, 0, 0, 0, 0, time.UTC)
		mid := first.Add(time.Duration(tc.days/2)*24*time.Hour + 7*time.Hour + 123*time.Microsecond)
		next := first.AddDate(0, 1, 0)
		if got := w.Start(mid); !got.Equal(first) {
			t.Errorf("%d-%02d: Start(%v) = %v, want %v", tc.y, tc.m, mid, got, first)
		}
		if got := w.NextReset(mid); !got.Equal(next) || got.Sub(first) != time.Duration(tc.days)*24*time.Hour {
			t.Errorf("%d-%02d: NextReset(%v) = %v (a month of %v), want %v (%d days)", tc.y, tc.m, mid, got, got.Sub(first), next, tc.days)
		}
		if got := w.Expiry(mid); !got.Equal(next) {
			t.Errorf("%d-%02d: Expiry(%v) = %v, want %v", tc.y, tc.m, mid, got, next)
		}
		// the month's first and last µs belong to it; the next µs does not
		last := next.Add(-time.Microsecond)
		if !w.Start(first).Equal(first) || !w.Start(last).Equal(first) || !w.Start(next).Equal(next) {
			t.Errorf("%d-%02d: Start at the edges: %v %v %v", tc.y, tc.m, w.Start(first), w.Start(last), w.Start(next))
		}
		if !w.Expiry(first).Equal(next) || !w.Expiry(last).Equal(next) || !w.Expiry(next).Equal(next.AddDate(0, 1, 0)) {
			t.Errorf("%d-%02d: Expiry at the edges: %v %v %v", tc.y, tc.m, w.Expiry(first), w.Expiry(last), w.Expiry(next))
		}
		b := w.Boundaries(mid)
		want := []time.Time{first.AddDate(0, -1, 0), first, next, next.AddDate(0, 1, 0)}
		if len(b) != 4 {
			t.Fatalf("Boundaries(%v) = %v", mid, b)
		}
		for i := range b {
			if !b[i].Equal(want[i]) {
				t.Errorf("%d-%02d: Boundaries(%v) = %v, want %v", tc.y, tc.m, mid, b, want)
				break
			}
		}
	}
}

// TestMonthlyAcrossDST: a month with a DST change is an hour (Lord Howe:
// half an hour) shorter or longer than its days, and resets at local
// midnight of the 1st, in the offset of that instant.
func TestMonthlyAcrossDST(t *testing.T) {
	for _, tc := range []struct {
		zone   string
		y      int
		m      time.Month
		length time.Duration
	}{
		{"Europe/Paris", 2026, time.March, 31*24*time.Hour - time.Hour},
		{"Europe/Paris", 2026, time.October, 31*24*time.Hour + time.Hour},
		{"Europe/Paris", 2026, time.July, 31 * 24 * time.Hour},
		{"America/Los_Angeles", 2026, time.March, 31*24*time.Hour - time.Hour},
		{"America/Los_Angeles", 2026, time.November, 30*24*time.Hour + time.Hour},
		{"Australia/Sydney", 2026, time.April, 30*24*time.Hour + time.Hour},
		{"Australia/Lord_Howe", 2026, time.October, 31*24*time.Hour - 30*time.Minute},
		{"Australia/Lord_Howe", 2026, time.April, 30*24*time.Hour + 30*time.Minute},
		{"Australia/Lord_Howe", 2024, time.February, 29 * 24 * time.Hour},
	} {
		loc := zone(t, tc.zone)
		w := backend.Monthly(loc)
		first := time.Date(tc.y, tc.m, 1, 0, 0, 0, 0, loc)
		next := time.Date(tc.y, tc.m+1, 1, 0, 0, 0, 0, loc)
		for _, now := range []time.Time{first, first.Add(15 * 24 * time.Hour), next.Add(-time.Microsecond)} {
			if got := w.Start(now); !got.Equal(first) {
				t.Errorf("%s %d-%02d: Start(%v) = %v, want %v", tc.zone, tc.y, tc.m, now, got, first)
			}
			if got := w.NextReset(now); !got.Equal(next) {
				t.Errorf("%s %d-%02d: NextReset(%v) = %v, want %v", tc.zone, tc.y, tc.m, now, got, next)
			}
		}
		if got := next.Sub(first); got != tc.length {
			t.Errorf("%s %d-%02d: the month lasts %v, want %v", tc.zone, tc.y, tc.m, got, tc.length)
		}
		if h, mi, _ := next.In(loc).Clock(); h != 0 || mi != 0 || next.In(loc).Day() != 1 {
			t.Errorf("%s %d-%02d: reset at %v, not local midnight of the 1st", tc.zone, tc.y, tc.m, next.In(loc))
		}
	}
}

// TestMonthlyMidnightSkipped: where a DST jump skips midnight of the 1st
// (America/Havana on 2012-04-01 and America/Asuncion on 2023-10-01 go from
// 23:59:59 to 01:00; time.Date gives 23:00 of the 31st, an instant of the
// old month), the month begins at the jump; where midnight of the 1st comes
// twice (Asia/Gaza on 2004-10-01 fell back from 01:00 to 00:00), it begins
// at the first.
func TestMonthlyMidnightSkipped(t *testing.T) {
	for _, tc := range []struct {
		zone  string
		first time.Time // the 1st, UTC
	}{
		{"America/Havana", time.Date(2012, 4, 1, 5, 0, 0, 0, time.UTC)},    // 01:00 CDT
		{"America/Asuncion", time.Date(2023, 10, 1, 4, 0, 0, 0, time.UTC)}, // 01:00 -03
		{"Asia/Amman", time.Date(2016, 3, 31, 22, 0, 0, 0, time.UTC)},      // 01:00 EEST
		{"Asia/Gaza", time.Date(2004, 9, 30, 21, 0, 0, 0, time.UTC)},       // the first 00:00, EEST
	} {
		loc := zone(t, tc.zone)
		w := backend.Monthly(loc)
		eve := tc.first.Add(-30 * time.Minute)
		if got := w.NextReset(eve); !got.Equal(tc.first) {
			t.Errorf("%s: NextReset(%v) = %v, want %v", tc.zone, eve.In(loc), got.In(loc), tc.first.In(loc))
		}
		if got := w.Expiry(eve); !got.Equal(tc.first) {
			t.Errorf("%s: Expiry(%v) = %v, want %v", tc.zone, eve.In(loc), got.In(loc), tc.first.In(loc))
		}
		for _, now := range []time.Time{tc.first, tc.first.Add(2 * time.Hour), tc.first.Add(10 * 24 * time.Hour)} {
			if got := w.Start(now); !got.Equal(tc.first) {
				t.Errorf("%s: Start(%v) = %v, want %v", tc.zone, now.In(loc), got.In(loc), tc.first.In(loc))
			}
		}
		if got := w.Start(eve); got.In(loc).Day() != 1 || !got.Before(eve) || eve.Sub(got) < 27*24*time.Hour {
			t.Errorf("%s: Start(%v) = %v, want the 1st of the month before", tc.zone, eve.In(loc), got.In(loc))
		}
		if d := tc.first.In(loc).Day(); d != 1 {
			t.Errorf("%s: %v is not the 1st", tc.zone, tc.first.In(loc))
		}
		if d := tc.first.Add(-time.Microsecond).In(loc).Day(); d == 1 {
			t.Errorf("%s: %v is the 1st already", tc.zone, tc.first.Add(-time.Microsecond).In(loc))
		}
		if b := w.Boundaries(eve); !b[2].Equal(tc.first) {
			t.Errorf("%s: Boundaries(%v) = %v; the third must be %v", tc.zone, eve, b, tc.first)
		}
	}
}

// TestMonthlyEveryMonth: in zones with odd DST rules, every month from 1990
// to 2040 begins on its 1st (the first µs whose local date is the 1st) and
// ends where the next begins; Start, Expiry and NextReset agree on it.
func TestMonthlyEveryMonth(t *testing.T) {
	for _, name := range []string{"UTC", "Europe/Paris", "America/Santiago", "America/Havana", "America/Asuncion",
		"Asia/Gaza", "Asia/Amman", "Australia/Lord_Howe", "Pacific/Apia", "Asia/Kolkata", "America/St_Johns"} {
		loc := zone(t, name)
		w := backend.Monthly(loc)
		now := time.Date(1990, 1, 15, 12, 0, 0, 0, loc)
		for range 50 * 12 {
			s, r := w.Start(now), w.NextReset(now)
			if !s.After(now.AddDate(0, -2, 0)) || !r.After(now) || s.After(now) {
				t.Fatalf("%s: Start(%v) = %v, NextReset = %v: not around now", name, now, s, r)
			}
			for _, b := range []time.Time{s, r} {
				if b.In(loc).Day() != 1 || b.Add(-time.Microsecond).In(loc).Day() == 1 {
					t.Fatalf("%s: %v (around %v) is not the first µs of a 1st", name, b.In(loc), now)
				}
			}
			if got := w.Start(r.Add(-time.Microsecond)); !got.Equal(s) {
				t.Fatalf("%s: Start of the month's last µs %v = %v, want %v", name, r.Add(-time.Microsecond), got, s)
			}
			if got := w.Start(r); !got.Equal(r) {
				t.Fatalf("%s: Start(%v) = %v: the reset begins the next month", name, r, got)
			}
			if got := w.Expiry(s); !got.Equal(r) {
				t.Fatalf("%s: Expiry(%v) = %v, want %v", name, s, got, r)
			}
			if d := r.Sub(s); d < 28*24*time.Hour-2*time.Hour || d > 31*24*time.Hour+2*time.Hour {
				t.Fatalf("%s: the month from %v lasts %v", name, s, d)
			}
			now = r.Add(13 * 24 * time.Hour)
		}
	}
}

// TestMonthlyKinds: a monthly window is a calendar window, not a daily one,
// with its own text form, zone and kept spans.
func TestMonthlyKinds(t *testing.T) {
	paris := zone(t, "Europe/Paris")
	m, d := backend.Monthly(paris), backend.Daily(paris)
	if !m.IsMonthly() || m.IsDaily() || !m.IsCalendar() || m.Location() != paris || m.Duration() != 0 {
		t.Errorf("Monthly: IsMonthly %v IsDaily %v IsCalendar %v Location %v Duration %v",
			m.IsMonthly(), m.IsDaily(), m.IsCalendar(), m.Location(), m.Duration())
	}
	if d.IsMonthly() || !d.IsCalendar() || backend.Sliding(time.Hour).IsCalendar() {
		t.Error("Daily is not monthly and is calendar; Sliding is neither")
	}
	if m.Equal(d) || d.Equal(m) || !m.Equal(backend.Monthly(zone(t, "Europe/Paris"))) || m.Equal(backend.Monthly(time.UTC)) {
		t.Error("Equal: monthly and daily windows of one zone differ; monthly windows compare by zone")
	}
	if m.String() != "monthly:Europe/Paris" {
		t.Errorf("String = %q", m.String())
	}
	if _, err := backend.Monthly(nil).MarshalText(); !errors.Is(err, backend.ErrInvalid) || !strings.Contains(err.Error(), "monthly window without a time zone") {
		t.Errorf("Monthly(nil).MarshalText: %v", err)
	}
	if got := backend.AsideKeep(m); got != backend.MonthlyKeep || backend.MonthlyKeep != 31*24*time.Hour+2*time.Hour {
		t.Errorf("AsideKeep(monthly) = %v", got)
	}
	if backend.AsideKeep(d) != backend.DailyKeep || backend.AsideKeep(backend.Sliding(time.Hour)) != 0 {
		t.Error("AsideKeep of daily and sliding windows")
	}
	if got := backend.BreakdownKeep(m); got != 745*time.Hour {
		t.Errorf("BreakdownKeep(monthly) = %v, want 745h (31 days and a DST hour)", got)
	}
	now := time.Date(2026, 5, 20, 10, 0, 0, 0, time.UTC)
	if got := backend.KeptSince(m, now); !got.Equal(now.Add(-backend.MonthlyKeep + time.Microsecond)) {
		t.Errorf("KeptSince(monthly) = %v", got)
	}
	if got := backend.KeptUntil(m, now); !got.Equal(now.Add(backend.MonthlyKeep)) {
		t.Errorf("KeptUntil(monthly) = %v, want MonthlyKeep after the entry", got)
	}
}

// TestMonthlyRetain: a log kept for a monthly window and redefined keeps a
// month of entries (Sliding(MonthlyKeep)) unless the new window is a
// longer sliding one; a daily log made monthly keeps a month from then on.
func TestMonthlyRetain(t *testing.T) {
	m, d := backend.Monthly(time.UTC), backend.Daily(time.UTC)
	long := backend.Sliding(40 * 24 * time.Hour)
	for _, tc := range []struct {
		kept, w, want backend.Window
	}{
		{m, m, m},
		{backend.Window{}, m, m},
		{m, backend.Sliding(time.Hour), backend.Sliding(backend.MonthlyKeep)},
		{m, d, backend.Sliding(backend.MonthlyKeep)},
		{d, m, backend.Sliding(backend.MonthlyKeep)},
		{m, backend.Monthly(zone(t, "Asia/Tokyo")), backend.Sliding(backend.MonthlyKeep)},
		{m, long, long},
		{long, m, backend.Sliding(40 * 24 * time.Hour)},
	} {
		if got := backend.Retain(tc.kept, tc.w); !got.Equal(tc.want) {
			t.Errorf("Retain(%v, %v) = %v, want %v", tc.kept, tc.w, got, tc.want)
		}
	}
	now := time.Date(2026, 5, 3, 10, 0, 0, 0, time.UTC)
	if got, want := backend.PruneBefore(m, d, now), now.Add(-backend.MonthlyKeep+time.Microsecond); !got.Equal(want) {
		t.Errorf("PruneBefore(monthly kept, daily) = %v, want %v", got, want)
	}
	if got, want := backend.PruneBefore(m, m, now), time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("PruneBefore(monthly, monthly) = %v, want %v", got, want)
	}
}

// TestMonthlyHold: a held entry of a monthly window sits no later than the
// month's last µs; a hold is not bounded by a tenth of a window, as a
// sliding one's is.
func TestMonthlyHold(t *testing.T) {
	m := backend.Monthly(time.UTC)
	now := time.Date(2026, 4, 30, 23, 0, 0, 0, time.UTC)
	if got, want := backend.HeldAt(m, now, 2*time.Hour), time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).Add(-time.Microsecond); !got.Equal(want) {
		t.Errorf("HeldAt past the month's end = %v, want %v", got, want)
	}
	if got := backend.HeldAt(m, now, 30*time.Minute); !got.Equal(now.Add(30 * time.Minute)) {
		t.Errorf("HeldAt within the month = %v", got)
	}
	debits := []backend.Debit{{Budget: backend.Budget{Name: "m", Limit: 10, Window: m}, Cost: 1}}
	if err := backend.CheckHold(72*time.Hour, debits); err != nil {
		t.Errorf("CheckHold of a monthly debit: %v", err)
	}
}

// TestDailyMidnightTwice: where clocks go back over midnight (Asia/Gaza on
// 2004-10-01, 01:00 EEST back to 00:00 EET), the day begins at the first
// midnight, so the hour between the two belongs to the new day (as the
// storetest model counts it), for a daily window as for a monthly one.
func TestDailyMidnightTwice(t *testing.T) {
	gaza := zone(t, "Asia/Gaza")
	w := backend.Daily(gaza)
	first := time.Date(2004, 9, 30, 21, 0, 0, 0, time.UTC) // 00:00 EEST
	for _, now := range []time.Time{first, first.Add(30 * time.Minute), first.Add(90 * time.Minute), first.Add(20 * time.Hour)} {
		if got := w.Start(now); !got.Equal(first) {
			t.Errorf("Start(%v) = %v, want %v", now.In(gaza), got.In(gaza), first.In(gaza))
		}
	}
	if got := w.NextReset(first.Add(-time.Hour)); !got.Equal(first) {
		t.Errorf("NextReset before = %v, want %v", got.In(gaza), first.In(gaza))
	}
	if got := w.NextReset(first); got.Sub(first) != 25*time.Hour {
		t.Errorf("NextReset(%v) = %v: the day lasts %v, want 25h", first.In(gaza), got.In(gaza), got.Sub(first))
	}
}
