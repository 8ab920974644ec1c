-- perunit.lua: the common Redis recipe for a weighted sliding-window log,
-- the baseline quotactl is compared with. One sorted-set member per unit:
-- a call of cost c adds c members, all scored with the call's time.
-- Run as one script (atomic, one round trip) so it is compared on equal
-- terms with quotactl's one-script decision; the recipe is often a
-- MULTI/EXEC of the same commands.
--
-- KEYS[1] the log; ARGV[1] window (µs); ARGV[2] limit (units);
-- ARGV[3] cost (units); ARGV[4] the call's id, unique per call.
-- Reply: {1, used after} when admitted, {0, used} when refused.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) -- µs, server clock
local window, limit, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])

-- drop the units that left the window, then count those left: one per member
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local used = redis.call('ZCARD', KEYS[1])
if used + cost > limit then
  return {0, used}
end

-- admit: one member per unit, "ID:i", scored with now
local args = {}
for i = 1, cost do
  args[2 * i - 1] = now
  args[2 * i] = ARGV[4] .. ':' .. i
end
redis.call('ZADD', KEYS[1], unpack(args))
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
return {1, used + cost}
