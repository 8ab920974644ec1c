package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// op is one rate-limit decision. admitted is false when the limiter refused
// the charge (a normal outcome); err is a failure that aborts the run.
type op func(ctx context.Context) (admitted bool, err error)

// sample is what one measurement saw: every decision's latency, sorted.
// A sample combined from several rounds also keeps each round's rate.
type sample struct {
	goroutines int
	ops        int64
	refused    int64
	elapsed    time.Duration
	lat        []time.Duration // sorted ascending
	rates      []float64       // decisions/s of each round, sorted; nil for one round
	// serverUsec is the µs Redis spent executing the scripts of the
	// measured decisions, from INFO commandstats; -1 when not measured.
	serverUsec  int64
	serverCalls int64 // script runs Redis counted meanwhile
	// clientCPU is the CPU time this process used meanwhile (the limiter's
	// client side, the Go runtime and the timing itself); -1 when unknown.
	clientCPU time.Duration
}

// clientPerDecision returns the µs of this process's CPU per decision, or
// -1 when unknown.
func (s *sample) clientPerDecision() float64 {
	if s.clientCPU < 0 || s.ops == 0 {
		return -1
	}
	return float64(s.clientCPU) / float64(time.Microsecond) / float64(s.ops)
}

// serverPerDecision returns the µs Redis spent per decision, or -1 when it
// was not measured.
func (s *sample) serverPerDecision() float64 {
	if s.serverUsec < 0 || s.ops == 0 {
		return -1
	}
	return float64(s.serverUsec) / float64(s.ops)
}

// perSecond returns decisions per second: the median round's when the
// sample combines rounds.
func (s *sample) perSecond() float64 {
	if len(s.rates) > 0 {
		return median(s.rates)
	}
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.ops) / s.elapsed.Seconds()
}

// combine pools the rounds of one measurement: their latencies, counts and
// time, and each round's rate, so that perSecond is the median round's.
func combine(rounds []*sample) *sample {
	out := &sample{}
	for _, r := range rounds {
		if r.clientCPU < 0 || out.clientCPU < 0 {
			out.clientCPU = -1
		} else {
			out.clientCPU += r.clientCPU
		}
		if r.serverUsec < 0 || out.serverUsec < 0 {
			out.serverUsec = -1
		} else {
			out.serverUsec += r.serverUsec
			out.serverCalls += r.serverCalls
		}
		out.goroutines = r.goroutines
		out.ops += r.ops
		out.refused += r.refused
		out.elapsed += r.elapsed
		out.lat = append(out.lat, r.lat...)
		out.rates = append(out.rates, r.perSecond())
	}
	slices.Sort(out.lat)
	slices.Sort(out.rates)
	return out
}

// median returns the median of sorted (the mean of the middle two when
// their number is even).
func median(sorted []float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return 0
	case n%2 == 1:
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// percentile returns the nearest-rank p-th percentile latency (0 < p <= 100).
func (s *sample) percentile(p float64) time.Duration { return percentile(s.lat, p) }

// percentile returns the nearest-rank p-th percentile of sorted: the
// smallest value with at least p% of the values at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// measure runs fn from goroutines goroutines at once, closed loop (each
// starts its next decision when the last one returns), either for dur or,
// when count > 0, for exactly count decisions in all. It times every
// decision. The first error stops every goroutine and is returned.
func measure(ctx context.Context, goroutines int, dur time.Duration, count int, fn op) (*sample, error) {
	if goroutines < 1 {
		return nil, fmt.Errorf("bench: %d goroutines: need at least 1", goroutines)
	}
	if count <= 0 && dur <= 0 {
		return nil, fmt.Errorf("bench: measure needs a duration or a count")
	}
	var (
		stop    atomic.Bool
		claimed atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	lats := make([][]time.Duration, goroutines)
	refused := make([]int64, goroutines)
	cpu0 := processCPU()
	start := time.Now()
	if count <= 0 {
		t := time.AfterFunc(dur, func() { stop.Store(true) })
		defer t.Stop()
	}
	for g := range goroutines {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 4096)
			for !stop.Load() {
				if count > 0 && claimed.Add(1) > int64(count) {
					break
				}
				t0 := time.Now()
				ok, err := fn(ctx)
				d := time.Since(t0)
				if err == nil {
					err = ctx.Err()
				}
				if err != nil {
					errOnce.Do(func() { first = err })
					stop.Store(true)
					break
				}
				lat = append(lat, d)
				if !ok {
					refused[g]++
				}
			}
			lats[g] = lat
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU()
	if first != nil {
		return nil, first
	}
	s := &sample{goroutines: goroutines, elapsed: elapsed, lat: slices.Concat(lats...), serverUsec: -1, clientCPU: -1}
	if cpu0 >= 0 && cpu >= 0 {
		s.clientCPU = cpu - cpu0
	}
	slices.Sort(s.lat)
	s.ops = int64(len(s.lat))
	for _, r := range refused {
		s.refused += r
	}
	return s, nil
}
