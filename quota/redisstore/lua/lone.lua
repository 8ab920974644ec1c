-- lone.lua: take.lua's prefix, the lone decision (issue 26).
--
-- The decisions decide (lib/decide.lua) makes for batch.lua, made for one
-- charge of one budget alone, which is what most decisions are (a fleet of
-- single-threaded processes never batches). What a lone decision costs
-- Redis is mostly not its commands but the Lua around them: the closures
-- a script makes on every run, and the tables and loops decide needs for
-- k decisions. So this runs before take.lua's general path defines its
-- functions (only those used here are made first), and decides one
-- decision with no table but its reply: the same commands, effects and
-- replies as decide(1) (TestFastMatchesGeneral, TestBatchMatchesOneByOne).
--
-- What it leaves (anything decide leaves: see there) goes to take.lua's
-- general path, which reads now, the marker and the sum, exhausted mark
-- and kept window from lnow, lmv, lv when they were read here (nothing was
-- written in between).
local function lone()
  local now = clock(ARGV[S_NOW])
  local h0, name, limit, win = tonumber(ARGV[S_H]), ARGV[S_NAME], tonumber(ARGV[S_LIMIT]), tonumber(ARGV[S_WIN])
  local ukey = KEYS[K_USE]
  if now >= h0 + HOUR then
    ukey, h0 = KEYS[K_USE1], h0 + HOUR
  end
  local r = 0
  if win == 0 then
    r = tonumber(ARGV[S_B3]) -- today's reset, as the Go side estimated it
    if now < tonumber(ARGV[S_B2]) or now >= r then
      return now
    end
  end
  if now < h0 or now >= h0 + HOUR then
    return now
  end
  local mk = KEYS[K_MARK]
  local mv = readmark(mk, name, ARGV[S_WBUCKET])
  local seq, xm = tonumber(mv[1]), mv[5]
  if not seq or not (mv[4] or xm) or xm and tonumber(xm) > now or win == 0 and mv[7] ~= ARGV[S_B2] then
    return now, mv
  end
  local seen = tonumber(ARGV[P_SEEN])
  if lostwrites(seq, seen, tonumber(ARGV[P_SEEN_UNTIL]), tonumber(ARGV[P_OWN]), mv[8], mv[9], now) then
    return now, mv
  end
  local log, sum = KEYS[K_LOG], KEYS[K_SUM]
  local v = redis.call('MGET', sum, KEYS[K_EXH], KEYS[K_KEEPK])
  if not v[1] or v[3] ~= ARGV[S_WID] or v[2] and tonumber(v[2]) > now then
    return now, mv, v
  end
  local held = tonumber(v[1])
  local total = held
  local u, c = tonumber(mv[2]) or 0, tonumber(ARGV[P_COST])
  local first, at, oldest -- a sliding log's two oldest entries
  if win > 0 then
    first = redis.call('ZRANGE', log, 0, 1, 'WITHSCORES')
    local start = now - win + 1
    at = 1 -- first[at] is the oldest counted entry
    while at < #first and tonumber(first[at + 1]) < start do
      total = total - cost(first[at])
      at = at + 2
    end
    if at > #first then
      return now, mv, v -- an empty log, or every entry read expired
    end
    oldest = tonumber(first[at + 1])
  end
  local reply
  if total + c <= limit then
    local _, need = lifetime(win, r, now, ARGV[S_WID])
    if (tonumber(mv[6]) or 0) < need then
      return now, mv, v -- the keys' lifetime is to be renewed
    end
    if win == 0 and redis.call('EXISTS', log) ~= 1 then
      return now, mv, v -- a log gone before its time is a loss
    end
    local hold = tonumber(ARGV[P_HOLD])
    local stamp, x = now + hold, r
    if win > 0 then
      x = stamp + win
      oldest = math.min(oldest, stamp) -- a held entry sits at its stamp
    elseif hold ~= 0 then
      stamp = math.min(stamp, r - 1) -- a lease's daily block
    end
    if at and at > 1 then
      redis.call('ZREMRANGEBYRANK', log, 0, (at - 3) / 2)
    end
    redis.call('ZADD', log, stamp, ARGV[P_NONCE] .. (hold ~= 0 and ':h:' or ':') .. ARGV[P_COST])
    total = total + c
    if total ~= held then
      redis.call('INCRBY', sum, total - held) -- INCRBY keeps the TTL
    end
    if redis.call('HINCRBY', ukey, ARGV[P_FIELD], c) == c then
      -- a new row: the hour's hash lasts until its rows may be dropped
      keephash(ukey, h0 + HOUR + tonumber(ARGV[S_KEEP]), now)
    end
    -- the marker, as marker.lua's remark writes it
    seq = math.max(seq, seen) + 1
    local hs = {'seq', seq, ARGV[S_WBUCKET], seq}
    local bm, e = tonumber(mv[4]) or 0, tonumber(mv[3]) or 0
    if x > bm then
      hs[5], hs[6], bm = 'b:' .. name, x, x
    end
    local nu, grow
    nu, e, grow = raise(u, e, bm, now)
    if nu > u then
      u = nu
      hs[#hs + 1], hs[#hs + 2] = 'u', u
    end
    if grow then
      hs[#hs + 1], hs[#hs + 2] = 'e', e
    end
    markwrite(mk, hs, e, grow, now)
    reply = decision(1, now, total, win > 0 and oldest + win or r, 0, seq, u)
  elseif win == 0 then
    -- a spent daily budget: every entry counted today expires at the reset
    reply = decision(0, now, total, r, r, seq, u)
  else
    -- a sliding refusal: the charge fits once the oldest counted entries
    -- that cover the deficit expire
    local _, retry = walk(first, at, 0, total + c - limit, now)
    if not retry then
      return now, mv, v
    end
    if at > 1 then
      redis.call('ZREMRANGEBYRANK', log, 0, (at - 3) / 2)
      redis.call('INCRBY', sum, total - held)
    end
    reply = decision(0, now, total, oldest + win, retry + win, seq, u)
  end
  return now, mv, v, reply
end

local lnow, lmv, lv, lreply
if #KEYS == K_MARK and (ARGV[A_TRUST] == '0' or ARGV[A_TRUST] == '1') then
  lnow, lmv, lv, lreply = lone()
  if lreply then
    return lreply
  end
end
