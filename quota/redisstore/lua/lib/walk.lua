-- walk.lua: the refusal walk.

-- walk adds the costs of the entries of flat (MEMBER, SCORE, ..., oldest
-- first) from index j on to freed until they cover deficit, and returns
-- freed and the score of the entry that covered it: a refused charge fits
-- once that entry expired. The score is false when the entries did not
-- cover it, or when an entry past limit (when given) came first.
local function walk(flat, j, freed, deficit, limit)
  while j < #flat do
    local s = tonumber(flat[j + 1])
    if limit and s > limit then
      return freed, false
    end
    freed = freed + cost(flat[j])
    if freed >= deficit then
      return freed, s
    end
    j = j + 2
  end
  return freed, false
end
