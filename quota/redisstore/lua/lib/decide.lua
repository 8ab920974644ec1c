-- decide.lua: the common decisions, k of them, of one owner and one
-- budget, one after another: the take script's lone decision (k = 1, its
-- prefix lone.lua) and batch.lua's (k decisions that waited together:
-- WithPipelining). One source for both (issue 26): what k > 1 needs
-- besides (a table of replies, of entries, of breakdown rows) is made only
-- when a second decision needs it, so a lone decision pays for no table
-- but its reply and the marker's fields.
--
-- Most decisions are a charge of one budget whose state is in order: a
-- daily budget whose log holds today's entries only (its running sum
-- decides), or a sliding budget with the entries expiring read in one
-- ZRANGE, admitting or refusing a charge whose deficit the entries read
-- cover. For those, what a script costs Redis is mostly Lua, not
-- commands (issue 13): decide makes the same commands as take.lua's
-- general path and the same replies, and no more Lua than they need.
-- Anything else (a loss to look for, an exhausted mark, a lifetime to
-- renew, a new day, a marker that holds nothing of the budget, an empty
-- log, a sliding refusal deeper than the entries read, a clock outside
-- today) stops before that decision: decide returns the replies of the
-- decisions before it, having written their effects, and the rest go to
-- take.lua's general path, which decides every case and is the reference
-- for this one (TestFastMatchesGeneral, TestBatchMatchesOneByOne).
--
-- What k decisions share is made once: one TIME (every decision is
-- decided at the same µs, in order), one read of the state, and at the end
-- one ZADD of every admitted entry, one INCRBY of the sum, one HINCRBY per
-- breakdown row and one HSET of the marker.
--
-- Numbers read are converted once, with s + 0 (Lua 5.1's tonumber reads a
-- string twice), and written as strings made once (int), or passed on as
-- read: Redis formats a number given to redis.call with %.17g, which costs
-- more than either.
--
-- KEYS: K_LOG, K_SUM, K_EXH, K_KEEPK (the debit's keys), K_USE, K_USE1
-- (the breakdown hashes of the hours H and H+1h), K_MARK.
-- ARGV: the values every decision shares at S_x (S_NOW, S_H, S_KEEP,
-- S_NAME, S_LIMIT, S_WIN, S_B1..S_B4, S_WID, S_WBUCKET), and decision i's
-- (0-based) at P_x + P_STRIDE * i (P_NONCE, P_SEEN, P_SEEN_UNTIL, P_HOLD,
-- P_COST, P_FIELD, P_OWN): take.lua's ARGV of the same names. The Go side
-- generates these positions for each script from one table (protocol.go).

-- decision is the reply of one decision of one debit, as take.lua's:
-- {OK, NOW, USED, RESET, EXHAUSTED_UNTIL (0), RETRY_AT, SEQ, U, LOST_ALL
-- (0), LOST (0)}.
local function decision(ok, now, used, reset, retry, seq, u)
  return {ok, now, used, reset, 0, retry, seq, u, 0, 0}
end

-- decide decides k decisions as above. It returns the last decided
-- decision's reply (nil when it decided none: then it wrote nothing), the
-- replies of all in order when k > 1 (nil for k = 1), and what it read:
-- now, the marker (readmark's fields) and the sum, exhausted mark and kept
-- window (nil when not read), for take.lua's general path to use when it
-- decided nothing.
local function decide(k)
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
      return nil, nil, now
    end
  end
  if now < h0 or now >= h0 + HOUR then
    return nil, nil, now
  end
  local mk = KEYS[K_MARK]
  local mv = readmark(mk, name, ARGV[S_WBUCKET])
  -- (a marker that holds neither b:NAME nor x:NAME may have been started
  -- afresh after a loss and heard nothing of this budget since: take.lua's
  -- unmarked decides whether it counts as lost)
  local seq, xm = mv[1], mv[5]
  if not seq or not (mv[4] or xm) or xm and xm + 0 > now or daily and mv[7] ~= ARGV[S_B2] then
    return nil, nil, now, mv
  end
  seq = seq + 0
  -- a loss any decision would look for: take.lua decides them all
  local seen0 = ARGV[P_SEEN] + 0 -- the first decision's SEEN, read once
  for i = 0, k - 1 do
    local a = P_STRIDE * i
    if lostwrites(seq, i == 0 and seen0 or ARGV[P_SEEN + a] + 0, ARGV[P_SEEN_UNTIL + a] + 0, ARGV[P_OWN + a] + 0, mv[8], mv[9], now) then
      return nil, nil, now, mv
    end
  end
  local log, sum = KEYS[K_LOG], KEYS[K_SUM]
  local v = redis.call('MGET', sum, KEYS[K_EXH], KEYS[K_KEEPK])
  -- the sum is there, the log is kept for this very window, and no
  -- exhausted mark holds
  if not v[1] or v[3] ~= ARGV[S_WID] or v[2] and v[2] + 0 > now then
    return nil, nil, now, mv, v
  end
  local held = v[1] + 0
  local total = held
  local first, at, oldest -- a sliding log's oldest entries
  if not daily then
    -- the k+1 oldest entries: in steady state about one expires per decision
    first = redis.call('ZRANGE', log, 0, k, 'WITHSCORES')
    local start = now - win + 1
    at = 1 -- first[at] is the oldest counted entry
    while at < #first and first[at + 1] + 0 < start do
      total = total - cost(first[at])
      at = at + 2
    end
    if at > #first then
      return nil, nil, now, mv, v -- an empty log, or every entry read expired
    end
    oldest = first[at + 1] + 0
  end

  local u0 = (mv[2] or 0) + 0
  local u = u0
  -- what an admission reads besides (e, b:NAME, k:NAME's need and life),
  -- read at the first: a refusal needs none of it
  local e, bm, sbm, need, life
  local grew = false
  local exists = not daily -- a daily admission checks the log is there (see take.lua)
  local reply, replies -- the last reply; all of them, once there are two
  local decided, admitted = 0, 0
  local stamp1, member1, adds -- the first entry admitted; all of them, once there are two
  -- the first breakdown row and its units (as read while one cost); the
  -- others by field
  local field1, row1, srow1, rows
  local lastc, lastsc -- the last admitted cost, as a number and as read
  for i = 0, k - 1 do
    local a = P_STRIDE * i
    local sc = ARGV[P_COST + a]
    local c = sc + 0
    if total + c <= limit then
      if not need then
        local _
        _, need = lifetime(win, r, now, ARGV[S_WID])
        life, e, bm = (mv[6] or 0) + 0, (mv[3] or 0) + 0, mv[4]
        -- b:NAME, kept as read (the usual daily case) unless it grows
        if daily and bm == ARGV[S_B3] then
          bm = r
        else
          bm = (bm or 0) + 0
        end
      end
      if life < need then
        break -- the keys' lifetime is to be renewed: take.lua
      end
      if not exists then
        if redis.call('EXISTS', log) ~= 1 then
          break -- a log gone before its time is a loss take.lua reports
        end
        exists = true
      end
      local shold = ARGV[P_HOLD + a]
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
      local member = ARGV[P_NONCE + a] .. (held0 and ':' or ':h:') .. sc
      admitted = admitted + 1
      if admitted == 1 then
        stamp1, member1 = int(stamp), member
      else
        if admitted == 2 then
          adds = {stamp1, member1}
        end
        adds[#adds + 1], adds[#adds + 2] = int(stamp), member
      end
      total = total + c
      lastc, lastsc = c, sc
      local f = ARGV[P_FIELD + a]
      if not field1 then
        field1, row1, srow1 = f, c, sc
      elseif f == field1 then
        row1, srow1 = row1 + c, nil
      else
        rows = rows or {}
        rows[f] = (rows[f] or 0) + c
      end
      -- the marker, as marker.lua's remark writes it
      seq = math.max(seq, i == 0 and seen0 or ARGV[P_SEEN + a] + 0) + 1
      if x > bm then
        bm, sbm = x, daily and ARGV[S_B3] or int(x)
      end
      local nu, grow
      nu, e, grow = raise(u, e, bm, now)
      u, grew = nu, grew or grow
      reply = decision(1, now, total, daily and r or oldest + win, 0, seq, u)
    elseif daily then
      -- a spent daily budget: every entry counted today expires at the reset
      reply = decision(0, now, total, r, r, seq, u)
    else
      -- a sliding refusal: the charge fits once the oldest counted entries
      -- that cover the deficit expire. The entries this run added sit at
      -- now or later, after every entry read at or before now: the walk
      -- stops at an entry read past now, or past those read (take.lua).
      local _, retry = walk(first, at, 0, total + c - limit, now)
      if not retry then
        break
      end
      reply = decision(0, now, total, oldest + win, retry + win, seq, u)
    end
    decided = decided + 1
    if k > 1 then
      replies = replies or {}
      replies[decided] = reply
    end
  end

  if decided == 0 then
    return nil, nil, now, mv, v
  end
  -- the effects of the decisions decided, as their runs one by one leave them
  if at and at > 1 then
    redis.call('ZREMRANGEBYRANK', log, 0, (at - 3) / 2)
  end
  if adds then
    redis.call('ZADD', log, unpack(adds))
  elseif stamp1 then
    redis.call('ZADD', log, stamp1, member1)
  end
  if total - held == lastc then
    redis.call('INCRBY', sum, lastsc) -- INCRBY keeps the TTL
  elseif total ~= held then
    redis.call('INCRBY', sum, int(total - held))
  end
  if field1 then
    -- a new row: the hour's hash lasts until its rows may be dropped
    if redis.call('HINCRBY', ukey, field1, srow1 or int(row1)) == row1 then
      keephash(ukey, h0 + HOUR + ARGV[S_KEEP], now)
    end
    if rows then
      for f, n in pairs(rows) do
        if redis.call('HINCRBY', ukey, f, int(n)) == n then
          keephash(ukey, h0 + HOUR + ARGV[S_KEEP], now)
        end
      end
    end
  end
  if admitted > 0 then
    local sseq = int(seq)
    local hs = {'seq', sseq, ARGV[S_WBUCKET], sseq}
    if sbm then
      hs[5], hs[6] = 'b:' .. name, sbm
    end
    if u > u0 then
      hs[#hs + 1], hs[#hs + 2] = 'u', int(u)
    end
    if grew then
      hs[#hs + 1], hs[#hs + 2] = 'e', int(e)
    end
    markwrite(mk, hs, e, grew, now)
  end
  return reply, replies, now, mv, v
end
