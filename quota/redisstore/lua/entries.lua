-- entries.lua: the entries one budget counts now, oldest first.
--
-- KEYS: log, sum, keep, the owner's store-loss marker (see lib.lua).
-- ARGV[1] now or ''; ARGV[2..6] a window spec;
-- ARGV[7] the window id.
--
-- Reply: {1, NOW, MEMBER, SCORE, MEMBER, SCORE, ...}.

local now = clock(ARGV[1])
local start = span(2, now)
if not start then
  return {-1, now}
end
local v = redis.call('MGET', KEYS[2], KEYS[3])
load(KEYS[1], KEYS[2], alive(v[2], ARGV[7], start, now), v[1], KEYS[4])
local reply = {1, now}
local all = redis.call('ZRANGEBYSCORE', KEYS[1], int(start), '+inf', 'WITHSCORES')
for j = 1, #all, 2 do
  reply[#reply + 1] = all[j]
  reply[#reply + 1] = tonumber(all[j + 1]) -- as an integer reply
end
return reply
