package sqlitestore

import "time"

// SetClock replaces s's host clock (what a request without Now decides
// at) with f.
func SetClock(s *Store, f func() time.Time) { s.clock = f }
