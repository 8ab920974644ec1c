-- batch.lua: several decisions of one owner and one budget, in one run,
-- one after another, each as fast.lua would decide it alone (WithPipelining
-- sends it when decisions of one budget wait together; issue 13).
--
-- What a decision costs Redis is mostly the commands every decision makes
-- whatever its cost: TIME, the marker's HMGET, the MGET of the sum, the
-- marker's HSET. Here k decisions share them: one TIME (every decision of
-- the batch is decided at the same µs, in order), one read of the state,
-- and at the end one ZADD of every admitted entry, one INCRBY of the sum,
-- one HINCRBY per breakdown row and one HSET of the marker.
--
-- Decision i is decided exactly as fast.lua decides it on the state the
-- decisions before it left: the same checks, the same arithmetic and the
-- same reply, and the keys end as k runs of take.lua would leave them
-- (TestBatchMatchesOneByOne). Where fast.lua would fall through to take.lua
-- (a loss to look for, an exhausted mark, a lifetime to renew, a new day,
-- an empty log, a sliding refusal deeper than the entries read), the batch
-- stops before that decision: it returns the replies of the decisions
-- before it, having written their effects, and the Go side sends the rest
-- one by one through take.lua. When the first cannot be decided here,
-- nothing is written and the reply is empty.
--
-- KEYS: take.lua's for one debit: log, sum, exh, keep, the hour hashes H
-- and H+1h, the marker.
-- ARGV: now ('' for TIME), H, KEEP, NAME, LIMIT, WIN, B1..B4, the window
-- id, w:BUCKET; then per decision 7 values from 13 + 7(i-1): nonce, SEEN,
-- SEEN_UNTIL, HOLD, COST, the breakdown field, OWN (take.lua's ARGV of the
-- same names).
-- Reply: one element per decision decided, in order: take.lua's reply for
-- one debit {OK, NOW, USED, RESET, 0, RETRY_AT, SEQ, U, 0, 0}.

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local h0, name, limit, win = tonumber(ARGV[2]), ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local k = (#ARGV - 12) / 7
local hour = 3600000000
local ukey = KEYS[5]
if now >= h0 + hour then
  ukey, h0 = KEYS[6], h0 + hour
end
local r, lo = 0, 0
if win == 0 then
  lo, r = tonumber(ARGV[8]), tonumber(ARGV[9]) -- today: B2, B3
end
if now < h0 or now >= h0 + hour or win == 0 and (now < lo or now >= r) then
  return {}
end
local mv = redis.call('HMGET', KEYS[7], 'seq', 'u', 'e', 'b:' .. name, 'x:' .. name, 'k:' .. name, 'd:' .. name, ARGV[12], 'r')
-- (a marker that holds neither b:NAME nor x:NAME may have been started
-- afresh after a loss and heard nothing of this budget since: take.lua's
-- unmarked decides whether it counts as lost)
if not mv[1] or not (mv[4] or mv[5]) or mv[5] and tonumber(mv[5]) > now or win == 0 and mv[7] ~= ARGV[8] then
  return {}
end
local seq = tonumber(mv[1])
-- a loss any decision of the batch would look for: take.lua decides them
-- all (fast.lua's test, with each decision's SEEN, SEEN_UNTIL and OWN)
local w, rr = tonumber(mv[8]) or 0, tonumber(mv[9]) or 0
for i = 0, k - 1 do
  local a = 13 + 7 * i
  local own = tonumber(ARGV[a + 6])
  if (seq < tonumber(ARGV[a + 1]) or w < own and own > rr) and now < tonumber(ARGV[a + 2]) then
    return {}
  end
end
local v = redis.call('MGET', KEYS[2], KEYS[3], KEYS[4])
if not v[1] or v[3] ~= ARGV[11] or v[2] and tonumber(v[2]) > now then
  return {}
end

local held = tonumber(v[1])
local total = held
local u, e, bm = tonumber(mv[2]) or 0, tonumber(mv[3]) or 0, tonumber(mv[4]) or 0
local life = tonumber(mv[6]) or 0
local need -- what k:NAME must cover for an admission not to renew the keys
local first, at, drop, oldest -- a sliding log's oldest entries
if win > 0 then
  need = now + (math.ceil(win / 1000) + math.ceil(win / 10000) - 1) * 1000
  -- the k+1 oldest entries: in steady state about one expires per decision
  first = redis.call('ZRANGE', KEYS[1], 0, k, 'WITHSCORES')
  local start = now - win + 1
  at = 1 -- first[at] is the oldest counted entry
  while at < #first and tonumber(first[at + 1]) < start do
    total = total - tonumber(string.match(first[at], ':(%d+)$'))
    at = at + 2
  end
  if at > #first then
    -- an empty log, or every entry read expired (and maybe more): take.lua
    return {}
  end
  drop = (at - 1) / 2
  oldest = tonumber(first[at + 1])
else
  -- a daily log's keys live DAILYKEEP past the reset, a monthly one's
  -- MONTHLYKEEP (lib.lua)
  need = r + (string.sub(ARGV[11], 1, 1) == 'M' and 2685600000000 or 93600000000)
end

local replies, adds, rows, nrows = {}, {}, {}, {}
local fields = {} -- the marker fields written, by name
local exists = win > 0 -- a daily admission checks the log is there (fast.lua)
local admitted = 0
for i = 0, k - 1 do
  local a = 13 + 7 * i
  local c, hold = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 3])
  if total + c <= limit then
    if life < need then
      break -- the keys' lifetime is to be renewed: take.lua
    end
    if not exists then
      if redis.call('EXISTS', KEYS[1]) ~= 1 then
        break -- a log gone before its time is a loss take.lua reports
      end
      exists = true
    end
    local stamp, x = now + hold, r
    if win > 0 then
      x = stamp + win
      oldest = math.min(oldest, stamp)
    elseif hold ~= 0 then
      stamp = math.min(stamp, r - 1) -- a lease's daily block
    end
    adds[#adds + 1], adds[#adds + 2] = stamp, ARGV[a] .. (hold ~= 0 and ':h:' or ':') .. ARGV[a + 4]
    total = total + c
    local f = ARGV[a + 5]
    if not rows[f] then
      nrows[#nrows + 1] = f
      rows[f] = 0
    end
    rows[f] = rows[f] + c
    -- the marker, as lib.lua's remark and fast.lua write it
    seq = math.max(seq, tonumber(ARGV[a + 1])) + 1
    if x > bm then
      fields['b:' .. name], bm = x, x
    end
    x = math.min(math.max(x, bm), now + 366 * 86400 * 1000000)
    if x > u then
      u = x
      fields.u = u
    end
    if u > e then
      e = u + math.max(0, u - now)
      fields.e = e
    end
    admitted = admitted + 1
    replies[#replies + 1] = {1, now, total, (win > 0 and oldest + win or r), 0, 0, seq, u, 0, 0}
  elseif win == 0 then
    -- a spent daily budget: the reset
    replies[#replies + 1] = {0, now, total, r, 0, r, seq, u, 0, 0}
  else
    -- a sliding refusal: the charge fits once the oldest counted entries
    -- that cover the deficit expire. The entries this batch added sit at
    -- now or later, after every entry read at or before now: the walk
    -- stops at an entry read past now, or past those read (take.lua).
    local deficit, freed, retry = total + c - limit, 0, false
    local j = at
    while j < #first do
      local s = tonumber(first[j + 1])
      if s > now then
        break
      end
      freed = freed + tonumber(string.match(first[j], ':(%d+)$'))
      if freed >= deficit then
        retry = s
        break
      end
      j = j + 2
    end
    if not retry then
      break
    end
    replies[#replies + 1] = {0, now, total, oldest + win, 0, retry + win, seq, u, 0, 0}
  end
end

if #replies == 0 then
  return replies
end
-- the effects of the decisions decided, as their runs one by one leave them
if drop and drop > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, drop - 1)
end
if admitted > 0 then
  redis.call('ZADD', KEYS[1], unpack(adds))
end
if total ~= held then
  redis.call('INCRBY', KEYS[2], total - held) -- INCRBY keeps the TTL
end
for _, f in ipairs(nrows) do
  if redis.call('HINCRBY', ukey, f, rows[f]) == rows[f] then
    -- a new row: the hour's hash lasts until its rows may be dropped
    local ms = math.ceil((h0 + hour + tonumber(ARGV[3]) - now) / 1000)
    if ms >= 1 and redis.call('PTTL', ukey) < ms then
      redis.call('PEXPIRE', ukey, ms)
    end
  end
end
if admitted > 0 then
  local hs = {'seq', seq, ARGV[12], seq}
  for _, f in ipairs({'b:' .. name, 'u', 'e'}) do
    if fields[f] then
      hs[#hs + 1], hs[#hs + 2] = f, fields[f]
    end
  end
  redis.call('HSET', KEYS[7], unpack(hs))
  if fields.e or e <= now then
    redis.call('PEXPIRE', KEYS[7], math.max(1, math.ceil((e - now) / 1000)))
  end
end
return replies
