-- marker.lua: the owner's store-loss marker.
--
-- Store-loss marker. Every owner (hash tag) has a hash MARK beside its
-- logs, so that lost state is noticed instead of forgotten:
--   seq     bumped by every write of take, adjust and exhaust
--   u       µs until which MARK must exist: the latest of the expiries
--           below
--   e       µs until which MARK lives (its TTL ends there), past u
--   b:NAME  µs until which budget NAME's log must hold an entry (its
--           newest entry's expiry); 0 once a refund emptied the log
--   x:NAME  µs until which NAME's exhausted-until key must exist
--   l:NAME  µs until which NAME counts as spent because a loss was found
--   o       µs until which a budget the marker holds neither b:NAME nor
--           x:NAME of counts as lost: set, with the rest of the marker
--           dropped, by the take that finds the owner's writes lost, so
--           that every budget of the owner is marked spent at its first
--           decision, not only those that take charged (see take.lua)
--   f       µs of that take: a budget the marker holds neither b:NAME nor
--           x:NAME of also counts as lost while an entry its own window
--           counts could have been recorded by then (o is only what the
--           finder saw); the marker then lives a year
--   w:B     the seq of the last admission of the processes whose stores
--           drew bucket B (loss.go: ownBuckets): a process whose last
--           admission (OWN) is above it finds its admission lost, even
--           once other processes' writes took seq back past what it saw
--   r       the seq the marker started afresh at after a loss was found:
--           an admission at or below it is covered by that finding
--   v       the owner's change version (quota.ChangeVersioner): bumped by
--           every adjust and exhaust, in the same script, and by nothing
--           else (take, refund and settle leave it); read with one HMGET.
--           It lives and goes with the marker, which lives while any
--           entry of the owner is held (its b:NAME); a loss that drops the
--           marker drops it too (read as 0), and the next bump starts it
--           at the script's now in µs (bumpversion), so that it never
--           comes back to a value an open lease read before the loss
-- and two fields a decision keeps so that a decision does less (not about
-- loss: a missing one only costs the next decision a renewal or a read):
--   k:NAME  µs until which NAME's log, sum and keep keys are known to live
--           (their lifetimes are renewed when a decision needs them longer)
--   d:NAME  the start (µs) of the day since which NAME's daily log holds
--           entries of that day only: its running sum then decides alone
-- and one a decision never reads:
--   pad     a value longer than hash-max-listpack-value (64 bytes), written
--           whenever the marker's lifetime grows (so when it is made), which
--           keeps the marker a hash table: a small hash is a listpack, whose
--           every lookup scans its fields, and a marker holds one w:B field
--           per process bucket (up to 256). A decision's HMGET of 9 fields
--           cost 8.5k instructions more on a listpack of 7 fields, 29k more
--           on one of 107 (bench/callgrind, issue 26). Redis never turns a
--           hash table back into a listpack, and loads one with this value
--           as a hash table.
-- A process remembers the highest seq it saw per owner and until when
-- MARK must live, and passes them to take (SEEN, SEEN_UNTIL): a lower seq,
-- or none, before SEEN_UNTIL means the store lost writes it had
-- acknowledged (a restart without persistence, FLUSHALL, a failover that
-- lost the last writes). A log that is empty before its b:NAME, or an
-- exhausted key missing before its x:NAME, means the store lost that
-- budget's state (eviction), whichever process asks.
--
-- A marker made afresh (none there, by a call that knows of no marker it
-- should find: SEEN 0) starts its seq at FRESH - now, not at 1. A process
-- that saw an earlier marker saw a higher seq (FRESH less an earlier now,
-- plus fewer decisions than microseconds passed since), so it finds the
-- loss whatever the number of decisions made on the new marker before it
-- asks: a marker started at 1 let a process that started after the loss,
-- and so knew of nothing, hide it by deciding more often than the older
-- process had seen.
-- (FRESH is 2^52: seqs stay below 2^53, exact.)

-- bumpversion changes the owner's change version, field v of marker mk:
-- one more, or on a marker without it (made afresh, or after a loss
-- dropped it) now in µs, not 1: a version an open lease read before a
-- loss does not come back with the next adjust or exhaust (no count of
-- bumps since an earlier start reaches the microseconds since then).
local function bumpversion(mk, now)
  if redis.call('HINCRBY', mk, 'v', 1) == 1 then
    redis.call('HSET', mk, 'v', int(now))
  end
end

-- raise returns the marker's u and e once it must also live until until_:
-- u raised to it (a mark years ahead, Exhaust until far away, keeps the
-- marker a year at most: past that, a loss goes unnoticed rather than
-- overflow a TTL), and e, the marker's own lifetime, extended past u to
-- twice what u needs (u + (u - now)) when u passed it, so that a steady
-- stream of decisions extends it once a window, not on every call; and
-- whether e grew. u stays exact: a process that saw it expects the marker
-- until then.
local function raise(u, e, until_, now)
  until_ = math.min(until_, now + YEAR)
  if until_ > u then
    u = until_
  end
  local grow = u > e
  if grow then
    e = u + math.max(0, u - now)
  end
  return u, e, grow
end

-- markwrite writes fields (a flat list of names and values) to the marker
-- mk, whose lifetime ends at e, and renews its TTL when e grew (or the
-- marker protects nothing: e <= now, it goes at once); when e grew, with
-- the field pad (see above).
local function markwrite(mk, fields, e, grow, now)
  if grow then
    fields[#fields + 1] = 'pad'
    fields[#fields + 1] = 'a value over 64 bytes: it keeps this marker a hash table (marker.lua)'
  end
  redis.call('HSET', mk, unpack(fields))
  if grow or e <= now then
    redis.call('PEXPIRE', mk, math.max(1, math.ceil((e - now) / 1000)))
  end
end

-- remark writes fields to the marker mk, with seq bumped past both seq and
-- seen and u raised to until_ (raise), and returns the new seq and u.
local function remark(mk, seq, seen, u, e, until_, now, fields)
  if seq == 0 and seen == 0 then
    seq = math.max(0, FRESH - now - 1) -- made afresh: see FRESH
  end
  seq = math.max(seq, seen) + 1
  fields[#fields + 1] = 'seq'
  fields[#fields + 1] = int(seq)
  local nu, ne, grow = raise(u, e, until_, now)
  if nu > u then
    fields[#fields + 1] = 'u'
    fields[#fields + 1] = int(nu)
  end
  if grow then
    fields[#fields + 1] = 'e'
    fields[#fields + 1] = int(ne)
  end
  markwrite(mk, fields, ne, grow, now)
  return seq, nu
end
