-- loss.lua: what a decision reads of the marker, and the loss of the
-- owner's writes it looks for (see marker.lua).

-- readmark reads what a decision of budget name needs of the marker mk:
-- seq, u, e, b:NAME, x:NAME, k:NAME, d:NAME, the field wb of this
-- process's admissions (w:BUCKET) and r, in that order.
local function readmark(mk, name, wb)
  return redis.call('HMGET', mk, 'seq', 'u', 'e', 'b:' .. name, 'x:' .. name, 'k:' .. name, 'd:' .. name, wb, 'r')
end

-- lostwrites reports whether acknowledged writes of the owner were lost,
-- given the marker's seq, w:BUCKET (w) and r as read, and what this
-- process saw (SEEN, SEEN_UNTIL, OWN): a lower seq than it saw while the
-- marker must exist; or, since the sequence alone misses a loss once
-- others catch it up (a process that saw a write the failover lost, seq
-- S+1, finds S+1 again after another process, which never saw it, writes
-- on the new master), its own last admission (OWN) above what its field
-- w:BUCKET holds, unless the marker started afresh past it (r: that
-- admission is covered by the loss found then).
local function lostwrites(seq, seen, until_, own, w, r, now)
  return now < until_ and (seq < seen or (w or 0) + 0 < own and own > (r or 0) + 0)
end
