package redisstore

import (
	"fmt"

	"github.com/redis/go-redis/v9"
)

// batchSharedAt and batchPerCallAt are the positions in a one-debit
// take's ARGV of what batch.lua (lua/batch.lua, decide in lua/lib) takes
// once, and per decision (protocol.go's batchShared, batchPerCall).
var (
	batchSharedAt  = batchPositions(batchShared)
	batchPerCallAt = batchPositions(batchPerCall)
)

// batchable reports whether c is a decision batch.lua can decide: a take
// of one budget, on the path decide takes (not a test's general path).
func batchable(c *pipedCall) bool {
	if c.sc != takeScript || len(c.keys) != takeKeys || len(c.args) != takeArgs {
		return false
	}
	t := c.args[argTrust]
	return t == zero || t == one
}

// sameBatch reports whether a and b, both batchable, charge the same
// budget of the same owner with the same definition and clock: all that
// batch.lua takes once.
func sameBatch(a, b *pipedCall) bool {
	for i := range a.keys {
		if a.keys[i] != b.keys[i] {
			return false
		}
	}
	for _, i := range batchSharedAt {
		if a.args[i] != b.args[i] {
			return false
		}
	}
	return true
}

// groupCalls splits calls into those sent alone and groups of two or more
// that batch.lua decides together, each in the order the calls came.
func groupCalls(calls []*pipedCall) (alone []*pipedCall, groups [][]*pipedCall) {
	for _, c := range calls {
		if !batchable(c) {
			alone = append(alone, c)
			continue
		}
		found := false
		for i, g := range groups {
			if sameBatch(g[0], c) {
				groups[i] = append(g, c)
				found = true
				break
			}
		}
		if !found {
			groups = append(groups, []*pipedCall{c})
		}
	}
	// a group of one goes alone: take.lua's fast path is the same work
	kept := groups[:0]
	for _, g := range groups {
		if len(g) == 1 {
			alone = append(alone, g[0])
		} else {
			kept = append(kept, g)
		}
	}
	return alone, kept
}

// batchArgs builds batch.lua's KEYS and ARGV for g.
func batchArgs(g []*pipedCall) (keys []string, args []any) {
	args = make([]any, 0, len(batchSharedAt)+len(batchPerCallAt)*len(g))
	for _, i := range batchSharedAt {
		args = append(args, g[0].args[i])
	}
	for _, c := range g {
		for _, i := range batchPerCallAt {
			args = append(args, c.args[i])
		}
	}
	return g[0].keys, args
}

// batchReplies reads batch.lua's reply: one take.lua reply per decision
// decided, in order (fewer than the batch's calls when it stopped early).
func batchReplies(cmd *redis.Cmd, n int) ([][]any, error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	a, ok := v.([]any)
	if !ok || len(a) > n {
		return nil, fmt.Errorf("unexpected batch reply %T %v", v, v)
	}
	out := make([][]any, len(a))
	for i, x := range a {
		r, ok := x.([]any)
		if !ok || len(r) < 2 {
			return nil, fmt.Errorf("unexpected batch reply %T %v", x, x)
		}
		out[i] = r
	}
	return out, nil
}
