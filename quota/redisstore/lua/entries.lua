-- entries.lua: the entries one budget counts now, oldest first.
--
-- KEYS: log, sum, keep, the owner's store-loss marker (see lib/marker.lua).
-- ARGV[1] now or ''; ARGV[2..6] a window spec;
-- ARGV[7] the window id.
--
-- Reply: {1, NOW, MEMBER, SCORE, MEMBER, SCORE, ...}.

local now = clock(ARGV[1])
local start = span(2, now)
if not start then
  return {-1, now}
end
local v = redis.call('MGET', KEYS[2], KEYS[3])
local kstart = alive(v[2], ARGV[7], start, now)
load(KEYS[1], KEYS[2], kstart, v[1], KEYS[4], asidefor(v[2], ARGV[7]), now)
local reply = {1, now}
local all = redis.call('ZRANGEBYSCORE', KEYS[1], int(start), '+inf', 'WITHSCORES')
if v[2] and v[2] ~= ARGV[7] and iscalendar(v[2]) then
  -- what the old calendar window set aside counts too (see back), merged in
  -- the log's order: by score, then member
  local es = redis.call('ZRANGEBYSCORE', asidekey(KEYS[1]), int(math.max(start, kstart)), '+inf', 'WITHSCORES')
  if #es > 0 then
    local pairs_ = {}
    for _, l in ipairs({all, es}) do
      for j = 1, #l, 2 do
        pairs_[#pairs_ + 1] = {l[j], tonumber(l[j + 1])}
      end
    end
    table.sort(pairs_, function(a, b)
      if a[2] ~= b[2] then
        return a[2] < b[2]
      end
      return a[1] < b[1]
    end)
    all = {}
    for _, p in ipairs(pairs_) do
      all[#all + 1] = p[1]
      all[#all + 1] = p[2]
    end
  end
end
for j = 1, #all, 2 do
  reply[#reply + 1] = all[j]
  reply[#reply + 1] = tonumber(all[j + 1]) -- as an integer reply
end
return reply
