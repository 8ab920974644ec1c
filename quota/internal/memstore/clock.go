package memstore

import (
	"sync/atomic"
	"time"
)

// clockEvery is how long a HostClock goes without reading the wall clock.
const clockEvery = 100 * time.Millisecond

// HostClock reads the host's wall clock at half the cost of time.Now, which
// reads both the wall and the monotonic clocks: it keeps the last reading of
// both, and adds the monotonic time since to the wall time then. It reads
// the wall clock again every clockEvery, so a step of the wall clock (set
// by hand, or by NTP at boot) shows within clockEvery; a slew moves both
// clocks alike. Safe for concurrent use; the zero value is ready.
type HostClock struct{ last atomic.Pointer[clockReading] }

// clockReading is one reading of time.Now, with its instant as whole µs
// since the epoch and the ns beyond.
type clockReading struct {
	t       time.Time
	us, sub int64
}

// nowUS returns the host's time in µs since the epoch.
func (c *HostClock) NowUS() int64 {
	if r := c.last.Load(); r != nil {
		if d := time.Since(r.t); d >= 0 && d < clockEvery { // the monotonic clock alone
			return r.us + (r.sub+int64(d))/int64(time.Microsecond)
		}
	}
	t := time.Now()
	r := &clockReading{t: t, us: t.UnixMicro(), sub: int64(t.Nanosecond()) % int64(time.Microsecond)}
	c.last.Store(r)
	return r.us
}
