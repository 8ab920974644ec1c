-- lifetime.lua: how long the keys of a log and of the breakdown live.

-- lifetime returns, for an entry recorded now in a log of window WIN (0:
-- daily, resetting at r) kept for that window, how long (ms) the log's
-- keys must live and until when (µs) they must at least (less the
-- millisecond a PEXPIRE rounds to): a sliding log's until the newest
-- entry leaves the window, and a tenth of it more, as a held entry (a
-- lease's block, at most a tenth of the window ahead) outlives a later
-- entry by up to its hold; a calendar log's (window id w) until its
-- asidekeep past the reset, as the next period's first decision sets the
-- period's entries aside for that long past their time (log.lua's
-- setaside).
local function lifetime(win, r, now, w)
  if win > 0 then
    local ms = math.ceil(win / 1000) + math.ceil(win / 10000)
    return ms, now + (ms - 1) * 1000
  end
  local keep = asidekeep(w) or DAILYKEEP
  return math.max(1, math.ceil((r + keep - now) / 1000)), r + keep
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
