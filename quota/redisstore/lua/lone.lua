-- lone.lua: take.lua's prefix, the lone decision (issue 26).
--
-- A charge of one budget is what most decisions are (a fleet of
-- single-threaded processes never batches): decide (lib/decide.lua)
-- decides it here, before take.lua's general path makes its functions,
-- which a decision decided here never pays for (each run of a script makes
-- every function it defines anew: see scripts.go). What decide leaves
-- goes to the general path, which reads now, the marker and the sum,
-- exhausted mark and kept window from lnow, lmv, lv when they were read
-- here (nothing was written in between).

local lnow, lmv, lv
if #KEYS == K_MARK and (ARGV[A_TRUST] == '0' or ARGV[A_TRUST] == '1') then
  local reply, _
  reply, _, lnow, lmv, lv = decide(1)
  if reply then
    return reply
  end
end
