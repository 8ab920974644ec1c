package storetest

import (
	"go/parser"
	"slices"
	"testing"
	"time"
)

// TestModelDayStart checks the model's local days against instants known
// apart: 23- and 25-hour days of DST changes, and days whose midnight a
// DST jump skips (they begin at the jump, 01:00 local).
func TestModelDayStart(t *testing.T) {
	utc := func(y, m, d, h int) time.Time { return time.Date(y, time.Month(m), d, h, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		zone       string
		at         time.Time // an instant of the day
		start, end time.Time
	}{
		{"America/Los_Angeles", utc(2026, 3, 8, 12), utc(2026, 3, 8, 8), utc(2026, 3, 9, 7)},    // 23h
		{"America/Los_Angeles", utc(2026, 11, 1, 12), utc(2026, 11, 1, 7), utc(2026, 11, 2, 8)}, // 25h
		{"Europe/London", utc(2026, 3, 29, 12), utc(2026, 3, 29, 0), utc(2026, 3, 29, 23)},      // 23h
		{"Europe/London", utc(2026, 10, 25, 12), utc(2026, 10, 24, 23), utc(2026, 10, 26, 0)},   // 25h
		{"Asia/Tokyo", utc(2026, 6, 30, 14), utc(2026, 6, 29, 15), utc(2026, 6, 30, 15)},        // JST 23:00
		{"UTC", utc(2026, 12, 31, 23), utc(2026, 12, 31, 0), utc(2027, 1, 1, 0)},                //
		{"America/Santiago", utc(2026, 9, 6, 12), utc(2026, 9, 6, 4), utc(2026, 9, 7, 3)},       // begins at the jump
		{"America/Havana", utc(2026, 3, 8, 12), utc(2026, 3, 8, 5), utc(2026, 3, 9, 4)},         // begins at the jump
		{"America/Santiago", utc(2026, 9, 6, 3), utc(2026, 9, 5, 4), utc(2026, 9, 6, 4)},        // the eve ends at the jump
		{"America/Los_Angeles", utc(2026, 3, 9, 6), utc(2026, 3, 8, 8), utc(2026, 3, 9, 7)},     // 23:00 PDT
		{"America/Los_Angeles", utc(2026, 11, 2, 7), utc(2026, 11, 1, 7), utc(2026, 11, 2, 8)},  // 23:00 PST
		{"Europe/London", utc(2026, 10, 25, 0).Add(-time.Microsecond), utc(2026, 10, 24, 23), utc(2026, 10, 26, 0)},
	} {
		loc, err := time.LoadLocation(tc.zone)
		if err != nil {
			t.Fatal(err)
		}
		b := modelBudget{loc: loc}
		if got := b.start(tc.at); !got.Equal(tc.start) {
			t.Errorf("%s at %v: day starts %v, want %v", tc.zone, tc.at, got.UTC(), tc.start)
		}
		if got := b.expiry(tc.at); !got.Equal(tc.end) {
			t.Errorf("%s at %v: day ends %v, want %v", tc.zone, tc.at, got.UTC(), tc.end)
		}
		if got := b.start(tc.start); !got.Equal(tc.start) {
			t.Errorf("%s: the day's first instant %v starts the day %v", tc.zone, tc.start, got.UTC())
		}
		if got := b.expiry(tc.end.Add(-time.Microsecond)); !got.Equal(tc.end) {
			t.Errorf("%s: the day's last µs ends at %v, want %v", tc.zone, got.UTC(), tc.end)
		}
	}
}

// TestModelMonthStart checks the model's local months against instants
// known apart: months of 28 to 31 days, a leap February, months with a DST
// change, and months whose 1st's midnight a DST jump skips (they begin at
// the jump) or gives twice (at the first).
func TestModelMonthStart(t *testing.T) {
	utc := func(y, m, d, h int) time.Time { return time.Date(y, time.Month(m), d, h, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		zone       string
		at         time.Time // an instant of the month
		start, end time.Time
	}{
		{"UTC", utc(2026, 2, 14, 5), utc(2026, 2, 1, 0), utc(2026, 3, 1, 0)},                                             // 28 days
		{"UTC", utc(2024, 2, 29, 23), utc(2024, 2, 1, 0), utc(2024, 3, 1, 0)},                                            // 29 days
		{"UTC", utc(2026, 4, 30, 23), utc(2026, 4, 1, 0), utc(2026, 5, 1, 0)},                                            // 30 days
		{"UTC", utc(2026, 12, 31, 23), utc(2026, 12, 1, 0), utc(2027, 1, 1, 0)},                                          // the year's end
		{"Europe/Paris", utc(2026, 3, 29, 12), utc(2026, 2, 28, 23), utc(2026, 3, 31, 22)},                               // CET to CEST
		{"Europe/Paris", utc(2026, 10, 31, 22), utc(2026, 9, 30, 22), utc(2026, 10, 31, 23)},                             // CEST to CET
		{"Europe/Paris", utc(2026, 3, 31, 22), utc(2026, 3, 31, 22), utc(2026, 4, 30, 22)},                               // April's first µs
		{"America/Asuncion", utc(2023, 10, 1, 3), utc(2023, 9, 1, 4), utc(2023, 10, 1, 4)},                               // ends at the jump
		{"America/Asuncion", utc(2023, 10, 15, 0), utc(2023, 10, 1, 4), utc(2023, 11, 1, 3)},                             // begins at the jump
		{"America/Havana", utc(2012, 4, 1, 5), utc(2012, 4, 1, 5), utc(2012, 5, 1, 4)},                                   // begins at the jump
		{"Asia/Gaza", utc(2004, 9, 30, 21).Add(30 * time.Minute), utc(2004, 9, 30, 21), utc(2004, 10, 31, 22)},           // midnight twice: the first
		{"Australia/Lord_Howe", utc(2026, 10, 10, 0), utc(2026, 9, 30, 13).Add(30 * time.Minute), utc(2026, 10, 31, 13)}, // +10:30 to +11
	} {
		loc, err := time.LoadLocation(tc.zone)
		if err != nil {
			t.Fatal(err)
		}
		b := modelBudget{loc: loc, month: true}
		if got := b.start(tc.at); !got.Equal(tc.start) {
			t.Errorf("%s at %v: month starts %v, want %v", tc.zone, tc.at, got.UTC(), tc.start)
		}
		if got := b.expiry(tc.at); !got.Equal(tc.end) {
			t.Errorf("%s at %v: month ends %v, want %v", tc.zone, tc.at, got.UTC(), tc.end)
		}
		if got := b.start(tc.start); !got.Equal(tc.start) {
			t.Errorf("%s: the month's first instant %v starts the month %v", tc.zone, tc.start, got.UTC())
		}
		if got := b.expiry(tc.end.Add(-time.Microsecond)); !got.Equal(tc.end) {
			t.Errorf("%s: the month's last µs ends at %v, want %v", tc.zone, got.UTC(), tc.end)
		}
	}
}

// TestModelBackFloor checks the step-back rule: the clock steps back no
// further than the latest instant at or before the high-water mark at which
// an entry expires, a mark ends or a day begins.
func TestModelBackFloor(t *testing.T) {
	mb, _, err := modelBudgets()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) // LA 02:00, London 10:00, Tokyo 19:00
	la := t0.Add(-2 * time.Hour)                         // the last midnight: Los Angeles's
	m := newModel(mb, 2)
	m.take(0, []modelDebit{{0, 1}}, t0, 1) // s1m: expires at t0+1m
	m.at(t0.Add(30 * time.Second))
	if got, want := m.backFloor(), la; !got.Equal(want) {
		t.Fatalf("floor %v, want %v (the LA midnight; nothing has expired yet)", got, want)
	}
	m.at(t0.Add(90 * time.Second))
	if got, want := m.backFloor(), t0.Add(time.Minute); !got.Equal(want) {
		t.Fatalf("floor %v, want %v (the s1m entry's expiry)", got, want)
	}
	m.exhaust(1, 2, t0.Add(80*time.Second), t0.Add(70*time.Second))
	if got, want := m.backFloor(), t0.Add(80*time.Second); !got.Equal(want) {
		t.Fatalf("floor %v, want %v (the mark's end)", got, want)
	}
	m.settle(1, map[int]int64{0: 0}, t0.Add(90*time.Second)) // out of its window: not found
	m.adjust(1, 2, 0, t0.Add(90*time.Second))                // the mark goes
	if got, want := m.backFloor(), t0.Add(time.Minute); !got.Equal(want) {
		t.Fatalf("floor %v, want %v (the mark cleared; the entry's expiry)", got, want)
	}
	m.adjust(0, 0, 0, t0.Add(90*time.Second)) // the entry goes
	if got, want := m.backFloor(), la; !got.Equal(want) {
		t.Fatalf("floor %v, want %v (nothing left but the day)", got, want)
	}
}

// TestModelShrink: delta debugging finds the two operations a failure
// needs among many.
func TestModelShrink(t *testing.T) {
	var c ModelCase
	for i := range 300 {
		c.Ops = append(c.Ops, ModelOp{Kind: OpForward, D: time.Duration(i+1) * time.Second})
	}
	fails := func(k ModelCase) bool {
		return slices.ContainsFunc(k.Ops, func(op ModelOp) bool { return op.D == 17*time.Second }) &&
			slices.ContainsFunc(k.Ops, func(op ModelOp) bool { return op.D == 230*time.Second })
	}
	got := shrinkModelCase(c, fails, 1000)
	if len(got.Ops) != 2 || got.Ops[0].D != 17*time.Second || got.Ops[1].D != 230*time.Second {
		t.Fatalf("shrunk to %v", got.Ops)
	}
}

// TestModelCaseString: a generated run prints as a Go expression.
func TestModelCaseString(t *testing.T) {
	mb, _, err := modelBudgets()
	if err != nil {
		t.Fatal(err)
	}
	c := genModelCase(mb, 3, 300, 0)
	for _, s := range []string{c.String(), annotate(c)} {
		if _, err := parser.ParseExpr(s); err != nil {
			t.Fatalf("%v:\n%s", err, s)
		}
	}
	if got := durationLiteral(-(90*time.Second + 3*time.Microsecond + 5)); got != "-(1*time.Minute + 30*time.Second + 3*time.Microsecond + 5*time.Nanosecond)" {
		t.Fatalf("durationLiteral: %s", got)
	}
}
