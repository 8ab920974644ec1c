package redisstore

// GeneralOnly makes every Take of s run take.lua's general path, skipping
// fast.lua: tests compare the two on the same states.
func GeneralOnly(s *Store) { s.general = true }

// TakeSHA is the SHA1 of the take script (fast.lua + lib.lua + take.lua).
var TakeSHA = takeScript.Hash()
