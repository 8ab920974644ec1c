package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// The store-loss marker (lua/lib/marker.lua has the layout): each owner's hash
// PREFIX{API/OWNER}:mark holds a sequence number bumped by every write, and
// per budget until when its log and exhausted mark must exist. The store
// remembers the highest sequence it saw per owner and passes it to the
// take script, which compares inside the same round trip: a lower one (or
// none) while the marker must still exist means Redis lost acknowledged
// writes.

// seenMark is what a Store saw of one owner's marker: its sequence and
// until when it must exist (µs on the script's clock).
type seenMark struct {
	seq, until int64
	// own is the seq of this store's last admission on the owner, which
	// the marker's field s.own must still hold (0: none known)
	own int64
}

// ownBuckets bounds the w:BUCKET fields a marker holds: one per store
// (process) that admitted on the owner, shared when more stores than that
// do.
//
// The sequence alone cannot find every lost admission: a process that saw
// a write a failover lost (seq S+1) sees S+1 again once another process,
// which never saw that write, writes on the new master, and from then on
// the loss is hidden. Each store therefore also records its own admissions
// in a field of its own and checks, at its next decision, that the field
// still holds its last one. Two stores that share a bucket can still hide
// each other's loss (the field only grows): with B buckets and n stores
// writing, about n/B of the time.
const ownBuckets = 256

// ownField picks the marker field of a new store's admissions.
func ownField() string { return "w:" + strconv.Itoa(rand.IntN(ownBuckets)) }

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
//
// admitted says this reply is of the store's own admission, which wrote
// seq to its own field: it becomes the one the next decision checks.
// After a loss the one before it is forgotten (the marker started afresh).
func (m *marks) saw(mk string, seq, until, now int64, lost, admitted bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[string]seenMark)
	}
	v, ok := m.m[mk]
	if ok && v.until <= now {
		// The marker this store knew had to live until v.until only: it
		// may have expired as it should since, and one made afresh holds
		// neither its sequence nor this store's admissions under it (all
		// expired by v.until). Kept, they would be checked against the new
		// marker's until: a loss found where none was.
		v, ok = seenMark{}, false
	}
	own := v.own
	switch {
	case admitted:
		own = max(own, seq)
		if lost {
			own = seq
		}
	case lost:
		own = 0
	}
	if ok && !lost {
		if seq < v.seq {
			if own != v.own {
				v.own = own
				m.m[mk] = v
			}
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
	m.m[mk] = seenMark{seq: seq, until: until, own: own}
}

// one is the script argument 1, boxed once.
var one any = int64(1)

// sawMark records the {SEQ, U} an exhaust or adjust script replied.
func (s *Store) sawMark(mk string, now int64, rest []any) error {
	v, err := ints(rest)
	if err != nil || len(v) != 2 {
		return unavailable("marker", fmt.Errorf("bad script reply %v: %v", rest, err))
	}
	s.marks.saw(mk, v[0], v[1], now, false, false)
	return nil
}

var _ backend.ChangeVersioner = (*Store)(nil)

// ChangeVersion implements backend.ChangeVersioner: the field v of the
// owner's marker (lua/lib/marker.lua), which adjust.lua and exhaust.lua bump in
// the same script as their write; one HMGET of one key (a Cluster sends it
// to the owner's slot). A marker without v, or none this store knew of:
// 0; none where this store saw one: -1.
func (s *Store) ChangeVersion(ctx context.Context, api, owner string) (int64, error) {
	if err := checkCred(api, owner); err != nil {
		return 0, err
	}
	var v int64
	mk := s.markKey(api, owner)
	err := s.do(ctx, func(ctx context.Context) error {
		r, err := s.rdb.HMGet(ctx, mk, "v", "seq").Result()
		if err != nil {
			return err
		}
		switch {
		case len(r) != 2:
			return fmt.Errorf("unexpected HMGET reply %v", r)
		case r[1] == nil && s.marks.seen(mk).seq > 0:
			// No marker where this store saw one (that has not run out
			// its lifetime): a loss dropped it (a flush, a failover).
			// An open lease's block keeps its owner's marker alive, so
			// the lease that took the block reads -1 here, not the 0 a
			// marker that knows of no change reads, and ends.
			v = -1
		case r[1] == nil:
			v = 0 // an owner this store never charged
		case r[0] == nil:
			v = 0
		default:
			str, _ := r[0].(string)
			if v, err = strconv.ParseInt(str, 10, 64); err != nil {
				return fmt.Errorf("marker field v %q: %w", str, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, failed(ctx, "change version", err)
	}
	return v, nil
}
