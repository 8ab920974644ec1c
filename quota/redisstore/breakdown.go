package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/quotactl/quotactl/quota/backend"
	"github.com/redis/go-redis/v9"
)

// hourMargin is how far the Redis clock may run behind the host's at the
// turn of an hour before a take needs a second round trip: the take script
// gets the breakdown hashes of the hour holding now-hourMargin and the next.
const hourMargin = 30 * time.Second

// maxBreakdownHours bounds how many hourly hashes one Breakdown reads: 40
// days, longer than any window a breakdown row outlives.
const maxBreakdownHours = 40 * 24

// useKey returns the breakdown hash of one credential's hour:
// prefix{api/fp}:use:UNIXSECONDS.
func (s *Store) useKey(api, fp string, hour time.Time) string {
	return s.prefix + CredentialTag(api, fp) + ":use:" + strconv.FormatInt(hour.Unix(), 10)
}

// Breakdown implements backend.Store: one pipelined HGETALL per hour from
// req.Since (at most 40 days back) to now, all in the credential's slot.
func (s *Store) Breakdown(ctx context.Context, req *backend.BreakdownRequest) ([]backend.BreakdownRow, error) {
	if err := checkCred(req.API, req.Owner); err != nil {
		return nil, err
	}
	now := s.estimate(req.Now)
	last := backend.HourOf(now.Add(hourMargin))
	first := backend.HourOf(req.Since)
	if floor := last.Add(-maxBreakdownHours * time.Hour); first.Before(floor) {
		first = floor
	}
	want := make(map[string]bool, len(req.Budgets))
	for _, b := range req.Budgets {
		want[b] = true
	}
	var hours []time.Time
	var cmds []*redis.MapStringStringCmd
	err := s.do(ctx, func(ctx context.Context) error {
		hours, cmds = hours[:0], cmds[:0]
		pipe := s.rdb.Pipeline()
		for h := first; !h.After(last); h = h.Add(time.Hour) {
			hours = append(hours, h)
			cmds = append(cmds, pipe.HGetAll(ctx, s.useKey(req.API, req.Owner, h)))
		}
		_, err := pipe.Exec(ctx)
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		return err
	})
	if err != nil {
		return nil, failed(ctx, "breakdown", err)
	}
	var out []backend.BreakdownRow
	for i, c := range cmds {
		for f, v := range c.Val() {
			budget, method, job, ok := backend.ParseBreakdownField(f)
			if !ok || (len(want) > 0 && !want[budget]) {
				continue
			}
			units, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, unavailable("breakdown", fmt.Errorf("field %q of hour %v: %w", f, hours[i], err))
			}
			out = append(out, backend.BreakdownRow{Hour: hours[i], Budget: budget, Method: method, Job: job, Units: units})
		}
	}
	return backend.SortBreakdown(out), nil
}

// MarkCrossing implements backend.Store: one script that sets the mark unless
// one holds (its value is when it lapses, and the key expires then), in the
// credential's slot, so of several processes exactly one records it.
func (s *Store) MarkCrossing(ctx context.Context, req *backend.CrossingMark) (bool, error) {
	if err := checkCred(req.API, req.Owner); err != nil {
		return false, err
	}
	if err := backend.CheckName("budget", req.Budget); err != nil {
		return false, fmt.Errorf("redisstore: %w", err)
	}
	if req.Percent < 1 || req.Percent > 100 {
		return false, invalid("threshold %d%%: must be between 1 and 100", req.Percent)
	}
	key := s.prefix + CredentialTag(req.API, req.Owner) + ":thr:" + req.Budget + ":" + strconv.Itoa(req.Percent)
	reply, err := s.run(ctx, markScript, []string{key}, []any{nowArg(req.Now), req.Until.UnixMicro()})
	if err != nil {
		return false, failed(ctx, "mark crossing", err)
	}
	status, _, err := head(reply)
	if err != nil {
		return false, unavailable("mark crossing", err)
	}
	return status == 1, nil
}
