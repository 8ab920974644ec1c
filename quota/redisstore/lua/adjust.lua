-- adjust.lua: replace one budget's log with a single entry of USED units
-- recorded now (none when USED is 0) and clear its exhaustion mark.
--
-- KEYS: log, sum, exh, keep. ARGV[1] now or ''; ARGV[2] USED; ARGV[3] nonce;
-- ARGV[4..8] a window spec.
--
-- Reply: {1, NOW}.

local now = clock(ARGV[1])
local start, r = span(4, now)
if not start then
  return {-1, now}
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4]) -- a new log keeps nothing older
if tonumber(ARGV[2]) > 0 then
  redis.call('ZADD', KEYS[1], int(now), ARGV[3] .. ':' .. ARGV[2])
  redis.call('SET', KEYS[2], ARGV[2])
  local ms = ttl(4, now, r)
  redis.call('PEXPIRE', KEYS[1], ms)
  redis.call('PEXPIRE', KEYS[2], ms)
end
return {1, now}
