package redisstore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
)

// The take protocol: the KEYS and ARGV take.lua and batch.lua read, named
// once here. The Go side finds its positions by name (takeArg), and every
// script that reads them gets them as Lua constants generated from these
// tables (luaConstants), so the two never disagree on a position.

// takeHead are take.lua's first ARGV, one each per call.
var takeHead = []string{"NOW", "NONCE", "SEEN", "SEEN_UNTIL", "TRUST", "H", "KEEP", "HOLD"}

// takeDebit are take.lua's ARGV per debit, after takeHead: debit d's at
// len(takeHead) + len(takeDebit)(d-1).
var takeDebit = []string{"NAME", "COST", "LIMIT", "WIN", "B1", "B2", "B3", "B4", "WID", "FIELD"}

// takeTail are take.lua's last ARGV, after the debits: the marker field
// w:BUCKET of this process's admissions and OWN, its last admission's seq.
var takeTail = []string{"WBUCKET", "OWN"}

// takeKeyNames are take.lua's KEYS for one debit (the only shape fast
// decisions and batch.lua take): the debit's log, sum, exhausted-until and
// keep keys, the breakdown hashes of the hours H and H+1h, the marker.
var takeKeyNames = []string{"LOG", "SUM", "EXH", "KEEPK", "USE", "USE1", "MARK"}

// batchShared are the ARGV of a one-debit take that are the same for every
// decision batch.lua decides together: it takes them once, in this order.
var batchShared = []string{"NOW", "H", "KEEP", "NAME", "LIMIT", "WIN", "B1", "B2", "B3", "B4", "WID", "WBUCKET"}

// batchPerCall are the ARGV batch.lua takes per decision, in this order,
// after batchShared.
var batchPerCall = []string{"NONCE", "SEEN", "SEEN_UNTIL", "HOLD", "COST", "FIELD", "OWN"}

// takeOne is take.lua's ARGV for one debit, in order.
var takeOne = slices.Concat(takeHead, takeDebit, takeTail)

// takeArg returns the 0-based position of the one-debit take ARGV name.
func takeArg(name string) int {
	i := slices.Index(takeOne, name)
	if i < 0 {
		panic("redisstore: no take argument " + name)
	}
	return i
}

// The positions in a one-debit take's ARGV (0-based) the Go side reads.
var (
	argTrust = takeArg("TRUST")
	takeArgs = len(takeOne)      // take.lua's ARGV for one debit
	takeKeys = len(takeKeyNames) // and its KEYS
)

// Constants every script that names them shares (µs unless said).
var luaShared = []luaConst{
	// quota.DailyKeep: how long after its score an entry of a log kept
	// for a daily window is kept (set aside once its day ended)
	{"DAILYKEEP", backend.DailyKeep.Microseconds()},
	// quota.MonthlyKeep: the same for a monthly window
	{"MONTHLYKEEP", backend.MonthlyKeep.Microseconds()},
	{"HOUR", time.Hour.Microseconds()},
	// the longest a marker is kept for a mark far ahead
	{"YEAR", 366 * 24 * time.Hour.Microseconds()},
	// 2^52: where a marker made afresh starts its seq (see lib/marker.lua)
	{"FRESH", 1 << 52},
}

// luaConst is a Lua constant a script may use: local NAME = VALUE.
type luaConst struct {
	name  string
	value int64
}

// takeConstants are the positions take.lua and decide (lib/decide.lua)
// read, as run inside the take script: A_x is head or tail argument x's
// (1-based; the tail's from the end: ARGV[#ARGV + A_x]), D_x debit
// argument x's offset in a debit's block, which starts at A_DEBIT and
// spans N_DEBIT; S_x and P_x are decide's (the one-debit take's
// positions, P_STRIDE 0: one decision); K_x the one-debit KEYS.
func takeConstants() []luaConst {
	var cs []luaConst
	for i, n := range takeHead {
		cs = append(cs, luaConst{"A_" + n, int64(i + 1)})
	}
	for i, n := range takeTail {
		cs = append(cs, luaConst{"A_" + n, int64(i - len(takeTail) + 1)})
	}
	cs = append(cs, luaConst{"A_DEBIT", int64(len(takeHead) + 1)}, luaConst{"N_DEBIT", int64(len(takeDebit))})
	for i, n := range takeDebit {
		cs = append(cs, luaConst{"D_" + n, int64(i)})
	}
	for _, n := range batchShared {
		cs = append(cs, luaConst{"S_" + n, int64(takeArg(n) + 1)})
	}
	for _, n := range batchPerCall {
		cs = append(cs, luaConst{"P_" + n, int64(takeArg(n) + 1)})
	}
	cs = append(cs, luaConst{"P_STRIDE", 0}, luaConst{"S_N", 0})
	return append(cs, keyConstants()...)
}

// batchConstants are decide's positions as batch.lua runs it: S_x in
// batchShared's order, then per decision i (0-based) P_x + P_STRIDE*i in
// batchPerCall's; S_N shared values before the first decision's.
func batchConstants() []luaConst {
	var cs []luaConst
	for i, n := range batchShared {
		cs = append(cs, luaConst{"S_" + n, int64(i + 1)})
	}
	for i, n := range batchPerCall {
		cs = append(cs, luaConst{"P_" + n, int64(len(batchShared) + i + 1)})
	}
	cs = append(cs, luaConst{"P_STRIDE", int64(len(batchPerCall))}, luaConst{"S_N", int64(len(batchShared))})
	return append(cs, keyConstants()...)
}

func keyConstants() []luaConst {
	var cs []luaConst
	for i, n := range takeKeyNames {
		cs = append(cs, luaConst{"K_" + n, int64(i + 1)})
	}
	return cs
}

// preamble returns the Lua lines defining those of cs whose name code
// (stripLua's) uses, in cs's order.
func preamble(cs []luaConst, code string) string {
	var b strings.Builder
	for _, c := range cs {
		if uses(code, c.name) {
			fmt.Fprintf(&b, "local %s = %d\n", c.name, c.value)
		}
	}
	return b.String()
}

// batchPositions returns the positions in a one-debit take's ARGV of
// names, in order: what batchArgs copies.
func batchPositions(names []string) []int {
	out := make([]int, len(names))
	for i, n := range names {
		out[i] = takeArg(n)
	}
	return out
}
