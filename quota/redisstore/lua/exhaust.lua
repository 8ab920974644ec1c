-- exhaust.lua: mark one budget spent until UNTIL, or clear the mark.
--
-- KEYS: exh. ARGV[1] now or ''; ARGV[2] UNTIL (µs; 0 clears).
--
-- The key expires at UNTIL. Its lifetime is set relative to the script's
-- now (SET PX UNTIL-now), which is PEXPIREAT UNTIL when now is the server
-- clock, and stays right when a test injects its own now.
--
-- Reply: {1, NOW}.

local now = clock(ARGV[1])
local until_ = tonumber(ARGV[2])
if until_ > now then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', math.max(1, math.ceil((until_ - now) / 1000)))
else
  redis.call('DEL', KEYS[1])
end
return {1, now}
