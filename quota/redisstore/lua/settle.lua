-- settle.lua: shrink one reservation's entries to the units really spent.
-- An entry keeps min(its cost, ACTUAL) and its score (it never moves in
-- time); at 0 it goes: a refund is a settle to 0.
--
-- KEYS: per budget b: log, sum at 2b-1, 2b; then the keep keys, budget b's
-- at 2n+b; then the breakdown hash of AT's hour; then the owner's
-- store-loss marker (see lib/marker.lua), whose b:NAME follows the newest entry
-- left.
-- ARGV[1] now or ''; ARGV[2] AT (µs, the entry's score); ARGV[3] nonce;
-- then per budget ACTUAL and a window spec (6 values) from 4+6(b-1); then
-- the window ids, budget b's at 3+6n+b; then the breakdown fields, budget
-- b's at 3+7n+b.
--
-- Reply: {1, NOW, then per budget the units freed, or -1 when the entry was
-- not found (refunded, or out of its window)}.

local now = clock(ARGV[1])
local at, prefix = ARGV[2], ARGV[3] .. ':'
local reply = {1, now}
local n = (#KEYS - 2) / 3
local ukey = KEYS[3 * n + 1]
for b = 1, n do
  local log, sum, a = KEYS[2 * b - 1], KEYS[2 * b], 4 + 6 * (b - 1)
  local actual = tonumber(ARGV[a])
  local start = span(a + 1, now)
  if not start then
    return {-1, now}
  end
  -- expired entries go first, so an out-of-window reservation is not found
  local v = redis.call('MGET', sum, KEYS[2 * n + b])
  local w = ARGV[3 + 6 * n + b]
  if v[2] and v[2] ~= w and iscalendar(v[2]) then
    v[1] = back(log, sum, v[1], now, v[2]) -- the calendar window changed
  end
  load(log, sum, alive(v[2], w, start, now), v[1], KEYS[#KEYS], asidefor(v[2], w), now)
  keepwin(log, KEYS[2 * n + b], retain(v[2], w), v[2], now)
  local freed = -1
  -- out of the window, a reservation counts for nothing: not found (the
  -- log may keep it longer, for a longer window the budget had)
  local found = tonumber(at) >= start and redis.call('ZRANGEBYSCORE', log, at, at) or {}
  for _, m in ipairs(found) do
    if string.sub(m, 1, #prefix) == prefix then
      local c = cost(m)
      local keep = math.min(c, actual)
      freed = c - keep
      if freed > 0 then
        if keep > 0 then
          -- add the shrunk entry before removing the old one, so the log
          -- key (and its lifetime) never goes away
          -- (a held entry stays held: NONCE:h:COST)
          redis.call('ZADD', log, at, string.match(m, '^(.*:)%d+$') .. int(keep))
        end
        redis.call('ZREM', log, m)
        local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
        local e = 0
        if #newest == 0 then
          redis.call('DEL', sum)
        else
          redis.call('DECRBY', sum, int(freed)) -- DECRBY keeps the TTL
          e = expiry(a + 1, tonumber(newest[2]))
        end
        if redis.call('EXISTS', KEYS[#KEYS]) == 1 then
          redis.call('HSET', KEYS[#KEYS], 'b:' .. budgetname(log), int(e))
        end
        -- the freed units leave the breakdown row they were spent in
        if redis.call('EXISTS', ukey) == 1 then
          redis.call('HINCRBY', ukey, ARGV[3 + 7 * n + b], int(-freed))
        end
      end
      break
    end
  end
  reply[#reply + 1] = freed
end
return reply
