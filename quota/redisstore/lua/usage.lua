-- usage.lua: current usage of several budgets of one credential. It drops
-- expired entries and records nothing.
--
-- KEYS: per budget b: log, sum, exh at 3b-2, 3b-1, 3b.
-- ARGV[1] now or ''; then per budget a window spec from 2+5(b-1).
--
-- Reply: {1, NOW, then per budget USED, RESET, EXHAUSTED_UNTIL}.

local now = clock(ARGV[1])
local reply = {1, now}
for b = 1, #KEYS / 3 do
  local k, a = 3 * b - 2, 2 + 5 * (b - 1)
  local start, r = span(a, now)
  if not start then
    return {-1, now}
  end
  local v = redis.call('MGET', KEYS[k + 1], KEYS[k + 2])
  local u, o = load(KEYS[k], KEYS[k + 1], start, v[1])
  reply[#reply + 1] = u
  reply[#reply + 1] = nextreset(a, r, o)
  reply[#reply + 1] = exhausted(v[2], now)
end
return reply
