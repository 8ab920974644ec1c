package quota_test

import (
	"errors"
	"testing"

	"github.com/quotactl/quotactl/quota"
)

// FuzzParseWindow: any input parses to a valid window that round-trips, or
// fails with ErrInvalid; it never panics.
func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"sliding:24h", "90m", "daily:America/Los_Angeles", "daily:UTC", "daily:", "sliding:-1s", "weekly:x", ":", "sliding:1µs"} {
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
