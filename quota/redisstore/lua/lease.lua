-- lease.lua: quota.StateStore leases. One script, four operations, so each
-- is atomic and reads its own now.
--
-- KEYS: lease, token. Both carry the state key the lease fences as their
-- hash tag ("PREFIX lease{PREFIX state:KEY}"), so they share its Cluster
-- slot.
--   lease  string "TOKEN:EXPIRES:HOLDER" (EXPIRES in µs), with a PX TTL
--   token  string, the last fencing token granted (INCR); never expires
--
-- A token is never below the grant's now in µs: a Redis that lost its data
-- (a restart without persistence, FLUSHALL, a failover to a replica that
-- missed the writes) loses the counter too, and starting it over at 1 would
-- give the next holder a token below the one a paused holder still carries,
-- whose fenced writes would then win. Tokens stay increasing across such a
-- loss as long as the clock moves forward.
--
-- ARGV[1] now or ''; ARGV[2] operation: acquire, renew, release, load;
-- ARGV[3] TTL (µs); ARGV[4] token (renew, release); ARGV[5] holder (acquire).
--
-- The lease ends at EXPIRES on the script's now, and its key expires then
-- too (SET PX TTL relative to the script's now, as exhaust.lua does): with
-- the server clock the two agree; a test's injected now is honoured by
-- EXPIRES.
--
-- Reply: {1, NOW, TOKEN, EXPIRES, HOLDER} for the lease granted, renewed or
-- live; {0, NOW, TOKEN, EXPIRES, HOLDER} when acquire found another live
-- lease; {0, NOW} when renew or release found no live lease with the
-- token, or load found no live lease; {1, NOW} for a release done.

local now = clock(ARGV[1])
local op = ARGV[2]
local ttl = tonumber(ARGV[3])

local live = nil
local cur = redis.call('GET', KEYS[1])
if cur then
  local tok, exp, holder = string.match(cur, '^(%d+):(%d+):(.*)$')
  if tok and tonumber(exp) > now then
    live = {tonumber(tok), tonumber(exp), holder}
  end
end

local function set(tok, holder)
  local exp = now + ttl
  redis.call('SET', KEYS[1], int(tok) .. ':' .. int(exp) .. ':' .. holder, 'NX', 'PX', math.max(1, math.ceil(ttl / 1000)))
  return {1, now, tok, exp, holder}
end

if op == 'acquire' then
  if live then
    return {0, now, live[1], live[2], live[3]}
  end
  -- An expired lease may linger when a test's now runs ahead of the
  -- server's clock: it is over, so it goes before SET NX.
  redis.call('DEL', KEYS[1])
  local tok = redis.call('INCR', KEYS[2])
  if tok < now then
    tok = now
    redis.call('SET', KEYS[2], int(tok))
  end
  return set(tok, ARGV[5])
elseif op == 'renew' then
  if not live or live[1] ~= tonumber(ARGV[4]) then
    return {0, now}
  end
  redis.call('DEL', KEYS[1])
  return set(live[1], live[3])
elseif op == 'release' then
  if not live or live[1] ~= tonumber(ARGV[4]) then
    return {0, now}
  end
  redis.call('DEL', KEYS[1])
  return {1, now}
elseif op == 'load' then
  if not live then
    return {0, now}
  end
  return {1, now, live[1], live[2], live[3]}
end
return redis.error_reply('lease.lua: unknown operation ' .. tostring(op))
