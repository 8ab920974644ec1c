package humantime

import (
	"testing"
	"time"
)

func TestFormats(t *testing.T) {
	for _, c := range []struct {
		fn   func(time.Duration) string
		name string
		d    time.Duration
		want string
	}{
		{Compact, "Compact", 26*time.Hour + 10*time.Minute, "1d2h"},
		{Compact, "Compact", 48 * time.Hour, "2d"},
		{Compact, "Compact", 2*time.Hour + 5*time.Minute + 20*time.Second, "2h5m"},
		{Compact, "Compact", 3 * time.Hour, "3h"},
		{Compact, "Compact", 5*time.Minute + 30*time.Second, "5m30s"},
		{Compact, "Compact", 7 * time.Minute, "7m"},
		{Compact, "Compact", 42*time.Second + 400*time.Millisecond, "42s"},
		{Compact, "Compact", 250 * time.Millisecond, "250ms"},
		{Compact, "Compact", 0, "0s"},
		{Relative, "Relative", 2*time.Hour + 5*time.Minute, "in 2h5m"},
		{Relative, "Relative", -(3*time.Minute + 10*time.Second), "3m10s ago"},
		{Relative, "Relative", 900 * time.Millisecond, "now"},
		{Relative, "Relative", -900 * time.Millisecond, "now"},
		{Took, "Took", 1234567 * time.Nanosecond, "1ms"},
		{Took, "Took", 412 * time.Microsecond, "412µs"},
		{Took, "Took", 12345 * time.Millisecond, "12.3s"},
		{Took, "Took", 5*time.Minute + 30*time.Second, "5m30s"},
		{Took, "Took", -2 * time.Second, "-2s"},
	} {
		if got := c.fn(c.d); got != c.want {
			t.Errorf("%s(%v) = %q, want %q", c.name, c.d, got, c.want)
		}
	}
}
