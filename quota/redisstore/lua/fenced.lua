-- fenced.lua: SaveStateFenced, a write refused once a newer lease exists.
--
-- KEYS: state, token (see lease.lua; the same Cluster slot).
-- ARGV[1] unused (no clock is needed); ARGV[2] the writer's token; ARGV[3]
-- the value.
--
-- Reply: {1, 0, LAST} written; {0, 0, LAST} refused, where LAST is the
-- newest token granted on the key.

local now = 0
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if last > tonumber(ARGV[2]) then
  return {0, now, last}
end
redis.call('SET', KEYS[1], ARGV[3])
return {1, now, last}
