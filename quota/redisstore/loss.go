package redisstore

import (
	"fmt"
	"sync"
	"time"
)

// The store-loss marker (lua/lib.lua has the layout): each owner's hash
// PREFIX{API/OWNER}:mark holds a sequence number bumped by every write, and
// per budget until when its log and exhausted mark must exist. The store
// remembers the highest sequence it saw per owner and passes it to the
// take script, which compares inside the same round trip: a lower one (or
// none) while the marker must still exist means Redis lost acknowledged
// writes.

// seenMark is what a Store saw of one owner's marker: its sequence and
// until when it must exist (µs on the script's clock).
type seenMark struct{ seq, until int64 }

// maxMarks bounds the owners a Store remembers; past it, owners whose
// marker has expired are forgotten, and if that is not enough, all.
const maxMarks = 1 << 16

// marks is the per-owner memory of a Store.
type marks struct {
	mu sync.Mutex
	m  map[string]seenMark
}

// markKey returns the marker key of one owner: PREFIX{API/OWNER}:mark.
func (s *Store) markKey(api, owner string) string {
	return s.prefix + "{" + api + "/" + owner + "}:mark"
}

// seen returns what the store saw of the marker mk.
func (m *marks) seen(mk string) seenMark {
	m.mu.Lock()
	v := m.m[mk]
	m.mu.Unlock()
	return v
}

// saw records a marker reply. After a loss the store's sequence starts over
// from what the script left, so it replaces what was seen; otherwise the
// highest sequence wins.
func (m *marks) saw(mk string, seq, until int64, lost bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[string]seenMark)
	}
	v, ok := m.m[mk]
	if ok && !lost {
		if seq < v.seq {
			return
		}
		until = max(until, v.until)
	}
	if !ok && len(m.m) >= maxMarks {
		now := time.Now().UnixMicro()
		for k, v := range m.m {
			if v.until <= now {
				delete(m.m, k)
			}
		}
		if len(m.m) >= maxMarks {
			clear(m.m)
		}
	}
	m.m[mk] = seenMark{seq: seq, until: until}
}

// one is the script argument 1, boxed once.
var one any = int64(1)

// sawMark records the {SEQ, U} an exhaust or adjust script replied.
func (s *Store) sawMark(mk string, rest []any) error {
	v, err := ints(rest)
	if err != nil || len(v) != 2 {
		return unavailable("marker", fmt.Errorf("bad script reply %v: %v", rest, err))
	}
	s.marks.saw(mk, v[0], v[1], false)
	return nil
}
