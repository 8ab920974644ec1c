-- window.lua: window specs.
--
-- A window spec is 5 ARGV values: WIN, B1, B2, B3, B4. WIN > 0 is a sliding
-- window of WIN µs (B1..B4 unused). WIN = 0 is a daily window; B1..B4 are
-- four consecutive local midnights (µs) that the Go side computed around its
-- estimate of now: a script knows no time zones, it picks the day that
-- holds its own now.

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

-- nextreset returns when capacity next frees for usage reports: a daily
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

-- exhausted returns the µs until which the budget is marked spent, given
-- the exh key's value v (false when missing), or 0.
local function exhausted(v, now)
  local until_ = v and tonumber(v) or 0
  if until_ <= now then
    return 0 -- past marks count for nothing (the key expires on its own)
  end
  return until_
end

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
