-- mark.lua: record a threshold crossing once (quota.Store.MarkCrossing).
--
-- KEYS[1] the mark. ARGV[1] now (µs) or ''; ARGV[2] UNTIL (µs): when the
-- mark lapses.
--
-- Reply: {1, NOW} when this call recorded the mark, {0, NOW} when a mark
-- that has not lapsed at now holds already. The key expires when the mark
-- lapses; a mark found lapsed by an injected now is replaced as well.

local now = clock(ARGV[1])
local until_ = tonumber(ARGV[2])
local v = redis.call('GET', KEYS[1])
if v and tonumber(v) > now then
  return {0, now}
end
if until_ <= now then
  return {0, now} -- lapsed already: nothing to hold
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', math.max(1, math.ceil((until_ - now) / 1000)))
return {1, now}
