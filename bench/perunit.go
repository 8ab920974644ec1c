package main

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed perunit.lua
var perUnitLua string

var perUnitScript = redis.NewScript(perUnitLua)

// perUnitLog is the baseline: the common recipe's sliding-window log with
// one sorted-set member per unit (see perunit.lua). Safe for concurrent use.
type perUnitLog struct {
	rdb    redis.Scripter
	key    string
	window time.Duration
	limit  int64
	seq    atomic.Uint64
	id     string // distinguishes this log's calls from another process's
}

func newPerUnitLog(rdb redis.Scripter, key string, window time.Duration, limit int64) *perUnitLog {
	return &perUnitLog{rdb: rdb, key: key, window: window, limit: limit, id: strconv.FormatInt(time.Now().UnixNano(), 36)}
}

// take charges cost units: admitted, and units in the window after the
// decision.
func (p *perUnitLog) take(ctx context.Context, cost int64) (bool, int64, error) {
	id := p.id + "-" + strconv.FormatUint(p.seq.Add(1), 36)
	v, err := perUnitScript.Run(ctx, p.rdb, []string{p.key}, p.window.Microseconds(), p.limit, cost, id).Int64Slice()
	if err != nil {
		return false, 0, fmt.Errorf("bench: per-unit log: %w", err)
	}
	if len(v) != 2 {
		return false, 0, fmt.Errorf("bench: per-unit log: reply %v", v)
	}
	return v[0] == 1, v[1], nil
}
