-- lone.lua: take.lua's prefix, the lone decision (issue 26).
--
-- The decisions decide (lib/decide.lua) makes for batch.lua, made for one
-- charge of one budget alone, which is what most decisions are (a fleet of
-- single-threaded processes never batches). Half of what a lone decision
-- cost Redis was not its commands but the Lua around them: the closures a
-- script makes on every run, the tables and loops decide needs for k
-- decisions, and numbers converted to and from strings (see clock.lua). So
-- this runs before take.lua's general path defines its functions (only
-- those used here are made first), and decides one decision with no table
-- but its reply: the same commands, effects and replies as decide(1)
-- (TestFastMatchesGeneral, TestBatchMatchesOneByOne, TestDecisionCommands).
--
-- What it leaves (anything decide leaves: see there) goes to take.lua's
-- general path, which reads now, the marker and the sum, exhausted mark
-- and kept window from lnow, lmv, lv when they were read here (nothing was
-- written in between).
local function lone()
  local now = clock(ARGV[S_NOW])
  local h0, name, limit, swin = ARGV[S_H] + 0, ARGV[S_NAME], ARGV[S_LIMIT] + 0, ARGV[S_WIN]
  local daily = swin == '0' -- a calendar window (daily, or monthly: the same here)
  local win = daily and 0 or swin + 0
  local ukey = KEYS[K_USE]
  if now >= h0 + HOUR then
    ukey, h0 = KEYS[K_USE1], h0 + HOUR
  end
  local r = 0
  if daily then
    r = ARGV[S_B3] + 0 -- today's reset, as the Go side estimated it
    if now < ARGV[S_B2] + 0 or now >= r then
      return now
    end
  end
  if now < h0 or now >= h0 + HOUR then
    return now
  end
  local mk = KEYS[K_MARK]
  local mv = readmark(mk, name, ARGV[S_WBUCKET])
  local seq, xm = mv[1], mv[5]
  if not seq or not (mv[4] or xm) or xm and xm + 0 > now or daily and mv[7] ~= ARGV[S_B2] then
    return now, mv
  end
  seq = seq + 0
  local seen = ARGV[P_SEEN] + 0
  if lostwrites(seq, seen, ARGV[P_SEEN_UNTIL] + 0, ARGV[P_OWN] + 0, mv[8], mv[9], now) then
    return now, mv
  end
  local log, sum = KEYS[K_LOG], KEYS[K_SUM]
  local v = redis.call('MGET', sum, KEYS[K_EXH], KEYS[K_KEEPK])
  if not v[1] or v[3] ~= ARGV[S_WID] or v[2] and v[2] + 0 > now then
    return now, mv, v
  end
  local held = v[1] + 0
  local total = held
  local u, sc = (mv[2] or 0) + 0, ARGV[P_COST]
  local c = sc + 0
  local first, at, oldest -- a sliding log's two oldest entries
  if not daily then
    first = redis.call('ZRANGE', log, 0, 1, 'WITHSCORES')
    local start = now - win + 1
    at = 1 -- first[at] is the oldest counted entry
    while at < #first and first[at + 1] + 0 < start do
      total = total - cost(first[at])
      at = at + 2
    end
    if at > #first then
      return now, mv, v -- an empty log, or every entry read expired
    end
    oldest = first[at + 1] + 0
  end
  local reply
  if total + c <= limit then
    local _, need = lifetime(win, r, now, ARGV[S_WID])
    if (mv[6] or 0) + 0 < need then
      return now, mv, v -- the keys' lifetime is to be renewed
    end
    if daily and redis.call('EXISTS', log) ~= 1 then
      return now, mv, v -- a log gone before its time is a loss
    end
    local shold = ARGV[P_HOLD]
    local held0 = shold == '0'
    local stamp, x = now, r
    if not held0 then
      stamp = now + shold
      if daily then
        stamp = math.min(stamp, r - 1) -- a lease's daily block
      end
    end
    if not daily then
      x = stamp + win
      oldest = math.min(oldest, stamp) -- a held entry sits at its stamp
    end
    if at and at > 1 then
      redis.call('ZREMRANGEBYRANK', log, 0, (at - 3) / 2)
    end
    redis.call('ZADD', log, int(stamp), ARGV[P_NONCE] .. (held0 and ':' or ':h:') .. sc)
    total = total + c
    if total - held == c then
      redis.call('INCRBY', sum, sc) -- INCRBY keeps the TTL
    elseif total ~= held then
      redis.call('INCRBY', sum, int(total - held))
    end
    if redis.call('HINCRBY', ukey, ARGV[P_FIELD], sc) == c then
      -- a new row: the hour's hash lasts until its rows may be dropped
      keephash(ukey, h0 + HOUR + ARGV[S_KEEP], now)
    end
    -- the marker, as marker.lua's remark writes it
    seq = math.max(seq, seen) + 1
    local sseq = int(seq)
    local hs = {'seq', sseq, ARGV[S_WBUCKET], sseq}
    local bm = mv[4]
    if daily and bm == ARGV[S_B3] then
      bm = r -- (the usual daily case, read as a string)
    else
      bm = (bm or 0) + 0
      if x > bm then
        hs[5], hs[6], bm = 'b:' .. name, daily and ARGV[S_B3] or int(x), x
      end
    end
    local nu, e, grow = raise(u, (mv[3] or 0) + 0, bm, now)
    if nu > u then
      u = nu
      hs[#hs + 1], hs[#hs + 2] = 'u', int(u)
    end
    if grow then
      hs[#hs + 1], hs[#hs + 2] = 'e', int(e)
    end
    markwrite(mk, hs, e, grow, now)
    reply = decision(1, now, total, daily and r or oldest + win, 0, seq, u)
  elseif daily then
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
      redis.call('INCRBY', sum, int(total - held))
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
