package quota_test

import (
	"errors"
	"testing"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/storetest"
)

// FuzzParseWindow: any input parses to a valid window that round-trips, or
// fails with ErrInvalid; it never panics.
func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"sliding:24h", "90m", "daily:America/Los_Angeles", "daily:UTC", "daily:", "monthly:Europe/Paris", "monthly:", "monthly:Nowhere", "sliding:-1s", "weekly:x", ":", "sliding:1µs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := quota.ParseWindow(s)
		if err != nil {
			if !errors.Is(err, quota.ErrInvalid) {
				t.Fatalf("ParseWindow(%q) error %v does not wrap ErrInvalid", s, err)
			}
			return
		}
		back, err := quota.ParseWindow(w.String())
		if err != nil || back.String() != w.String() {
			t.Fatalf("ParseWindow(%q) = %v, which does not round-trip: %v, %v", s, w, back, err)
		}
	})
}

// FuzzParseReservationID: any input parses or fails with ErrInvalid.
func FuzzParseReservationID(f *testing.F) {
	f.Add("youtube/0123456789abcdef01234567/hoe8jmakg0.SB1PL72A1")
	f.Add("a/b/c.d")
	f.Add("youtube/0123456789abcdef01234567/.x")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := quota.ParseReservationID(s)
		if err != nil {
			if !errors.Is(err, quota.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if r.ID() != s || r.API == "" || r.Owner == "" || r.Credential != "" && r.Credential != r.Owner {
			t.Fatalf("ParseReservationID(%q) = %+v", s, r)
		}
	})
}

// FuzzLimiter drives a Limiter on a MemoryStore through the program the
// input encodes (storetest.Program): 1 to 12 budgets of mixed windows, and
// Take, Allow, Settle, Refund, Status, Adjust and Exhaust with any charge,
// units and credential, on a clock moved forward and back. No entry point
// may panic, an error must be of the kind its cause calls for, and usage
// must stay consistent. The corpus is in testdata/fuzz/FuzzLimiter.
func FuzzLimiter(f *testing.F) {
	for _, seed := range storetest.ProgramSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		storetest.Program(t, quota.NewMemoryStore(), "fuzz", data)
	})
}
