-- batch.lua: several decisions of one owner and one budget, in one run,
-- one after another, each as it would be decided alone (WithPipelining
-- sends it when decisions of one budget wait together; issue 13): decide
-- (lib/decide.lua) decides them, as it decides a lone one in take.lua.
-- Where it stops, the Go side sends the rest one by one through take.lua.
--
-- KEYS: take.lua's for one debit. ARGV: the values the decisions share
-- once, then 7 per decision (protocol.go's batchShared, batchPerCall).
-- Reply: one element per decision decided, in order: take.lua's reply for
-- one debit {OK, NOW, USED, RESET, 0, RETRY_AT, SEQ, U, 0, 0}; none when
-- the first could not be decided here (nothing was written).

local k = (#ARGV - S_N) / P_STRIDE
local reply, replies = decide(k)
return replies or {reply}
