package quotactl_test

import "time"

// t0 is the fixed instant the reliability tests pin their limiters' clocks
// to: under a fixed clock nothing leaves the window, so used only grows.
var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return t0 }
