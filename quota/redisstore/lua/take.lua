-- take.lua: one decision for one credential, atomically over every budget
-- of the charge: all pay or none does.
--
-- KEYS: per debit d (1-based): log, sum, exh at 3d-2, 3d-1, 3d; then the
-- keep keys, debit d's at 3n+d; then the breakdown hashes of two
-- consecutive hours, H and H+1h (see usage below), at 4n+1 and 4n+2; then
-- the owner's store-loss marker (see lib.lua), last.
-- ARGV[1] now (µs) or '' for the server clock; ARGV[2] nonce (no ':');
-- then per debit 7 values from 3+7(d-1): COST, LIMIT, and a window spec;
-- then the window ids, debit d's at 2+7n+d; then at 3+8n SEEN, SEEN_UNTIL
-- (what this process saw of the marker, 0 0 when nothing) and TRUST ('1':
-- on a loss, decide on what the store holds); then H (µs), KEEP (µs a
-- breakdown row is kept after its hour ends) at 6+8n and 7+8n, and per
-- debit the breakdown field "BUDGET\x1fMETHOD\x1fJOB" at 7+8n+d.
--
-- ARGV[8+9n] (after the breakdown fields), when present: HOLD, µs past now at which sliding-window
-- entries are recorded (a lease's block, held until the lease ends).
--
-- Reply: {OK, NOW, then per debit USED, RESET, EXHAUSTED_UNTIL, RETRY_AT}
-- (0 where none), then SEQ, U (the marker after this call), LOST_ALL and
-- per debit LOST (1 where this call found the budget's state lost). OK is
-- 1 when every budget paid (USED is after the charge), 0 when none did
-- (USED is the current state, RETRY_AT set on each refusing budget), -1 on
-- clock skew (see lib.lua). Unless TRUST, a budget found lost is marked
-- spent until its next reset (daily) or for one window (sliding), and the
-- charge is refused.

local now = clock(ARGV[1])
local nonce = ARGV[2]
local n = (#KEYS - 3) / 4
-- the breakdown hash of now's hour: one of the two the Go side named
-- around its estimate of now; when the estimate was off (the Redis clock
-- moved against the host's), the hash of now's hour is named here, with the
-- same prefix and hash tag, so in the same Cluster slot
local ub, hour = 6 + 8 * n, 3600000000
local h0 = tonumber(ARGV[ub])
local ukey = KEYS[4 * n + 1]
if now >= h0 + hour and now < h0 + 2 * hour then
  ukey, h0 = KEYS[4 * n + 2], h0 + hour
elseif now < h0 or now >= h0 + hour then
  h0 = now - now % hour
  ukey = string.match(ukey, '^(.*:use:)%d+$') .. int(h0 / 1000000)
end
local hold = tonumber(ARGV[ub + 2 + n]) or 0
local reply = {1, now}
local used, oldest, reset = {}, {}, {}
local totals, kepts = {}, {}
local ok = 1

-- store-loss marker: one read of seq, u, e and each debit's b: and x:
local mk, m0 = KEYS[#KEYS], 3 + 8 * n
local seen, seenUntil = tonumber(ARGV[m0]), tonumber(ARGV[m0 + 1])
local trust = ARGV[m0 + 2] == '1'
local names, fields = {}, {'seq', 'u', 'e'}
for d = 1, n do
  names[d] = budgetname(KEYS[3 * d - 2])
  fields[2 * d + 2] = 'b:' .. names[d]
  fields[2 * d + 3] = 'x:' .. names[d]
end
local mv = redis.call('HMGET', mk, unpack(fields))
local seq, mu, me = tonumber(mv[1]) or 0, tonumber(mv[2]) or 0, tonumber(mv[3]) or 0
-- a lower seq (or none) while the marker must exist: acknowledged writes
-- of this owner were lost, so every budget of it is affected
local lostAll = seq < seen and now < seenUntil
local lost, marks, top = {}, {}, 0

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
  local empty = total == 0 and not o
  if empty then
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
  -- a log emptied before its newest entry's expiry, or an exhausted mark
  -- gone before its time: the store lost this budget's state
  local gone = empty and (tonumber(mv[2 * d + 2]) or 0) > now
  local xgone = exh == 0 and (tonumber(mv[2 * d + 3]) or 0) > now
  lost[d] = lostAll or gone or xgone
  if gone then
    marks[#marks + 1] = 'b:' .. names[d] -- repaired: found once, not again
    marks[#marks + 1] = '0'
  end
  if xgone then
    marks[#marks + 1] = 'x:' .. names[d]
    marks[#marks + 1] = '0'
  end
  if lost[d] and not trust then
    -- count the budget as spent until its next reset, or for one window,
    -- in the store, so every process sharing it stops
    local until_ = r > 0 and r or now + tonumber(ARGV[a + 2])
    until_ = math.max(until_, exh)
    redis.call('SET', KEYS[k + 2], int(until_), 'PX', math.max(1, math.ceil((until_ - now) / 1000)))
    exh, retry = until_, math.max(retry, until_)
    marks[#marks + 1] = 'x:' .. names[d]
    marks[#marks + 1] = int(until_)
    marks[#marks + 1] = 'l:' .. names[d]
    marks[#marks + 1] = int(until_)
    top = math.max(top, until_)
    ok = 0
  end
  used[d], oldest[d], reset[d] = u, o, r
  local at = #reply
  reply[at + 1] = u
  reply[at + 2] = nextreset(a + 2, r, o)
  reply[at + 3] = exh
  reply[at + 4] = retry
end

-- tail appends the marker's state and what was found lost to the reply.
local function tail()
  reply[#reply + 1] = seq
  reply[#reply + 1] = mu
  reply[#reply + 1] = lostAll and 1 or 0
  for d = 1, n do
    reply[#reply + 1] = lost[d] and 1 or 0
  end
  return reply
end

if ok == 0 then
  reply[1] = 0
  if #marks > 0 or lostAll then
    seq, mu = remark(mk, seq, seen, mu, me, top, now, marks)
  end
  return tail()
end

-- every budget can pay: record one entry per budget, whatever the cost
for d = 1, n do
  local k, a = 3 * d - 2, 3 + 7 * (d - 1)
  local c = tonumber(ARGV[a])
  local total = totals[d] + c
  local stamp = now
  if tonumber(ARGV[a + 2]) > 0 then
    stamp = now + hold -- sliding windows only: a daily entry counts all day
  end
  redis.call('ZADD', KEYS[k], int(stamp), nonce .. ':' .. ARGV[a])
  -- keep the keys until the newest entry leaves the window and the kept
  -- window; idle keys vanish. SET with PX writes the new sum and its
  -- lifetime in one call.
  local w = ARGV[2 + 7 * n + d]
  local ms = keepms(kepts[d], w, ttl(a + 2, now, reset[d]))
  if tonumber(ARGV[a + 2]) > 0 then
    -- a held entry (at most a tenth of the window ahead) outlives a later
    -- entry by up to its hold, so a sliding log's keys live a tenth of the
    -- window longer than its newest entry's time
    ms = ms + math.ceil(tonumber(ARGV[a + 2]) / 10000)
  end
  redis.call('PEXPIRE', KEYS[k], ms)
  redis.call('SET', KEYS[k + 1], int(total), 'PX', ms)
  redis.call('SET', KEYS[3 * n + d], kepts[d], 'PX', ms)
  -- usage by method and job: one HINCRBY on the hour's hash; a new field
  -- (rare: once per hour, method and job) makes the hash last until its
  -- rows may be dropped
  if redis.call('HINCRBY', ukey, ARGV[ub + 1 + d], ARGV[a]) == tonumber(ARGV[a]) then
    keephash(ukey, h0 + hour + tonumber(ARGV[ub + 1]), now)
  end
  local at = 2 + 4 * (d - 1)
  reply[at + 1] = used[d] + c
  -- the new entry is the oldest when the clock stepped back (TIME after a
  -- failover or an NTP step)
  reply[at + 2] = nextreset(a + 2, reset[d], math.min(oldest[d] or now, now))
  -- the log must now hold an entry until this one expires
  local e = math.max(expiry(a + 2, stamp), tonumber(mv[2 * d + 2]) or 0)
  marks[#marks + 1] = 'b:' .. names[d]
  marks[#marks + 1] = int(e)
  top = math.max(top, e)
end
seq, mu = remark(mk, seq, seen, mu, me, top, now, marks)
return tail()
