-- fenced.lua: SaveStateFenced, a write refused once a newer lease exists.
--
-- KEYS: state, token (see lease.lua; the same Cluster slot).
-- ARGV[1] now or ''; ARGV[2] the writer's token; ARGV[3] the value.
--
-- Reply: {1, NOW, LAST} written; {0, NOW, LAST} refused, where LAST is the
-- newest token granted on the key.

local now = clock(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if last > tonumber(ARGV[2]) then
  return {0, now, last}
end
redis.call('SET', KEYS[1], ARGV[3])
return {1, now, last}
