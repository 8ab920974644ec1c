-- exhaust.lua: mark one budget spent until UNTIL, or clear the mark.
--
-- KEYS: exh, the owner's store-loss marker (see lib/marker.lua), then the log,
-- sum and keep keys. ARGV[1] now or ''; ARGV[2] UNTIL (µs; 0 clears);
-- ARGV[3] LOSS ('1': the mark is a store-loss reaction, which never
-- shortens a later mark); ARGV[4..8] the budget's window spec and ARGV[9]
-- its window id: like every write naming a budget, an exhaust prunes its
-- log and extends the log's retention to a redefined window (keepwin).
--
-- The key expires at UNTIL. Its lifetime is set relative to the script's
-- now (SET PX UNTIL-now), which is PEXPIREAT UNTIL when now is the server
-- clock, and stays right when a test injects its own now. A positive UNTIL
-- never shortens an active store-loss mark; a clear clears it too. Either
-- bumps the marker's v, the owner's change version.
--
-- Reply: {1, NOW, SEQ, U} (the marker after this call).

local now = clock(ARGV[1])
local start = span(4, now)
if not start then
  return {-1, now}
end
local lv = redis.call('MGET', KEYS[4], KEYS[5])
if lv[2] and lv[2] ~= ARGV[9] and iscalendar(lv[2]) then
  lv[1] = back(KEYS[3], KEYS[4], lv[1], now, lv[2]) -- the calendar window changed
end
load(KEYS[3], KEYS[4], alive(lv[2], ARGV[9], start, now), lv[1], KEYS[2], asidefor(lv[2], ARGV[9]), now)
keepwin(KEYS[3], KEYS[5], retain(lv[2], ARGV[9]), lv[2], now)
local until_ = tonumber(ARGV[2])
local loss = ARGV[3] == '1'
local mk, name = KEYS[2], budgetname(KEYS[1])
local mv = redis.call('HMGET', mk, 'seq', 'u', 'e', 'l:' .. name)
local seq, mu, me = tonumber(mv[1]) or 0, tonumber(mv[2]) or 0, tonumber(mv[3]) or 0
local lm = tonumber(mv[4]) or 0
bumpversion(mk, now) -- the owner's change version (see lib/marker.lua)
local fields = {}
if until_ > now then
  if loss then
    until_ = math.max(until_, exhausted(redis.call('GET', KEYS[1]), now))
  elseif lm > now and lm >= until_ then
    until_, loss = lm, true -- keep the store-loss mark
  end
  redis.call('SET', KEYS[1], int(until_), 'PX', math.max(1, math.ceil((until_ - now) / 1000)))
  fields = {'x:' .. name, int(until_)}
  if loss then
    fields[3], fields[4] = 'l:' .. name, int(until_)
  end
else
  redis.call('DEL', KEYS[1])
  redis.call('HDEL', mk, 'l:' .. name)
  fields = {'x:' .. name, '0'}
  until_ = 0
end
seq, mu = remark(mk, seq, 0, mu, me, until_, now, fields)
return {1, now, seq, mu}
