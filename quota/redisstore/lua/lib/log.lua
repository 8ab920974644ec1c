-- log.lua: a budget's log, its running sum and its set-aside entries.
--
-- Keys of one (api, credential, budget), all with the credential's hash tag:
--   log  sorted set, one member per call: "NONCE:COST" ("NONCE:h:COST" for a
--        held entry, a lease's block), score = µs recorded
--   sum  string, the sum of the costs in log (a running sum)
--   exh  string, µs until which the budget is marked spent (Exhaust)
--   keep string, the id of the window the log keeps its entries for (see
--        retain.lua), with the log's lifetime; missing on logs older than it
--   old  sorted set like log: the entries a log kept for a daily window
--        set aside when their day ended, out of sum, each kept DAILYKEEP
--        after its score (see setaside); named after log, not in KEYS
--        (same hash tag, so same slot)
-- and of one (api, credential) per hour (quota.Store.Breakdown):
--   use:H  hash, field "BUDGET\x1fMETHOD\x1fJOB" = units spent in the hour
--          starting at H (Unix seconds); expires once its rows lapse
--
-- DAILYKEEP (µs) is quota.DailyKeep: how long after its score an entry of
-- a log kept for a daily window is kept, set aside once its day ended, so
-- that the budget redefined with another zone, or a sliding window, still
-- counts it (no zone's day holds an instant longer after it).

-- cost returns the units of a log member "NONCE:COST" (or "NONCE:h:COST",
-- a held entry: see take.lua).
local function cost(member)
  return tonumber(string.match(member, ':(%d+)$'))
end

-- recount sums every entry of log: only needed when the sum key was lost
-- (evicted) while its log was not. It rewrites the sum with the log's TTL.
local function recount(log, sum)
  local total = 0
  for _, m in ipairs(redis.call('ZRANGE', log, 0, -1)) do
    total = total + cost(m)
  end
  local pttl = redis.call('PTTL', log)
  if pttl > 0 then
    redis.call('SET', sum, int(total), 'PX', pttl)
  else
    redis.call('SET', sum, int(total))
  end
  return total
end

-- asidekey returns the key of log's set-aside entries: PREFIX{TAG}:old:NAME
-- for PREFIX{TAG}:log:NAME.
local function asidekey(log)
  return (string.gsub(log, ':log:([^:]*)$', ':old:%1'))
end

-- zadd adds the members and scores of flat (MEMBER, SCORE, ... as
-- ZRANGEBYSCORE WITHSCORES replies) to key, a few hundred per call.
local function zadd(key, flat)
  for i = 1, #flat, 512 do
    local args = {}
    for j = i, math.min(i + 511, #flat), 2 do
      args[#args + 1] = flat[j + 1]
      args[#args + 1] = flat[j]
    end
    redis.call('ZADD', key, unpack(args))
  end
end

-- setaside adds the entries of flat (MEMBER, SCORE, ..., oldest first),
-- which a log kept for a calendar window drops at now, to its set-aside
-- entries, drops those set aside more than keep (its asidekeep) before
-- now, and makes the key live keep past the newest.
local function setaside(log, flat, now, keep)
  local old = asidekey(log)
  zadd(old, flat)
  redis.call('ZREMRANGEBYSCORE', old, '-inf', '(' .. int(now - keep + 1))
  local ms = math.ceil((tonumber(flat[#flat]) + keep - now) / 1000)
  if ms >= 1 and redis.call('PTTL', old) < ms then
    redis.call('PEXPIRE', old, ms)
  end
end

-- prune drops the entries of log recorded before start and returns the
-- units they held; with aside (a log kept for a calendar window: its
-- asidekeep, now given) it sets them aside (setaside).
local function prune(log, start, aside, now)
  local cutoff = '(' .. int(start) -- exclusive: scores < start
  local freed = 0
  if aside then
    local gone = redis.call('ZRANGEBYSCORE', log, '-inf', cutoff, 'WITHSCORES')
    for j = 1, #gone, 2 do
      freed = freed + cost(gone[j])
    end
    if #gone > 0 then
      setaside(log, gone, now, aside)
    end
  else
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', log, '-inf', cutoff)) do
      freed = freed + cost(m)
    end
  end
  redis.call('ZREMRANGEBYSCORE', log, '-inf', cutoff)
  return freed
end

-- iscalendar reports whether window id w (false: not known) is a calendar
-- (daily or monthly) one.
local function iscalendar(w)
  return asidekeep(w) and true
end

-- asidefor returns whether a log kept for window id kept (false: not
-- known, taken as w) sets aside what it prunes when used with window w:
-- when it is kept for w, a calendar window; then for how long (asidekeep),
-- else false.
local function asidefor(kept, w)
  return (not kept or kept == w) and asidekeep(w)
end

-- back puts the set-aside entries of log recorded in the last keep (the
-- asidekeep of kept, the calendar window id the log was kept for) at now
-- back into it, and drops the others: the log's calendar window
-- changed (its keep key holds another id than the budget's), and the new
-- window may count them. v is sum's value as read before (false when
-- missing); it returns it as it is now (false: load recounts the log).
local function back(log, sum, v, now, kept)
  local keep = asidekeep(kept) or DAILYKEEP
  local old = asidekey(log)
  local es = redis.call('ZRANGEBYSCORE', old, int(now - keep + 1), '+inf', 'WITHSCORES')
  redis.call('DEL', old)
  if #es == 0 then
    return v
  end
  local had = redis.call('EXISTS', log) == 1
  zadd(log, es)
  local add = 0
  for j = 1, #es, 2 do
    add = add + cost(es[j])
  end
  -- the log lives at least keep past the newest entry put back
  local ms = math.ceil((tonumber(es[#es]) + keep - now) / 1000)
  local pttl = redis.call('PTTL', log)
  if not had or pttl >= 0 and pttl < ms then
    redis.call('PEXPIRE', log, math.max(1, ms))
  end
  if had and v then
    redis.call('INCRBY', sum, int(add)) -- INCRBY keeps the TTL
    return int(tonumber(v) + add)
  end
  redis.call('DEL', sum)
  return false
end

-- asideused returns, of a log kept for a daily window other than the one
-- a read counts from start, the units set aside since start and the
-- oldest such entry's score, merged with u and o (what the log counts,
-- and its oldest counted entry's, nil when none): what a decision would
-- count once it put them back (back). A read changes nothing.
local function asideused(log, start, u, o)
  local es = redis.call('ZRANGEBYSCORE', asidekey(log), int(start), '+inf', 'WITHSCORES')
  for j = 1, #es, 2 do
    u = u + cost(es[j])
  end
  if #es > 0 and (not o or tonumber(es[2]) < o) then
    o = tonumber(es[2])
  end
  return u, o
end

-- load drops the entries of log recorded before start, subtracting their
-- costs from sum (O(expired)), and returns the units still counted and the
-- oldest counted entry's score (nil when the log is empty), and whether the
-- log held any entry before (false: it was missing). v is sum's value as
-- read by the caller (false when the key is missing); mk, when given, the
-- owner's store-loss marker. With aside (a log kept for a daily window,
-- now given), what it drops is set aside (see prune).
local function load(log, sum, start, v, mk, aside, now)
  local used = v and tonumber(v)
  local first = redis.call('ZRANGE', log, 0, 0, 'WITHSCORES')
  if #first == 0 then
    -- empty log: nothing counts (a sum left behind by eviction goes too)
    if used then
      redis.call('DEL', sum)
    end
    return 0, nil, false
  end
  local oldest = tonumber(first[2])
  if oldest >= start then
    -- the hot path: nothing expired
    if not used then
      used = recount(log, sum)
    end
    return used, oldest, true
  end
  local freed = prune(log, start, aside, now)
  first = redis.call('ZRANGE', log, 0, 0, 'WITHSCORES')
  if #first == 0 then
    -- everything expired: the log key is gone, drop its sum too; and the
    -- marker's b:NAME (see below) with it, which a budget redefined with a
    -- shorter window or another zone leaves past the entries' new expiry:
    -- a log pruned empty lost nothing
    redis.call('DEL', sum)
    if mk then
      local f = 'b:' .. budgetname(log)
      if (tonumber(redis.call('HGET', mk, f)) or 0) > 0 then
        redis.call('HSET', mk, f, '0')
      end
    end
    return 0, nil, true
  end
  if used then
    used = used - freed
    redis.call('DECRBY', sum, int(freed)) -- DECRBY keeps the key's TTL
  else
    used = recount(log, sum)
  end
  return used, tonumber(first[2]), true
end

