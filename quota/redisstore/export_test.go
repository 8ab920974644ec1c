package redisstore

import (
	"strconv"
	"sync/atomic"
)

// GeneralOnly makes every Take of s run take.lua's general path, skipping
// decide (lua/lib/decide.lua): tests compare the two on the same states.
func GeneralOnly(s *Store) { s.general = true }

// ProbeDecide makes every one-debit Take of s run decide alone first (the
// batch script with one decision: what the take script's fast path runs)
// and returns how many it decided: tests show the fast path decides.
func ProbeDecide(s *Store) func() int64 {
	s.probe = new(atomic.Int64)
	return s.probe.Load
}

// TakeSHA is the SHA1 of the take script (assembled: scripts.go).
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

// GatePipeline makes s's pipeline senders wait, before they take what is
// queued, until the returned release is called: a test queues decisions
// in an order of its own (PipelineQueued), then lets them go as one
// pipeline.
func GatePipeline(s *Store) (release func()) {
	g := make(chan struct{})
	s.pipe.gate.Store(&g)
	return func() { close(g) }
}

// Batched is how many decisions of s batch.lua has decided.
func Batched(s *Store) int64 { return s.pipe.batched.Load() }

// PipelineIdle reports whether no pipeline of s is being sent.
func PipelineIdle(s *Store) bool {
	s.pipe.mu.Lock()
	defer s.pipe.mu.Unlock()
	return s.pipe.flying == 0
}

// ForcePipeline makes every decision of s go through its pipeline queue,
// even one made while nothing waits (which otherwise goes at once, alone):
// tests of what happens to a decision inside a pipeline.
func ForcePipeline(s *Store) { GatePipeline(s)() }
