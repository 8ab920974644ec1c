-- lone.lua: take.lua's prefix, the lone decision (issue 26).
--
-- A charge of one budget whose state is in order is decided here by
-- decide (lib/decide.lua), before take.lua's general path defines its
-- own functions: a run that returns here makes only the closures decide
-- needs. What decide read before it left the decision to the general path
-- (now, the marker, the sum, exhausted mark and kept window) is kept in
-- lnow, lmv, lv, which take.lua reads instead of reading again (nothing
-- was written in between).
local lnow, lmv, lv
if #KEYS == K_MARK and (ARGV[A_TRUST] == '0' or ARGV[A_TRUST] == '1') then
  local replies
  replies, lnow, lmv, lv = decide(1)
  if #replies == 1 then
    return replies[1]
  end
end
