package redisstore

import "strconv"

// GeneralOnly makes every Take of s run take.lua's general path, skipping
// fast.lua: tests compare the two on the same states.
func GeneralOnly(s *Store) { s.general = true }

// TakeSHA is the SHA1 of the take script (fast.lua + lib.lua + take.lua).
var TakeSHA = takeScript.Hash()

// OwnBucket sets the marker field of s's own admissions to w:B, so that a
// test's stores do not share one by chance.
func OwnBucket(s *Store, b int) { s.own = "w:" + strconv.Itoa(b) }

// PipelineQueued reports whether n decisions of s wait for a lane
// (WithPipelining).
func PipelineQueued(s *Store, n int) bool {
	s.pipe.mu.Lock()
	defer s.pipe.mu.Unlock()
	return len(s.pipe.queue) == n
}
