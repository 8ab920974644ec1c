-- lib.lua: helpers shared by every script of redisstore. The Go side
-- prepends this file to each script body, so a script stays one EVALSHA.
--
-- Units: times are µs since the Unix epoch, costs and limits are units.
-- Everything stays below 2^53, so Lua's doubles hold it exactly.
--
-- Keys of one (api, credential, budget), all with the credential's hash tag:
--   log  sorted set, one member per call: "NONCE:COST" ("NONCE:h:COST" for a
--        held entry, a lease's block), score = µs recorded
--   sum  string, the sum of the costs in log (a running sum)
--   exh  string, µs until which the budget is marked spent (Exhaust)
--   keep string, the id of the window the log keeps its entries for (see
--        retain), with the log's lifetime; missing on logs older than it
--   old  sorted set like log: the entries a log kept for a calendar
--        (daily or monthly) window set aside when their day (month)
--        ended, out of sum, each kept DAILYKEEP (MONTHLYKEEP) after its
--        score (see setaside); named after log, not in KEYS (same hash
--        tag, so same slot)
-- and of one (api, credential) per hour (quota.Store.Breakdown):
--   use:H  hash, field "BUDGET\x1fMETHOD\x1fJOB" = units spent in the hour
--          starting at H (Unix seconds); expires once its rows lapse
--
-- A window spec is 5 ARGV values: WIN, B1, B2, B3, B4. WIN > 0 is a sliding
-- window of WIN µs (B1..B4 unused). WIN = 0 is a calendar window (daily or
-- monthly: its window id says which); B1..B4 are four consecutive resets
-- (µs: local midnights, or midnights of the 1st) that the Go side computed
-- around its estimate of now: this script knows no time zones, it picks the
-- day (month) that holds its own now.
--
-- Every script replies {STATUS, NOW, ...}. STATUS -1 means the script's now
-- fell outside B1..B4 (clock skew over a period): nothing was recorded (expired
-- entries may have been dropped), and the Go side retries with boundaries
-- around NOW.

-- int formats an integral number as a Redis argument. tostring would give
-- "1.78e+15" for a µs timestamp under Redis's Lua 5.1.
local function int(n)
  return string.format('%d', n)
end

-- budgetname returns NAME from a key PREFIX{API/OWNER}:KIND:NAME (budget
-- names hold no ':').
local function budgetname(key)
  return string.match(key, '[^:]*$')
end

-- clock returns now in µs: the caller's injected clock when given (a test),
-- else the server's own clock, which is the truth.
local function clock(arg)
  if arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME') -- {seconds, microseconds}
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- span returns, for the window spec at ARGV[i..i+4] and now: start (the
-- first µs that still counts) and reset (a daily window's next reset, or 0
-- for a sliding window). It returns nil when now is outside B1..B4.
local function span(i, now)
  local win = tonumber(ARGV[i])
  if win > 0 then
    -- sliding: an entry recorded at s counts while s > now - win
    return now - win + 1, 0
  end
  for j = i + 1, i + 3 do
    local lo, hi = tonumber(ARGV[j]), tonumber(ARGV[j + 1])
    if lo <= now and now < hi then
      return lo, hi -- today began at lo and resets at hi
    end
  end
  return nil
end

-- ttl returns the key lifetime in ms (rounded up, at least 1) that keeps a
-- log written at now until its newest entry expires: the window for a
-- sliding window, until the next reset for a daily one.
local function ttl(i, now, reset)
  local win = tonumber(ARGV[i])
  local us = win
  if win == 0 then
    us = reset - now
  end
  return math.max(1, math.ceil(us / 1000))
end

-- expiry returns when an entry recorded at s stops counting: s + win, or
-- the first of B1..B4 after s (the reset that ends its day).
local function expiry(i, s)
  local win = tonumber(ARGV[i])
  if win > 0 then
    return s + win
  end
  for j = i + 1, i + 4 do
    local b = tonumber(ARGV[j])
    if b > s then
      return b
    end
  end
  return tonumber(ARGV[i + 4])
end

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

-- DAILYKEEP (µs) is quota.DailyKeep: how long after its score an entry of
-- a log kept for a daily window is kept, set aside once its day ended, so
-- that the budget redefined with another zone, or a sliding window, still
-- counts it (no zone's day holds an instant longer after it).
local DAILYKEEP = 26 * 3600 * 1000000

-- MONTHLYKEEP (µs) is quota.MonthlyKeep: DAILYKEEP for a log kept for a
-- monthly window (31 days and 2 hours).
local MONTHLYKEEP = (31 * 24 + 2) * 3600 * 1000000

-- asidekeep returns how long a log kept for window id w (false: not known)
-- keeps an entry after its score, set aside once its period ended:
-- DAILYKEEP ('D', daily), MONTHLYKEEP ('M', monthly), or false (sliding,
-- or not known: nothing set aside).
local function asidekeep(w)
  local k = w and string.sub(w, 1, 1)
  if k == 'D' then
    return DAILYKEEP
  elseif k == 'M' then
    return MONTHLYKEEP
  end
  return false
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
-- back into it, and drops the others: the log's calendar window changed
-- (its keep key holds another id than the budget's), and the new window
-- may count them. v is sum's value as read before (false when missing); it
-- returns it as it is now (false: load recounts the log).
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

-- asideused returns, of a log kept for a calendar window other than the one
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
-- owner's store-loss marker. With aside (a log kept for a calendar
-- window: its asidekeep, now given), what it drops is set aside (see
-- prune).
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

-- Window ids, one per budget from the Go side: 'S' .. µs for a sliding
-- window, 'D' .. zone for a daily one, 'M' .. zone for a monthly one. A log keeps its entries for the
-- window in its keep key: the budget's window, or, after the window was
-- shortened, a longer sliding span, so that entries a longer window would
-- still count survive a definition change (quota.Retain).

-- longestday bounds the length of a local day (µs): what a daily window
-- can count back, and DAILYKEEP, how long a log kept for it keeps an
-- entry (set aside once its day ended).
local longestday = DAILYKEEP

-- retention returns how far back window id w can count (µs): a monthly
-- window MONTHLYKEEP (the longest month, as quota's retention).
local function retention(w)
  local k = string.sub(w, 1, 1)
  if k == 'S' then
    return tonumber(string.sub(w, 2))
  elseif k == 'M' then
    return MONTHLYKEEP
  end
  return longestday
end

-- retain returns the id of the window a log kept for kept (false: not
-- known) keeps its entries for once used with window w: quota.Retain.
local function retain(kept, w)
  if not kept or kept == w then
    return w
  end
  local rw, rk = retention(w), retention(kept)
  if string.sub(w, 1, 1) == 'S' and rw >= rk then
    return w
  end
  return 'S' .. int(math.max(rw, rk))
end

-- alive returns the first µs a log kept for window id kept (false: not
-- known, taken as w) still keeps at now, when it is used with window w
-- counting from start: what is older is gone for every window, even a
-- longer one set now. A kept calendar window other than w keeps its
-- asidekeep (quota.KeptSince), with its set-aside entries (back).
local function alive(kept, w, start, now)
  if not kept or kept == w then
    return start
  end
  return now - retention(kept) + 1
end

-- keepwin makes the keep key hold kept, the window the log keeps its
-- entries for from now on (retain), when it held stored, another: a
-- definition change extends the log's retention at the first script that
-- changes the log under it (a take, admitted or refused, a refund, a
-- settle), as the memory store's does; a read (usage, entries) changes
-- nothing. The key lives as long as the log; an emptied log needs none.
local function keepwin(log, keep, kept, stored, now)
  if stored == kept then
    return
  end
  local pttl = redis.call('PTTL', log)
  if pttl > 0 then
    -- what the log holds counts under kept until it leaves kept: the keys
    -- live that long (as an admission's, keepms), or a longer window set
    -- while the budget is spent loses them at the old window's lifetime
    local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
    local ms = #newest > 0 and math.ceil((tonumber(newest[2]) + retention(kept) - now) / 1000) or 0
    if ms > pttl then
      pttl = ms
      redis.call('PEXPIRE', log, pttl)
      local sum = string.gsub(log, ':log:([^:]*)$', ':sum:%1')
      if redis.call('PTTL', sum) > 0 then
        redis.call('PEXPIRE', sum, pttl)
      end
    end
  end
  if pttl > 0 then
    redis.call('SET', keep, kept, 'PX', pttl)
  elseif pttl == -1 then
    redis.call('SET', keep, kept)
  end
end

-- keepms returns how long (ms) the keys of a log kept for kept must live
-- after an entry recorded now, at least ms (the window's own lifetime).
local function keepms(kept, w, ms)
  if kept == w then
    return ms
  end
  return math.max(ms, math.ceil(retention(kept) / 1000))
end

-- counted returns, of a log holding total units from its oldest entry
-- oldest on (kept from kstart), the units the window counting from start
-- counts and its oldest counted entry's score (nil when none).
local function counted(log, start, kstart, total, oldest)
  if kstart >= start or not oldest or oldest >= start then
    return total, oldest -- the hot path: nothing kept beyond the window
  end
  local gap = 0
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', log, '-inf', '(' .. int(start))) do
    gap = gap + cost(m)
  end
  local first = redis.call('ZRANGEBYSCORE', log, int(start), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #first == 0 then
    return total - gap, nil
  end
  return total - gap, tonumber(first[2])
end

-- exhausted returns the µs until which the budget is marked spent, given
-- the exh key's value v (false when missing), or 0.
local function exhausted(v, now)
  local until_ = v and tonumber(v) or 0
  if until_ <= now then
    return 0 -- past marks count for nothing (the key expires on its own)
  end
  return until_
end

-- reset returns when capacity next frees for usage reports: a daily
-- window's next reset, or when a sliding window's oldest entry expires (0
-- when the log is empty).
local function nextreset(i, reset, oldest)
  if reset > 0 then
    return reset
  end
  if oldest then
    return oldest + tonumber(ARGV[i])
  end
  return 0
end

-- Store-loss marker. Every owner (hash tag) has a hash MARK beside its
-- logs, so that lost state is noticed instead of forgotten:
--   seq     bumped by every write of take, adjust and exhaust
--   u       µs until which MARK must exist: the latest of the expiries
--           below
--   e       µs until which MARK lives (its TTL ends there), past u
--   b:NAME  µs until which budget NAME's log must hold an entry (its
--           newest entry's expiry); 0 once a refund emptied the log
--   x:NAME  µs until which NAME's exhausted-until key must exist
--   l:NAME  µs until which NAME counts as spent because a loss was found
--   o       µs until which a budget the marker holds neither b:NAME nor
--           x:NAME of counts as lost: set, with the rest of the marker
--           dropped, by the take that finds the owner's writes lost, so
--           that every budget of the owner is marked spent at its first
--           decision, not only those that take charged (see take.lua)
--   f       µs of that take: a budget the marker holds neither b:NAME nor
--           x:NAME of also counts as lost while an entry its own window
--           counts could have been recorded by then (o is only what the
--           finder saw); the marker then lives a year
--   w:B     the seq of the last admission of the processes whose stores
--           drew bucket B (loss.go: ownBuckets): a process whose last
--           admission (OWN) is above it finds its admission lost, even
--           once other processes' writes took seq back past what it saw
--   r       the seq the marker started afresh at after a loss was found:
--           an admission at or below it is covered by that finding
--   v       the owner's change version (quota.ChangeVersioner): bumped by
--           every adjust and exhaust, in the same script, and by nothing
--           else (take, refund and settle leave it); read with one HMGET.
--           It lives and goes with the marker, which lives while any
--           entry of the owner is held (its b:NAME); a loss that drops the
--           marker drops it too (read as 0), and the next bump starts it
--           at the script's now in µs (bumpversion), so that it never
--           comes back to a value an open lease read before the loss
-- and two fields take.lua keeps so that a decision does less (not about
-- loss: a missing one only costs the next decision a renewal or a read):
--   k:NAME  µs until which NAME's log, sum and keep keys are known to live
--           (their lifetimes are renewed when a decision needs them longer)
--   d:NAME  the start (µs) of the day since which NAME's daily log holds
--           entries of that day only: its running sum then decides alone
-- A process remembers the highest seq it saw per owner and until when
-- MARK must live, and passes them to take (SEEN, SEEN_UNTIL): a lower seq,
-- or none, before SEEN_UNTIL means the store lost writes it had
-- acknowledged (a restart without persistence, FLUSHALL, a failover that
-- lost the last writes). A log that is empty before its b:NAME, or an
-- exhausted key missing before its x:NAME, means the store lost that
-- budget's state (eviction), whichever process asks.
--
-- A marker made afresh (none there, by a call that knows of no marker it
-- should find: SEEN 0) starts its seq at FRESH - now, not at 1. A process
-- that saw an earlier marker saw a higher seq (FRESH less an earlier now,
-- plus fewer decisions than microseconds passed since), so it finds the
-- loss whatever the number of decisions made on the new marker before it
-- asks: a marker started at 1 let a process that started after the loss,
-- and so knew of nothing, hide it by deciding more often than the older
-- process had seen.
local FRESH = 4503599627370496 -- 2^52: seqs stay below 2^53, exact

-- bumpversion changes the owner's change version, field v of marker mk:
-- one more, or on a marker without it (made afresh, or after a loss
-- dropped it) now in µs, not 1: a version an open lease read before a
-- loss does not come back with the next adjust or exhaust (no count of
-- bumps since an earlier start reaches the microseconds since then).
local function bumpversion(mk, now)
  if redis.call('HINCRBY', mk, 'v', 1) == 1 then
    redis.call('HSET', mk, 'v', int(now))
  end
end

-- remark writes fields (a flat list of names and values) to the marker mk,
-- with seq bumped past both seq and seen and u raised to until_, and
-- returns the new seq and u. u stays exact (a process that saw it expects
-- the marker until then); the marker's own lifetime, e, is extended past u
-- to twice what u needs (e = u + (u - now)), so that a steady stream of
-- decisions extends it once a window, not on every call.
local function remark(mk, seq, seen, u, e, until_, now, fields)
  -- a mark years ahead (Exhaust until far away) keeps the marker a year at
  -- most: past that, a loss goes unnoticed rather than overflow a TTL
  until_ = math.min(until_, now + 366 * 86400 * 1000000)
  if seq == 0 and seen == 0 then
    seq = math.max(0, FRESH - now - 1) -- made afresh: see FRESH
  end
  seq = math.max(seq, seen) + 1
  fields[#fields + 1] = 'seq'
  fields[#fields + 1] = int(seq)
  if until_ > u then
    u = until_
    fields[#fields + 1] = 'u'
    fields[#fields + 1] = int(u)
  end
  local grow = u > e
  if grow then
    e = u + math.max(0, u - now)
    fields[#fields + 1] = 'e'
    fields[#fields + 1] = int(e)
  end
  redis.call('HSET', mk, unpack(fields))
  if grow or e <= now then
    -- e <= now: a marker that protects nothing goes at once
    redis.call('PEXPIRE', mk, math.max(1, math.ceil((e - now) / 1000)))
  end
  return seq, u
end

-- keephash makes the hash key live at least until the instant until (µs):
-- it only ever extends the hash's lifetime.
local function keephash(key, until_, now)
  local ms = math.ceil((until_ - now) / 1000)
  if ms < 1 then
    return
  end
  local pttl = redis.call('PTTL', key)
  if pttl < ms then
    redis.call('PEXPIRE', key, ms)
  end
end
