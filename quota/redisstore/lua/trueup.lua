-- trueup.lua: bring one budget's count up to what the upstream reports
-- (backend.TrueUpRequest): prune the log as a take would, count it at
-- now, and when USED is more, record one entry of the difference,
-- NONCE:COST, stamped so that it expires at UNTIL (a sliding window of
-- WIN: UNTIL-WIN clamped to [now-WIN+1, now]; a daily one: now). The
-- entry may sit before newer ones: the log is a sorted set, so RetryAt's
-- walk and pruning find it in its place. With LOWER, the counted entries
-- stamped before SINCE that are not held (NONCE:h:COST) are replaced by
-- one entry of USED when they hold more. With ADD, USED is added as it
-- is, stamped at now (backend.TrueUpRequest.Add). An exhaustion mark stays.
--
-- The store-loss marker follows (see lib.lua): b:NAME rises to the new
-- entry's expiry (after a lowering: the newest entry's, 0 once the log is
-- empty), so a take never finds the log missing before then for a loss,
-- nor misses one; seq and u as any write's (remark), so a flush after a
-- true-up is found by the process that made it; v (the change version) is
-- bumped when units were added or removed; k:NAME is cleared, so the next
-- take renews the keys' lifetimes for its own entry. A budget whose state
-- a take would find lost (its log missing before b:NAME, or a marker
-- started afresh after a loss that has heard nothing of it) is left as it
-- is: the next take finds the loss and counts the budget spent.
--
-- KEYS: log, sum, exh, keep, the owner's marker, the breakdown hashes of
-- two consecutive hours H and H+1h (the script picks now's, as take.lua).
-- ARGV[1] now or ''; ARGV[2] USED; ARGV[3] nonce; ARGV[4..8] a window
-- spec; ARGV[9] the window id; ARGV[10] UNTIL (µs; 0: none); ARGV[11]
-- MODE ('0' up, '1' LOWER too, 'A' ADD); ARGV[12] SINCE (µs); ARGV[13] H (µs); ARGV[14] KEEP
-- (µs a breakdown row is kept after its hour ends); ARGV[15] the breakdown
-- field.
--
-- Reply: {1, NOW, LEFT, COUNTED, ADDED, USED, RESET, EXHAUSTED_UNTIL,
-- LOSS, SEQ, U}: LEFT 1 when the budget's state was found lost and left
-- as it is (then SEQ and U are 0); LOSS 1 while the exhaustion mark is a
-- store-loss reaction.

local now = clock(ARGV[1])
local start, r = span(4, now)
if not start then
  return {-1, now}
end
local log, sum, exh, keep, mk = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local name, w, win = budgetname(log), ARGV[9], tonumber(ARGV[4])
local mv = redis.call('HMGET', mk, 'seq', 'u', 'e', 'b:' .. name, 'x:' .. name, 'o', 'f', 'l:' .. name)
local bm = tonumber(mv[4]) or 0
local lost = bm > now and redis.call('EXISTS', log) == 0
if not lost and not mv[4] and not mv[5] then
  -- take.lua's unmarked: a marker started afresh after a loss of the
  -- owner's writes, that has heard nothing of this budget
  local mo, mf = tonumber(mv[6]) or 0, tonumber(mv[7])
  lost = mo > now or (mf and expiry(4, mf) + (win > 0 and math.ceil(win / 10) or 0) > now) or false
end
if lost then
  return {1, now, 1, 0, 0, 0, 0, 0, 0, 0, 0}
end

local lv = redis.call('MGET', sum, keep)
if lv[2] and lv[2] ~= w and iscalendar(lv[2]) then
  lv[1] = back(log, sum, lv[1], now, lv[2]) -- the calendar window changed
end
local kstart = alive(lv[2], w, start, now)
local total, oldest = load(log, sum, kstart, lv[1], mk, asidefor(lv[2], w), now)
local kept = retain(lv[2], w)
if total == 0 and not oldest then
  kept = w -- an empty log starts afresh
end
keepwin(log, keep, kept, lv[2], now)
local count = counted(log, start, kstart, total, oldest)

local used, until_, nonce = tonumber(ARGV[2]), tonumber(ARGV[10]), ARGV[3]
local added, stamp = 0, now
if win > 0 then
  stamp = math.min(math.max(until_ - win, now - win + 1), now)
end
if ARGV[11] == 'A' then
  -- an add: the excess of a settled call, whatever the count
  if used > 0 then
    added, stamp = used, now
    redis.call('ZADD', log, int(stamp), nonce .. ':' .. int(added))
  end
elseif until_ > now and used > count then
  added = used - count
  redis.call('ZADD', log, int(stamp), nonce .. ':' .. int(added))
elseif until_ > now and ARGV[11] == '1' and tonumber(ARGV[12]) > start then
  local es = redis.call('ZRANGEBYSCORE', log, int(start), '(' .. ARGV[12])
  local before, drop = 0, {}
  for _, m in ipairs(es) do
    if not string.find(m, ':h:%d+$') then
      before = before + cost(m)
      drop[#drop + 1] = m
    end
  end
  if used < before then
    added = used - before
    if used > 0 then
      -- added before the others go, so the log key never goes away
      redis.call('ZADD', log, int(stamp), nonce .. ':' .. int(used))
    end
    for i = 1, #drop, 512 do
      redis.call('ZREM', log, unpack(drop, i, math.min(i + 511, #drop)))
    end
  end
end

local fields = {}
if added ~= 0 then
  total = total + added
  local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
  local e = 0
  if #newest == 0 then
    redis.call('DEL', sum, keep)
  else
    -- the keys live until the newest entry leaves the window and the kept
    -- window (as an admission's: see take.lua); never shorter than they do
    local ms
    if win > 0 then
      ms = math.ceil((tonumber(newest[2]) + win - now) / 1000) + math.ceil(win / 10000)
    else
      ms = math.ceil((r + (asidekeep(w) or DAILYKEEP) - now) / 1000)
    end
    ms = math.max(1, keepms(kept, w, ms), redis.call('PTTL', log))
    redis.call('PEXPIRE', log, ms)
    redis.call('SET', sum, int(total), 'PX', ms)
    redis.call('SET', keep, kept, 'PX', ms)
    e = expiry(4, tonumber(newest[2]))
  end
  if added > 0 then
    e = math.max(e, bm)
  end
  fields = {'b:' .. name, int(e), 'k:' .. name, '0'}
  -- usage by method: the hour of now's hash (see take.lua)
  local hour = 3600000000
  local h0, ukey = tonumber(ARGV[13]), KEYS[6]
  if now >= h0 + hour and now < h0 + 2 * hour then
    ukey, h0 = KEYS[7], h0 + hour
  elseif now < h0 or now >= h0 + hour then
    h0 = now - now % hour
    ukey = string.match(ukey, '^(.*:use:)%d+$') .. int(h0 / 1000000)
  end
  redis.call('HINCRBY', ukey, ARGV[15], int(added))
  keephash(ukey, h0 + hour + tonumber(ARGV[14]), now)
end

local seq, mu = tonumber(mv[1]) or 0, tonumber(mv[2]) or 0
if added ~= 0 then
  bumpversion(mk, now) -- the owner's change version (see lib.lua)
  local top = tonumber(fields[2])
  seq, mu = remark(mk, seq, 0, mu, tonumber(mv[3]) or 0, top, now, fields)
end

local first = redis.call('ZRANGE', log, 0, 0, 'WITHSCORES')
local u, o = counted(log, start, kstart, total, first[2] and tonumber(first[2]))
local x = exhausted(redis.call('GET', exh), now)
local lm = tonumber(mv[8])
return {1, now, 0, count, added, u, nextreset(4, r, o), x,
  (x > 0 and lm == x) and 1 or 0, seq, mu}
