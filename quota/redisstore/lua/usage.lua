-- usage.lua: current usage of several budgets of one credential. It drops
-- expired entries and records nothing.
--
-- KEYS: per budget b: log, sum, exh at 3b-2, 3b-1, 3b; then the keep keys,
-- budget b's at 3n+b; then the owner's store-loss marker (see lib/marker.lua).
-- ARGV[1] now or ''; then per budget a window spec from 2+5(b-1); then the
-- window ids, budget b's at 1+5n+b.
--
-- Reply: {1, NOW, then per budget USED, RESET, EXHAUSTED_UNTIL, then per
-- budget LOSS (1 while the exhausted mark is a store-loss reaction)}.

local now = clock(ARGV[1])
local reply = {1, now}
local n = (#KEYS - 1) / 4
local losses = {}
for b = 1, n do
  local k, a = 3 * b - 2, 2 + 5 * (b - 1)
  local start, r = span(a, now)
  if not start then
    return {-1, now}
  end
  local v = redis.call('MGET', KEYS[k + 1], KEYS[k + 2], KEYS[3 * n + b])
  local w = ARGV[1 + 5 * n + b]
  local kstart = alive(v[3], w, start, now)
  local u, o = load(KEYS[k], KEYS[k + 1], kstart, v[1], KEYS[#KEYS], asidefor(v[3], w), now)
  u, o = counted(KEYS[k], start, kstart, u, o)
  if v[3] and v[3] ~= w and iscalendar(v[3]) then
    -- what the old calendar window set aside counts too
    u, o = asideused(KEYS[k], math.max(start, kstart), u, o)
  end
  reply[#reply + 1] = u
  reply[#reply + 1] = nextreset(a, r, o)
  local exh = exhausted(v[2], now)
  reply[#reply + 1] = exh
  local lm = redis.call('HGET', KEYS[#KEYS], 'l:' .. budgetname(KEYS[k]))
  losses[b] = (exh > 0 and lm and tonumber(lm) == exh) and 1 or 0
end
for b = 1, n do
  reply[#reply + 1] = losses[b]
end
return reply
