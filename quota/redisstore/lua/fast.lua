-- fast.lua: take.lua's common case, run before lib.lua is even defined.
-- The Go side builds the take script as fast.lua + lib.lua + take.lua.
--
-- Most decisions are a charge of one budget whose state is in order: a
-- daily budget whose log holds today's entries only (its running sum
-- decides), or a sliding budget with at most one entry expiring, admitting
-- or refusing a charge whose deficit its two oldest entries cover.
-- For those, what a script costs Redis is mostly Lua, not commands:
-- defining lib.lua's helpers, take.lua's tables and the checks for every
-- rare state took twice the time of the commands themselves (issue 13).
-- This prefix decides those cases with the same commands and the same
-- reply as take.lua, and returns before lib.lua runs. Anything else (two
-- budgets, a loss to detect, a lifetime to renew, a new day, an exhausted
-- mark, a deeper sliding refusal, a clock outside today) falls through,
-- before this prefix has written anything, to take.lua, which decides
-- every case and is the reference for this one: TestFastMatchesGeneral
-- runs both on the same states.
--
-- KEYS and ARGV are take.lua's with one debit: KEYS log, sum, exh, keep,
-- the hour hashes H and H+1h, the marker; ARGV now, nonce, SEEN,
-- SEEN_UNTIL, TRUST, H, KEEP, HOLD, NAME, COST, LIMIT, WIN, B1..B4, the
-- window id, the breakdown field, w:BUCKET and OWN.

-- what this prefix read before it fell through: take.lua reads it again
-- only when it was not read (nothing was written in between)
local fnow, fmv, fv
if #KEYS == 7 and (ARGV[5] == '0' or ARGV[5] == '1') then
  -- (TRUST 'G0' or 'G1' skips this prefix: tests compare it with the
  -- general path)
  local now
  if ARGV[1] ~= '' then
    now = tonumber(ARGV[1])
  else
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  fnow = now
  local name, c, limit, win = ARGV[9], tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
  local hour = 3600000000
  local h0 = tonumber(ARGV[6])
  local ukey = KEYS[5]
  if now >= h0 + hour then
    ukey, h0 = KEYS[6], h0 + hour
  end
  local r, lo = 0, 0
  if win == 0 then
    lo, r = tonumber(ARGV[14]), tonumber(ARGV[15]) -- today, as the Go side estimated it
  end
  local mv, v
  if now >= h0 and now < h0 + hour and (win > 0 or now >= lo and now < r) then
    mv = redis.call('HMGET', KEYS[7], 'seq', 'u', 'e', 'b:' .. name, 'x:' .. name, 'k:' .. name, 'd:' .. name, ARGV[19], 'r')
    fmv = mv
  end
  local seq = mv and (tonumber(mv[1]) or 0)
  -- no loss to look for: the marker as this process last saw it or newer,
  -- and no exhausted mark the store should hold; a daily log known to hold
  -- today's entries only
  -- (a missing marker is made afresh by take.lua: see lib.lua's FRESH)
  -- (nor this process's last admission missing from w:BUCKET: see take.lua)
  if mv and mv[1] and not ((seq < tonumber(ARGV[3]) or
      (tonumber(mv[8]) or 0) < tonumber(ARGV[20]) and tonumber(ARGV[20]) > (tonumber(mv[9]) or 0)) and
      now < tonumber(ARGV[4])) and
      (not mv[5] or tonumber(mv[5]) <= now) and (win > 0 or mv[7] == ARGV[14]) then
    v = redis.call('MGET', KEYS[2], KEYS[3], KEYS[4])
    fv = v
  end
  -- the sum is there, the log is kept for this very window, and no
  -- exhausted mark holds
  if v and v[1] and v[3] == ARGV[17] and (not v[2] or tonumber(v[2]) <= now) then
    local held = tonumber(v[1])
    local total, oldest, drop = held, false, false
    local ok = held + c <= limit
    -- (a daily log's keys live DAILYKEEP past the reset, a monthly one's
    -- MONTHLYKEEP: see take.lua)
    local need, stamp = r + (string.sub(ARGV[17], 1, 1) == 'M' and 2685600000000 or 93600000000), now
    local u, e = tonumber(mv[2]) or 0, tonumber(mv[3]) or 0
    if win > 0 then
      -- the two oldest entries: in steady state one expires per decision
      local first = redis.call('ZRANGE', KEYS[1], 0, 1, 'WITHSCORES')
      local start, at = now - win + 1, 1 -- first[at]: the oldest counted entry
      if #first == 4 and tonumber(first[2]) < start and tonumber(first[4]) >= start then
        drop, oldest, at = true, tonumber(first[4]), 3
        total = held - tonumber(string.match(first[1], ':(%d+)$'))
      elseif #first > 0 and tonumber(first[2]) >= start then
        oldest = tonumber(first[2])
      else
        first = false -- an empty log, or more than one entry expiring
      end
      ok = first and total + c <= limit
      if first and not ok then
        -- a refusal: the charge fits once the oldest counted entries that
        -- cover the deficit expire; when the two read do not, take.lua walks
        local deficit = total + c - limit
        local freed = tonumber(string.match(first[at], ':(%d+)$'))
        local retry = freed >= deficit and oldest
        if not retry and at == 1 and #first == 4 and
            freed + tonumber(string.match(first[3], ':(%d+)$')) >= deficit then
          retry = tonumber(first[4])
        end
        if retry then
          if drop then
            -- what the trim dropped leaves the sum too
            redis.call('ZREMRANGEBYRANK', KEYS[1], 0, 0)
            redis.call('INCRBY', KEYS[2], total - held)
          end
          return {0, now, total, oldest + win, 0, retry + win, seq, u, 0, 0}
        end
      end
      -- take.lua's lifetime for a sliding log's keys, and what k:NAME
      -- must cover for this entry not to renew them
      need = now + (math.ceil(win / 1000) + math.ceil(win / 10000) - 1) * 1000
      stamp = now + tonumber(ARGV[8])
    elseif not ok then
      -- a spent daily budget: every entry counted today expires at the
      -- reset; nothing to write
      return {0, now, total, r, 0, r, seq, u, 0, 0}
    elseif ARGV[8] ~= '0' then
      -- a lease's daily block: held where the lease ends, never past the
      -- day's last µs (as take.lua)
      stamp = math.min(now + tonumber(ARGV[8]), r - 1)
    end
    -- (a daily admission checks that the log is there: the sum decides,
    -- but a log gone before its time is a loss take.lua must report; a
    -- sliding log's ZRANGE above found it empty and fell through)
    if ok and (tonumber(mv[6]) or 0) >= need and (win > 0 or redis.call('EXISTS', KEYS[1]) == 1) then
      -- (numbers go to redis.call as they are: Redis writes an integral
      -- number below 2^53 as an integer, and string.format costs more)
      if drop then
        redis.call('ZREMRANGEBYRANK', KEYS[1], 0, 0)
      end
      redis.call('ZADD', KEYS[1], stamp, ARGV[2] .. (ARGV[8] ~= '0' and ':h:' or ':') .. ARGV[10])
      if total == held then
        redis.call('INCRBY', KEYS[2], ARGV[10]) -- INCRBY keeps the TTL
      else
        redis.call('INCRBY', KEYS[2], total + c - held)
      end
      if redis.call('HINCRBY', ukey, ARGV[18], ARGV[10]) == c then
        -- a new row: the hour's hash lasts until its rows may be dropped
        local ms = math.ceil((h0 + hour + tonumber(ARGV[7]) - now) / 1000)
        if ms >= 1 and redis.call('PTTL', ukey) < ms then
          redis.call('PEXPIRE', ukey, ms)
        end
      end
      -- the marker (lib.lua's remark): seq bumped, b:NAME and u raised to
      -- this entry's expiry
      seq = math.max(seq, tonumber(ARGV[3])) + 1
      local fields = {'seq', seq, ARGV[19], seq}
      local x = r
      if win > 0 then
        x = stamp + win
      end
      local bm = tonumber(mv[4]) or 0
      if x > bm then
        fields[#fields + 1], fields[#fields + 2] = 'b:' .. name, x
      end
      x = math.min(math.max(x, bm), now + 366 * 86400 * 1000000)
      if x > u then
        u = x
        fields[#fields + 1] = 'u'
        fields[#fields + 1] = u
      end
      local grow = u > e
      if grow then
        e = u + math.max(0, u - now)
        fields[#fields + 1] = 'e'
        fields[#fields + 1] = e
      end
      redis.call('HSET', KEYS[7], unpack(fields))
      if grow or e <= now then
        redis.call('PEXPIRE', KEYS[7], math.max(1, math.ceil((e - now) / 1000)))
      end
      if win > 0 then
        -- (a held entry sits at its stamp, not at now)
        r = math.min(oldest, stamp) + win
      end
      return {1, now, total + c, r, 0, 0, seq, u, 0, 0}
    end
  end
end
