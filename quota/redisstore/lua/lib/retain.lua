-- retain.lua: the window a log keeps its entries for.
--
-- Window ids, one per budget from the Go side: 'S' .. µs for a sliding
-- window, 'D' .. zone for a daily one, 'M' .. zone for a monthly one. A log keeps its entries for the
-- window in its keep key: the budget's window, or, after the window was
-- shortened, a longer sliding span, so that entries a longer window would
-- still count survive a definition change (quota.Retain).

-- retention returns how far back window id w can count (µs): a daily
-- window DAILYKEEP (the longest a local day can count back), a monthly one
-- MONTHLYKEEP (the longest month, as quota's retention).
local function retention(w)
  local k = string.sub(w, 1, 1)
  if k == 'S' then
    return tonumber(string.sub(w, 2))
  elseif k == 'M' then
    return MONTHLYKEEP
  end
  return DAILYKEEP
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
-- longer one set now. A kept daily window other than w keeps DAILYKEEP
-- (quota.KeptSince), with its set-aside entries (back).
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

