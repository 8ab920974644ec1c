-- decide.lua: the common decisions, k of them, of one owner and one
-- budget, one after another: batch.lua's (k decisions that waited
-- together: WithPipelining). The take script decides a lone one the same
-- way, without the tables k decisions need (lone.lua, its prefix).
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

-- decide decides k decisions as above and returns their replies (fewer,
-- or none, when it stopped), and what it read: now, the marker (readmark's
-- fields) and the sum, exhausted mark and kept window (false when not
-- read), for the general path to use when nothing was decided.
local function decide(k)
  local now = clock(ARGV[S_NOW])
  local h0, name, limit, win = tonumber(ARGV[S_H]), ARGV[S_NAME], tonumber(ARGV[S_LIMIT]), tonumber(ARGV[S_WIN])
  local ukey = KEYS[K_USE]
  if now >= h0 + HOUR then
    ukey, h0 = KEYS[K_USE1], h0 + HOUR
  end
  local r, lo = 0, 0
  if win == 0 then
    lo, r = tonumber(ARGV[S_B2]), tonumber(ARGV[S_B3]) -- today, as the Go side estimated it
  end
  if now < h0 or now >= h0 + HOUR or win == 0 and (now < lo or now >= r) then
    return {}, now, false, false
  end
  local mv = readmark(KEYS[K_MARK], name, ARGV[S_WBUCKET])
  -- (a marker that holds neither b:NAME nor x:NAME may have been started
  -- afresh after a loss and heard nothing of this budget since: take.lua's
  -- unmarked decides whether it counts as lost)
  if not mv[1] or not (mv[4] or mv[5]) or mv[5] and tonumber(mv[5]) > now or win == 0 and mv[7] ~= ARGV[S_B2] then
    return {}, now, mv, false
  end
  local seq = tonumber(mv[1])
  -- a loss any decision would look for: take.lua decides them all
  for i = 0, k - 1 do
    local a = P_STRIDE * i
    if lostwrites(seq, tonumber(ARGV[P_SEEN + a]), tonumber(ARGV[P_SEEN_UNTIL + a]), tonumber(ARGV[P_OWN + a]), mv[8], mv[9], now) then
      return {}, now, mv, false
    end
  end
  local v = redis.call('MGET', KEYS[K_SUM], KEYS[K_EXH], KEYS[K_KEEPK])
  -- the sum is there, the log is kept for this very window, and no
  -- exhausted mark holds
  if not v[1] or v[3] ~= ARGV[S_WID] or v[2] and tonumber(v[2]) > now then
    return {}, now, mv, v
  end

  local held = tonumber(v[1])
  local total = held
  local u, e, bm = tonumber(mv[2]) or 0, tonumber(mv[3]) or 0, tonumber(mv[4]) or 0
  local life = tonumber(mv[6]) or 0
  -- what k:NAME must cover for an admission not to renew the keys
  local _, need = lifetime(win, r, now, ARGV[S_WID])
  local first, at, drop, oldest -- a sliding log's oldest entries
  if win > 0 then
    -- the k+1 oldest entries: in steady state about one expires per decision
    first = redis.call('ZRANGE', KEYS[K_LOG], 0, k, 'WITHSCORES')
    local start = now - win + 1
    at = 1 -- first[at] is the oldest counted entry
    while at < #first and tonumber(first[at + 1]) < start do
      total = total - cost(first[at])
      at = at + 2
    end
    if at > #first then
      -- an empty log, or every entry read expired (and maybe more): take.lua
      return {}, now, mv, v
    end
    drop = (at - 1) / 2
    oldest = tonumber(first[at + 1])
  end

  local replies, adds, rows, nrows = {}, {}, {}, {}
  local fields = {} -- the marker fields written, by name
  local grew = false
  local exists = win > 0 -- a daily admission checks the log is there (see take.lua)
  local admitted = 0
  for i = 0, k - 1 do
    local a = P_STRIDE * i
    local c, hold = tonumber(ARGV[P_COST + a]), tonumber(ARGV[P_HOLD + a])
    if total + c <= limit then
      if life < need then
        break -- the keys' lifetime is to be renewed: take.lua
      end
      if not exists then
        if redis.call('EXISTS', KEYS[K_LOG]) ~= 1 then
          break -- a log gone before its time is a loss take.lua reports
        end
        exists = true
      end
      local stamp, x = now + hold, r
      if win > 0 then
        x = stamp + win
        oldest = math.min(oldest, stamp) -- a held entry sits at its stamp
      elseif hold ~= 0 then
        stamp = math.min(stamp, r - 1) -- a lease's daily block
      end
      -- (numbers go to redis.call as they are: Redis writes an integral
      -- number below 2^53 as an integer, and string.format costs more)
      adds[#adds + 1], adds[#adds + 2] = stamp, ARGV[P_NONCE + a] .. (hold ~= 0 and ':h:' or ':') .. ARGV[P_COST + a]
      total = total + c
      local f = ARGV[P_FIELD + a]
      if not rows[f] then
        nrows[#nrows + 1] = f
        rows[f] = 0
      end
      rows[f] = rows[f] + c
      -- the marker, as marker.lua's remark writes it
      seq = math.max(seq, tonumber(ARGV[P_SEEN + a])) + 1
      if x > bm then
        fields['b:' .. name], bm = x, x
      end
      local nu, grow
      nu, e, grow = raise(u, e, math.max(x, bm), now)
      if nu > u then
        u = nu
        fields.u = u
      end
      if grow then
        fields.e, grew = e, true
      end
      admitted = admitted + 1
      replies[#replies + 1] = decision(1, now, total, (win > 0 and oldest + win or r), 0, seq, u)
    elseif win == 0 then
      -- a spent daily budget: every entry counted today expires at the reset
      replies[#replies + 1] = decision(0, now, total, r, r, seq, u)
    else
      -- a sliding refusal: the charge fits once the oldest counted entries
      -- that cover the deficit expire. The entries this run added sit at
      -- now or later, after every entry read at or before now: the walk
      -- stops at an entry read past now, or past those read (take.lua).
      local _, retry = walk(first, at, 0, total + c - limit, now)
      if not retry then
        break
      end
      replies[#replies + 1] = decision(0, now, total, oldest + win, retry + win, seq, u)
    end
  end

  if #replies == 0 then
    return replies, now, mv, v
  end
  -- the effects of the decisions decided, as their runs one by one leave them
  if drop and drop > 0 then
    redis.call('ZREMRANGEBYRANK', KEYS[K_LOG], 0, drop - 1)
  end
  if admitted > 0 then
    redis.call('ZADD', KEYS[K_LOG], unpack(adds))
  end
  if total ~= held then
    redis.call('INCRBY', KEYS[K_SUM], total - held) -- INCRBY keeps the TTL
  end
  for _, f in ipairs(nrows) do
    if redis.call('HINCRBY', ukey, f, rows[f]) == rows[f] then
      -- a new row: the hour's hash lasts until its rows may be dropped
      keephash(ukey, h0 + HOUR + tonumber(ARGV[S_KEEP]), now)
    end
  end
  if admitted > 0 then
    local hs = {'seq', seq, ARGV[S_WBUCKET], seq}
    for _, f in ipairs({'b:' .. name, 'u', 'e'}) do
      if fields[f] then
        hs[#hs + 1], hs[#hs + 2] = f, fields[f]
      end
    end
    markwrite(KEYS[K_MARK], hs, e, grew, now)
  end
  return replies, now, mv, v
end
