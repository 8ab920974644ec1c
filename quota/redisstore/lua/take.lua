-- take.lua: one decision for one credential, atomically over every budget
-- of the charge: all pay or none does.
--
-- The argument names below are protocol.go's; the positions of ARGV come
-- from there as constants (A_x, D_x; see that file).
--
-- KEYS: per debit d (1-based): log, sum, exh at 3d-2, 3d-1, 3d; then the
-- keep keys, debit d's at 3n+d; then the breakdown hashes of two
-- consecutive hours, H and H+1h (see usage below), at 4n+1 and 4n+2; then
-- the owner's store-loss marker (see lib/marker.lua), last.
-- ARGV: NOW (µs) or '' for the server clock; NONCE (no ':'); SEEN,
-- SEEN_UNTIL (what this process saw of the marker, 0 0 when nothing);
-- TRUST ('1': on a loss, decide on what the store holds; 'G0' and 'G1'
-- say '0' and '1' and skip decide, for tests); H (µs), KEEP (µs a
-- breakdown row is kept after its hour ends); HOLD (µs past now at which
-- entries are recorded: a lease's block, held until the lease ends, a
-- daily one no later than the day's last µs; 0 for none); then per debit
-- from A_DEBIT + N_DEBIT(d-1): NAME, COST, LIMIT, a window spec (WIN,
-- B1..B4), the window id WID and the breakdown field FIELD
-- "BUDGET\x1fMETHOD\x1fJOB"; last, WBUCKET, the marker field w:BUCKET of
-- this process's admissions, and OWN, the seq of its last admission (0:
-- none known; see lostAll).
--
-- Reply: {OK, NOW, then per debit USED, RESET, EXHAUSTED_UNTIL, RETRY_AT}
-- (0 where none), then SEQ, U (the marker after this call), LOST_ALL and
-- per debit LOST (1 where this call found the budget's state lost). OK is
-- 1 when every budget paid (USED is after the charge), 0 when none did
-- (USED is the current state, RETRY_AT set on each refusing budget), -1 on
-- clock skew (see lib/marker.lua). Unless TRUST, a budget found lost is marked
-- spent until its next reset (daily) or for one window (sliding), and the
-- charge is refused.
--
-- A loss of the owner's writes (LOST_ALL) affects every budget of the
-- owner, not only those this charge names, which are all this script can
-- mark. So, unless TRUST, it starts the marker afresh with o (see lib/marker.lua):
-- until then a budget the new marker has heard nothing of counts as lost
-- at its first decision, in whichever process, and is marked spent like
-- the others. (The limiter that found the loss marks the other budgets it
-- knows too, in calls of its own after this one: without o, a decision of
-- another process in between found an emptied log and a marker that said
-- nothing of it, and admitted units spent before the loss again.) Such a
-- budget is not reported LOST: the loss was found and reported once.
--
-- A charge of one budget whose state is in order is decided first by
-- this script's prefix (lone.lua: decide, lib/decide.lua, for one charge,
-- before this path's functions are made), with the same commands and
-- replies, and less Lua; what it leaves comes here.
--
-- What a decision costs Redis is what this script is shaped by (issue 13):
--
-- A daily window is a fixed window, so its running sum decides it alone
-- once the log is known to hold today's entries only: the marker's
-- d:NAME is the start of the day since which the log holds no entry of
-- another day (written by the first decision of a day, which drops the
-- day before; cleared by adjust). Then an admission is ZADD + INCRBY and
-- a refusal reads nothing but the sum: its retry time is the reset.
--
-- The keys' lifetimes are not renewed on every admission: the marker's
-- k:NAME says until when the log, sum and keep keys are known to live,
-- and they are renewed (for twice the window, a sliding window's; until
-- asidekeep past the reset, a calendar one's) only when an admission needs them to live
-- longer, or when one of them was found missing.

-- what the prefix (lone.lua) read before it left the decision here:
-- read again only when it was not (nothing was written in between)
local fnow, fmv, fv = lnow, lmv, lv

local now = fnow or clock(ARGV[A_NOW])
local nonce = ARGV[A_NONCE]
local n = (#KEYS - 3) / 4
local seen = tonumber(ARGV[A_SEEN])
local until_seen = tonumber(ARGV[A_SEEN_UNTIL])
local trust = ARGV[A_TRUST] == '1' or ARGV[A_TRUST] == 'G1'

-- store-loss marker: one read of seq, u, e and each debit's b:, x:, k:
-- and d: (at 4d, 4d+1, 4d+2, 4d+3 of mv), then w:BUCKET and r (at 4n+4,
-- 4n+5)
local mk = KEYS[#KEYS]
local wb, own = ARGV[#ARGV + A_WBUCKET], tonumber(ARGV[#ARGV + A_OWN])
local mv = fmv
if mv then
  -- read by decide
elseif n == 1 then -- the usual charge: no table to build
  mv = readmark(mk, ARGV[A_DEBIT + D_NAME], wb)
else
  local fields = {'seq', 'u', 'e'}
  for d = 1, n do
    local name = ARGV[A_DEBIT + N_DEBIT * (d - 1) + D_NAME]
    fields[4 * d], fields[4 * d + 1], fields[4 * d + 2], fields[4 * d + 3] =
      'b:' .. name, 'x:' .. name, 'k:' .. name, 'd:' .. name
  end
  fields[4 * n + 4], fields[4 * n + 5] = wb, 'r'
  mv = redis.call('HMGET', mk, unpack(fields))
end
local seq = tonumber(mv[1]) or 0
-- a lower seq (or none) while the marker must exist: acknowledged writes
-- of this owner were lost, so every budget of it is affected
-- The sequence alone misses a loss once others catch it up: a process
-- that saw a write the failover lost (seq S+1) finds S+1 again after
-- another process, which never saw it, writes on the new master. So each
-- process also marks its own admissions in w:BUCKET (a field of its own,
-- one of a bounded number) and passes the seq of its last one (OWN): a
-- field below it means that admission was lost, whatever seq says.
-- (see loss.lua's lostwrites)
local lostAll = lostwrites(seq, seen, until_seen, own, mv[4 * n + 4], mv[4 * n + 5], now)

-- unmarked reports whether debit d's budget counts as lost because the
-- marker was started afresh after a loss of the owner's writes and has
-- heard nothing of the budget since (its o and f; read once, and only for
-- a budget the marker holds neither b:NAME nor x:NAME of: rare). Such a
-- budget counts as lost until o, and, by its own window, for as long as an
-- entry it recorded before the finding, at f, can count: o is what the
-- finder saw of the marker, and a budget only other processes charge may
-- have entries that outlive it.
local mo, mf
local function unmarked(d)
  if lostAll or mv[4 * d] or mv[4 * d + 1] then
    return false
  end
  if not mo then
    local of = redis.call('HMGET', mk, 'o', 'f')
    mo, mf = tonumber(of[1]) or 0, tonumber(of[2])
  end
  if mo > now then
    return true
  end
  if not mf then
    return false
  end
  local i = A_DEBIT + N_DEBIT * (d - 1) + D_WIN -- the debit's window spec
  local win = tonumber(ARGV[i])
  -- a sliding entry decided by f may be held up to a tenth of its window
  -- past it (a lease's block)
  return expiry(i, mf) + (win > 0 and math.ceil(win / 10) or 0) > now
end

-- trim drops the entries of a sliding log recorded before start, without
-- touching its sum, and returns the units they held, the oldest entry left
-- (false when none) and whether the log held any entry before (false: it
-- was missing). In steady state one entry expires per admission: one read
-- of the two oldest entries and one removal decide it.
local function trim(log, start)
  local first = redis.call('ZRANGE', log, 0, 1, 'WITHSCORES')
  if #first == 0 then
    return 0, false, false
  end
  local s1 = tonumber(first[2])
  if s1 >= start then
    return 0, s1, true -- the hot path: nothing expired
  end
  if #first == 2 or tonumber(first[4]) >= start then
    redis.call('ZREMRANGEBYRANK', log, 0, 0)
    return cost(first[1]), #first == 4 and tonumber(first[4]), true
  end
  local freed = prune(log, start)
  local f = redis.call('ZRANGE', log, 0, 0, 'WITHSCORES')
  return freed, #f > 0 and tonumber(f[2]), true
end

-- Per debit d, st holds from S(d-1)+1 on: START (the first µs the window
-- counts), R (a daily window's reset, 0 for a sliding one), DAY (the
-- day's start as the Go side wrote it: what d:NAME holds), TOTAL (the
-- units the log holds), KEPT (the window the log keeps entries for),
-- HELD (what the sum key holds, false when missing: trim leaves it
-- behind until the decision writes the right value), EMPTY, USED (the
-- units the window counts), OLDEST (the oldest counted entry, false when
-- none), LOST, the keep key's value, the exhausted-until mark and B (what
-- the log must hold an entry until, as this decision found it: b:NAME, or
-- 0 once the log was found pruned empty). One flat table: tables are what
-- a script's time goes to, after its commands.
local st, S = {}, 13

-- every debit's window first: on clock skew nothing is written. For a
-- daily window, today is usually the middle pair of B1..B4, tried first.
for d = 1, n do
  local b, i = S * (d - 1), A_DEBIT + N_DEBIT * (d - 1) + D_WIN -- ARGV[i] is WIN
  local win = tonumber(ARGV[i])
  if win > 0 then
    st[b + 1], st[b + 2], st[b + 3] = now - win + 1, 0, false
  else
    local j = i + 2
    local lo, hi = tonumber(ARGV[j]), tonumber(ARGV[j + 1])
    if now < lo then
      j = i + 1
      lo, hi = tonumber(ARGV[j]), lo
    elseif now >= hi then
      j = i + 3
      lo, hi = hi, tonumber(ARGV[j + 1])
    end
    if now < lo or now >= hi then
      return {-1, now}
    end
    st[b + 1], st[b + 2], st[b + 3] = lo, hi, ARGV[j]
  end
end

local reply, ok, marks, top = {1, now}, 1, {}, 0

for d = 1, n do
  local b, k, a = S * (d - 1), 3 * d - 2, A_DEBIT + N_DEBIT * (d - 1)
  local name, c, limit, win = ARGV[a + D_NAME], tonumber(ARGV[a + D_COST]), tonumber(ARGV[a + D_LIMIT]), tonumber(ARGV[a + D_WIN])
  local start, r, w = st[b + 1], st[b + 2], ARGV[a + D_WID]
  -- one read for the running sum, the exhausted-until mark and the kept
  -- window
  local v = d == 1 and fv or redis.call('MGET', KEYS[k + 1], KEYS[k + 2], KEYS[3 * n + d])
  local u, o, total, kept, held, empty
  local had = true -- the log held entries before this decision touched it
  local fast = v[1] and win == 0 and v[3] == w and mv[4 * d + 3] == st[b + 3]
  if fast then
    -- the log holds today's entries only: the sum decides; but the log
    -- must be there (one lost on its own is a loss, found below)
    total = tonumber(v[1])
    u, o, kept, held, empty = total, false, w, total, false
    had = redis.call('EXISTS', KEYS[k]) == 1
  else
    if v[3] and v[3] ~= w and iscalendar(v[3]) then
      -- the calendar window changed: what it set aside may count now
      -- (v is a fresh table: MGET's reply, or decide's, not used again)
      v[1] = back(KEYS[k], KEYS[k + 1], v[1], now, v[3])
    end
    kept = retain(v[3], w)
    local kstart = alive(v[3], w, start, now)
    if win > 0 then
      local freed
      freed, o, had = trim(KEYS[k], kstart)
      held = v[1] and tonumber(v[1])
      if o and held then
        total = held - freed
      elseif o then
        total = recount(KEYS[k], KEYS[k + 1]) -- a sum lost while its log was not
        held = total
      else
        total = 0 -- an empty log: nothing counts (a sum left behind is overwritten)
      end
    else
      -- load leaves the sum right, or deletes it with an empty log
      total, o, had = load(KEYS[k], KEYS[k + 1], kstart, v[1], nil, asidefor(v[3], w), now)
      o = o or false
      held = o and total
    end
    empty = total == 0 and not o
    if empty then
      kept = w -- an empty log starts afresh
    end
    u, o = counted(KEYS[k], start, kstart, total, o or nil)
    o = o or false
    if win == 0 and kept == w then
      -- the first decision of a day dropped the days before; unless the
      -- clock stepped back over a reset (an entry of a later day), the
      -- log now holds this day's entries only, and the sum decides
      -- until the reset
      local later = false
      if o then
        local newest = redis.call('ZRANGE', KEYS[k], -1, -1, 'WITHSCORES')
        later = tonumber(newest[2]) >= r
      end
      if not later then
        marks[#marks + 1] = 'd:' .. name
        marks[#marks + 1] = st[b + 3]
      elseif mv[4 * d + 3] then
        -- an entry recorded now would break what d:NAME says of another day
        marks[#marks + 1] = 'd:' .. name
        marks[#marks + 1] = '0'
      end
    end
  end
  local exh = v[2] and tonumber(v[2]) or 0
  if exh <= now then
    exh = 0 -- past marks count for nothing (the key expires on its own)
  end
  local retry = 0
  local deficit = u + c - limit
  if deficit > 0 and fast then
    retry = r -- every entry counted today expires at the reset
  elseif deficit > 0 then
    -- walk the oldest entries until their costs cover the deficit: the
    -- charge fits once the entry that covers it has expired
    -- (a few entries first: one or two usually cover the deficit, and every
    -- call after a budget runs out is a refusal; then 1000 at a time, by
    -- rank from the first counted entry: an offset into ZRANGEBYSCORE
    -- would make a deep walk, a limit lowered far under a long log's sum,
    -- quadratic in the entries walked)
    local freed, batch = 0, redis.call('ZRANGEBYSCORE', KEYS[k], int(start), '+inf', 'WITHSCORES', 'LIMIT', 0, 4)
    local rank
    while retry == 0 and #batch > 0 do
      local s
      freed, s = walk(batch, 1, freed, deficit)
      if s then
        retry = expiry(a + D_WIN, s)
      end
      if retry > 0 or not rank and #batch < 8 then
        break -- covered, or every counted entry walked
      end
      rank = rank or redis.call('ZCOUNT', KEYS[k], '-inf', '(' .. int(start)) + 4
      batch = redis.call('ZRANGE', KEYS[k], rank, rank + 999, 'WITHSCORES')
      rank = rank + 1000
    end
    if retry == 0 then
      -- the entries cover less than the sum claimed: the sum was stale
      -- (a lost key); trust the log and decide again
      total = recount(KEYS[k], KEYS[k + 1])
      held = total
      u, o = counted(KEYS[k], start, alive(v[3], w, start, now), total, o or nil)
      o = o or false
      if u + c > limit then
        retry = expiry(a + D_WIN, o or now) -- cannot happen while cost <= limit
      end
    end
  end
  if exh > retry then
    retry = exh
  end
  if retry > 0 then
    ok = 0
  end
  -- a log missing before its newest entry's expiry, or an exhausted mark
  -- gone before its time: the store lost this budget's state. (A log this
  -- decision pruned empty lost nothing: a budget redefined with a shorter
  -- window, or another zone, lets entries go before the expiry b:NAME
  -- noted; b:NAME starts afresh with the next entry.)
  local bm = tonumber(mv[4 * d]) or 0
  local gone = not had and bm > now
  if had and empty and bm > now then
    bm = 0
    marks[#marks + 1] = 'b:' .. name
    marks[#marks + 1] = '0'
  end
  local xgone = exh == 0 and mv[4 * d + 1] and tonumber(mv[4 * d + 1]) > now
  local found = lostAll or gone or xgone
  local lost = found or unmarked(d)
  if gone then
    marks[#marks + 1] = 'b:' .. name -- repaired: found once, not again
    marks[#marks + 1] = '0'
  end
  if xgone then
    marks[#marks + 1] = 'x:' .. name
    marks[#marks + 1] = '0'
  end
  if lost and not trust then
    -- count the budget as spent until its next reset, or for one window,
    -- in the store, so every process sharing it stops
    local until_ = r > 0 and r or now + win
    until_ = math.max(until_, exh)
    redis.call('SET', KEYS[k + 2], int(until_), 'PX', math.max(1, math.ceil((until_ - now) / 1000)))
    exh, retry = until_, math.max(retry, until_)
    marks[#marks + 1] = 'x:' .. name
    marks[#marks + 1] = int(until_)
    marks[#marks + 1] = 'l:' .. name
    marks[#marks + 1] = int(until_)
    top = math.max(top, until_)
    ok = 0
  end
  st[b + 4], st[b + 5], st[b + 6], st[b + 7], st[b + 8], st[b + 9], st[b + 10], st[b + 11], st[b + 12], st[b + 13] =
    total, kept, held, empty, u, o, found or false, v[3], exh, bm
  local at = #reply
  reply[at + 1] = u
  if r > 0 then
    reply[at + 2] = r
  else
    reply[at + 2] = o and o + win or 0 -- when the oldest entry expires
  end
  reply[at + 3] = exh
  reply[at + 4] = retry
end

-- tail appends the marker's state and what was found lost to the reply.
local function tail(mu)
  reply[#reply + 1] = seq
  reply[#reply + 1] = mu
  reply[#reply + 1] = lostAll and 1 or 0
  for d = 1, n do
    reply[#reply + 1] = st[S * (d - 1) + 10] and 1 or 0
  end
  return reply
end

-- mark writes marks to the marker (seq bumped, u raised to top) and
-- returns the new seq and u. After a loss of the owner's writes, unless
-- TRUST, the marker starts afresh (what a failover left of it is stale)
-- with o: until what this process saw the marker had to live (the newest
-- entry's expiry of any budget of the owner), a budget it has heard
-- nothing of counts as lost.
local function mark()
  local mu, me = tonumber(mv[2]) or 0, tonumber(mv[3]) or 0
  if lostAll and not trust then
    redis.call('DEL', mk)
    local o = until_seen
    marks[#marks + 1] = 'o'
    marks[#marks + 1] = int(o)
    marks[#marks + 1] = 'f'
    marks[#marks + 1] = int(now)
    -- the marker keeps f for as long as a budget this process never saw
    -- may have entries to count (remark keeps it a year at most)
    top, mu, me = math.max(top, o, now + YEAR), 0, 0
    local s, u = remark(mk, seq, seen, mu, me, top, now, marks)
    redis.call('HSET', mk, 'r', int(s))
    return s, u
  end
  return remark(mk, seq, seen, mu, me, top, now, marks)
end

if ok == 0 then
  reply[1] = 0
  -- what trim dropped leaves the sum: the log is the truth; and a
  -- definition change extends the log's retention now, as on admission
  for d = 1, n do
    local b = S * (d - 1)
    local held, total = st[b + 6], st[b + 4]
    if held and held ~= total and not st[b + 7] then
      redis.call('INCRBY', KEYS[3 * d - 1], int(total - held))
    end
    if not st[b + 7] then
      keepwin(KEYS[3 * d - 2], KEYS[3 * n + d], st[b + 5], st[b + 11], now)
    end
  end
  local mu = tonumber(mv[2]) or 0
  if #marks > 0 or lostAll then
    seq, mu = mark()
  end
  return tail(mu)
end

-- the breakdown hash of now's hour: one of the two the Go side named
-- around its estimate of now; when the estimate was off (the Redis clock
-- moved against the host's), the hash of now's hour is named here, with the
-- same prefix and hash tag, so in the same Cluster slot
local h0 = tonumber(ARGV[A_H])
local ukey = KEYS[4 * n + 1]
if now >= h0 + HOUR and now < h0 + 2 * HOUR then
  ukey, h0 = KEYS[4 * n + 2], h0 + HOUR
elseif now < h0 or now >= h0 + HOUR then
  h0 = now - now % HOUR
  ukey = string.match(ukey, '^(.*:use:)%d+$') .. int(h0 / 1000000)
end
local hold = tonumber(ARGV[A_HOLD])
local snow = int(now)

-- every budget can pay: record one entry per budget, whatever the cost
for d = 1, n do
  local b, k, a = S * (d - 1), 3 * d - 2, A_DEBIT + N_DEBIT * (d - 1)
  local name, c, win = ARGV[a + D_NAME], tonumber(ARGV[a + D_COST]), tonumber(ARGV[a + D_WIN])
  local r, total, kept, held = st[b + 2], st[b + 4], st[b + 5], st[b + 6]
  local stamp, sstamp = now, snow
  if hold > 0 then
    -- a lease's block, held where the lease ends; a daily entry counts
    -- all day wherever it sits, so it is held no later than the day's
    -- last µs (adjust keeps held entries: see adjust.lua)
    stamp = now + hold
    if win == 0 then
      stamp = math.min(stamp, r - 1)
    end
    sstamp = int(stamp)
  end
  -- a held entry's member says so (NONCE:h:COST): Adjust keeps it by
  -- what it is, not by its stamp
  redis.call('ZADD', KEYS[k], sstamp, nonce .. (hold > 0 and ':h:' or ':') .. ARGV[a + D_COST])
  -- the keys must live until the newest entry leaves the window and the
  -- kept window; idle keys vanish
  -- (see lifetime.lua)
  local w = ARGV[a + D_WID]
  local ms = lifetime(win, r, now, w)
  if kept ~= w then
    ms = keepms(kept, w, ms)
  end
  -- k:NAME says until when the keys are known to live: renew their
  -- lifetimes when that is short of what this entry needs, or when a key
  -- was missing. A calendar log's keys live until asidekeep past the reset
  -- (see lib/log.lua's setaside), so they are renewed once a day; a sliding log's for twice what the entry needs,
  -- so that a steady stream renews them once a window (an idle log's
  -- keys go within twice its window). SET with PX writes the new sum and
  -- its lifetime in one call.
  local need = r + (asidekeep(w) or 0)
  local claim = need
  if win > 0 or kept ~= w then
    -- (less the millisecond a PEXPIRE rounds to: k:NAME never claims
    -- more than the keys' TTL gives)
    need = now + (ms - 1) * 1000
    if win > 0 then
      ms = 2 * ms
    end
    claim = now + (ms - 2) * 1000
  end
  if st[b + 7] or not held or st[b + 11] ~= kept or (tonumber(mv[4 * d + 2]) or 0) < need then
    redis.call('PEXPIRE', KEYS[k], ms)
    redis.call('SET', KEYS[k + 1], int(total + c), 'PX', ms)
    redis.call('SET', KEYS[3 * n + d], kept, 'PX', ms)
    marks[#marks + 1] = 'k:' .. name
    marks[#marks + 1] = int(claim)
  elseif total == held then
    redis.call('INCRBY', KEYS[k + 1], ARGV[a + D_COST]) -- INCRBY keeps the TTL
  else
    redis.call('INCRBY', KEYS[k + 1], int(total + c - held))
  end
  -- usage by method and job: one HINCRBY on the hour's hash; a new field
  -- (rare: once per hour, method and job) makes the hash last until its
  -- rows may be dropped
  if redis.call('HINCRBY', ukey, ARGV[a + D_FIELD], ARGV[a + D_COST]) == c then
    keephash(ukey, h0 + HOUR + tonumber(ARGV[A_KEEP]), now)
  end
  local at = 2 + 4 * (d - 1)
  reply[at + 1] = st[b + 8] + c
  if win > 0 then
    -- the new entry is the oldest when the clock stepped back (TIME after
    -- a failover or an NTP step), or when no other is counted; a held
    -- entry sits at its stamp, not at now
    local o = st[b + 9]
    reply[at + 2] = math.min(o or stamp, stamp) + win
  end
  -- the log must now hold an entry until this one expires
  local e = r
  if win > 0 then
    e = stamp + win
  end
  local bm = st[b + 13]
  if e > bm then
    marks[#marks + 1] = 'b:' .. name
    marks[#marks + 1] = int(e)
  else
    e = bm
  end
  top = math.max(top, e)
end
local mu
seq, mu = mark()
-- this admission, as this process's own (see lostAll)
redis.call('HSET', mk, wb, int(seq))
return tail(mu)
