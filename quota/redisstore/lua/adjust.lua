-- adjust.lua: replace one budget's log with a single entry of USED units
-- recorded now (none when USED is 0) and clear its exhaustion mark,
-- store-loss marks included. The marker's k:NAME and d:NAME (see take.lua)
-- go too: the next take renews the keys' lifetimes and checks the log's
-- day again.
--
-- KEYS: log, sum, exh, keep, the owner's store-loss marker (see lib.lua).
-- ARGV[1] now or ''; ARGV[2] USED; ARGV[3] nonce; ARGV[4..8] a window
-- spec; ARGV[9] the window id: the new log keeps its entries for that
-- window (as a log that starts afresh does).
--
-- Reply: {1, NOW, SEQ, U} (the marker after this call).

local now = clock(ARGV[1])
local start, r = span(4, now)
if not start then
  return {-1, now}
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4]) -- a new log keeps nothing older
local e = 0
if tonumber(ARGV[2]) > 0 then
  redis.call('ZADD', KEYS[1], int(now), ARGV[3] .. ':' .. ARGV[2])
  redis.call('SET', KEYS[2], ARGV[2])
  local ms = ttl(4, now, r)
  redis.call('PEXPIRE', KEYS[1], ms)
  redis.call('PEXPIRE', KEYS[2], ms)
  redis.call('SET', KEYS[4], ARGV[9], 'PX', ms)
  e = expiry(4, now)
end
local mk, name = KEYS[5], budgetname(KEYS[1])
local mv = redis.call('HMGET', mk, 'seq', 'u', 'e')
redis.call('HDEL', mk, 'l:' .. name)
local seq, mu = remark(mk, tonumber(mv[1]) or 0, 0, tonumber(mv[2]) or 0, tonumber(mv[3]) or 0, e, now,
  {'b:' .. name, int(e), 'x:' .. name, '0', 'k:' .. name, '0', 'd:' .. name, '0'})
return {1, now, seq, mu}
