-- take.lua: one decision for one credential, atomically over every budget
-- of the charge: all pay or none does.
--
-- KEYS: per debit d (1-based): log, sum, exh at 3d-2, 3d-1, 3d; then the
-- keep keys, debit d's at 3n+d.
-- ARGV[1] now (µs) or '' for the server clock; ARGV[2] nonce (no ':');
-- then per debit 7 values from 3+7(d-1): COST, LIMIT, and a window spec;
-- then the window ids, debit d's at 2+7n+d.
--
-- Reply: {OK, NOW, then per debit USED, RESET, EXHAUSTED_UNTIL, RETRY_AT}
-- (0 where none). OK is 1 when every budget paid (USED is after the charge),
-- 0 when none did (USED is the current state, RETRY_AT set on each refusing
-- budget), -1 on clock skew (see lib.lua).

local now = clock(ARGV[1])
local nonce = ARGV[2]
local n = #KEYS / 4
local reply = {1, now}
local used, oldest, reset = {}, {}, {}
local totals, kepts = {}, {}
local ok = 1

for d = 1, n do
  local k, a = 3 * d - 2, 3 + 7 * (d - 1)
  local c, limit = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local start, r = span(a + 2, now)
  if not start then
    return {-1, now}
  end
  -- one read for the running sum, the exhausted-until mark and the kept
  -- window
  local v = redis.call('MGET', KEYS[k + 1], KEYS[k + 2], KEYS[3 * n + d])
  local w = ARGV[2 + 7 * n + d]
  local kept = retain(v[3], w)
  local kstart = alive(v[3], w, start, now)
  local total, o = load(KEYS[k], KEYS[k + 1], kstart, v[1])
  if total == 0 and not o then
    kept = w -- an empty log starts afresh
  end
  local u
  u, o = counted(KEYS[k], start, kstart, total, o)
  totals[d], kepts[d] = total, kept
  local exh = exhausted(v[2], now)
  local retry = 0
  local deficit = u + c - limit
  if deficit > 0 then
    -- walk the oldest entries until their costs cover the deficit: the
    -- charge fits once the entry that covers it has expired
    -- (a few entries first: one or two usually cover the deficit, and every
    -- call after a budget runs out is a refusal; then 100 at a time)
    local freed, from, size = 0, 0, 4
    while retry == 0 do
      local batch = redis.call('ZRANGEBYSCORE', KEYS[k], int(start), '+inf', 'WITHSCORES', 'LIMIT', from, size)
      if #batch == 0 then
        break
      end
      for j = 1, #batch, 2 do
        freed = freed + cost(batch[j])
        if freed >= deficit then
          retry = expiry(a + 2, tonumber(batch[j + 1]))
          break
        end
      end
      from = from + size
      size = 100
    end
    if retry == 0 then
      -- the entries cover less than the sum claimed: the sum was stale
      -- (a lost key); trust the log and decide again
      totals[d] = recount(KEYS[k], KEYS[k + 1])
      u, o = counted(KEYS[k], start, kstart, totals[d], o)
      if u + c > limit then
        retry = expiry(a + 2, o or now) -- cannot happen while cost <= limit
      end
    end
  end
  if exh > retry then
    retry = exh
  end
  if retry > 0 then
    ok = 0
  end
  used[d], oldest[d], reset[d] = u, o, r
  local at = #reply
  reply[at + 1] = u
  reply[at + 2] = nextreset(a + 2, r, o)
  reply[at + 3] = exh
  reply[at + 4] = retry
end

if ok == 0 then
  reply[1] = 0
  return reply
end

-- every budget can pay: record one entry per budget, whatever the cost
for d = 1, n do
  local k, a = 3 * d - 2, 3 + 7 * (d - 1)
  local c = tonumber(ARGV[a])
  local total = totals[d] + c
  redis.call('ZADD', KEYS[k], int(now), nonce .. ':' .. ARGV[a])
  -- keep the keys until the newest entry leaves the window and the kept
  -- window; idle keys vanish. SET with PX writes the new sum and its
  -- lifetime in one call.
  local w = ARGV[2 + 7 * n + d]
  local ms = keepms(kepts[d], w, ttl(a + 2, now, reset[d]))
  redis.call('PEXPIRE', KEYS[k], ms)
  redis.call('SET', KEYS[k + 1], int(total), 'PX', ms)
  redis.call('SET', KEYS[3 * n + d], kepts[d], 'PX', ms)
  local at = 2 + 4 * (d - 1)
  reply[at + 1] = used[d] + c
  -- the new entry is the oldest when the clock stepped back (TIME after a
  -- failover or an NTP step)
  reply[at + 2] = nextreset(a + 2, reset[d], math.min(oldest[d] or now, now))
end
return reply
