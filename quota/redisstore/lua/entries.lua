-- entries.lua: the entries one budget counts now, oldest first.
--
-- KEYS: log, sum. ARGV[1] now or ''; ARGV[2..6] a window spec.
--
-- Reply: {1, NOW, MEMBER, SCORE, MEMBER, SCORE, ...}.

local now = clock(ARGV[1])
local start = span(2, now)
if not start then
  return {-1, now}
end
load(KEYS[1], KEYS[2], start, redis.call('GET', KEYS[2]))
local reply = {1, now}
local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for j = 1, #all, 2 do
  reply[#reply + 1] = all[j]
  reply[#reply + 1] = tonumber(all[j + 1]) -- as an integer reply
end
return reply
