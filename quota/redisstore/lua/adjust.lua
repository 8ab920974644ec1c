-- adjust.lua: replace one budget's log with a single entry of USED units
-- recorded now (none when USED is 0), keeping the held entries stamped
-- past now (open leases' blocks, NONCE:h:COST), and clear its exhaustion
-- mark,
-- store-loss marks included. The marker's k:NAME and d:NAME (see take.lua)
-- go too: the next take renews the keys' lifetimes and checks the log's
-- day again. The marker's v (the owner's change version) is bumped.
--
-- KEYS: log, sum, exh, keep, the owner's store-loss marker (see lib/marker.lua).
-- ARGV[1] now or ''; ARGV[2] USED; ARGV[3] nonce; ARGV[4..8] a window
-- spec; ARGV[9] the window id: the new log keeps its entries for that
-- window (as a log that starts afresh does); ARGV[10], ARGV[11] the nonce
-- and instant (µs; -1 for none) of a held entry to drop all the same (the
-- caller's own ended lease's block).
--
-- Reply: {1, NOW, SEQ, U} (the marker after this call).

local now = clock(ARGV[1])
local start, r = span(4, now)
if not start then
  return {-1, now}
end
-- held entries stamped past now are open leases' blocks (take.lua's
-- HOLD): their leases go on admitting from them, so they stay. Every other
-- entry goes, whatever its stamp: after the clock stepped back, plain
-- entries are stamped past now too.
local held = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. int(now), '+inf', 'WITHSCORES')
-- a new log keeps nothing older, nor what a daily window set aside
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], asidekey(KEYS[1]))
local total, last = tonumber(ARGV[2]), now
if total > 0 then
  redis.call('ZADD', KEYS[1], int(now), ARGV[3] .. ':' .. ARGV[2])
end
local drop, dropat = ARGV[10] .. ':', tonumber(ARGV[11])
for j = 1, #held, 2 do
  local m, s = held[j], tonumber(held[j + 1])
  if string.find(m, ':h:%d+$') and (s ~= dropat or string.sub(m, 1, #drop) ~= drop) then
    redis.call('ZADD', KEYS[1], s, m)
    total = total + cost(m)
    last = math.max(last, s)
  end
end
local e = 0
if total > 0 then
  -- the keys live until the newest entry expires; a calendar log's
  -- asidekeep past that, as take.lua's, so that the next period's first
  -- decision sets the entries aside (see lib/log.lua's setaside)
  e = expiry(4, last)
  local ms = math.max(1, math.ceil((e + (r > 0 and asidekeep(ARGV[9]) or 0) - now) / 1000))
  redis.call('SET', KEYS[2], int(total), 'PX', ms)
  redis.call('PEXPIRE', KEYS[1], ms)
  redis.call('SET', KEYS[4], ARGV[9], 'PX', ms)
end
local mk, name = KEYS[5], budgetname(KEYS[1])
local mv = redis.call('HMGET', mk, 'seq', 'u', 'e')
bumpversion(mk, now) -- the owner's change version (see lib/marker.lua)
redis.call('HDEL', mk, 'l:' .. name)
local seq, mu = remark(mk, tonumber(mv[1]) or 0, 0, tonumber(mv[2]) or 0, tonumber(mv[3]) or 0, e, now,
  {'b:' .. name, int(e), 'x:' .. name, '0', 'k:' .. name, '0', 'd:' .. name, '0'})
return {1, now, seq, mu}
