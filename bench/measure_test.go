package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 of 1..100", ms(hundred...), 100, 100 * time.Millisecond},
		{"p50 of 4 is the 2nd", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of 4 is the last", ms(1, 2, 3, 4), 99, 4 * time.Millisecond},
		{"tiny p is the first", ms(1, 2, 3), 0.001, time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: percentile(%v) = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}
}

func TestCombineMedianRound(t *testing.T) {
	round := func(ops int64, lat ...time.Duration) *sample {
		return &sample{goroutines: 2, ops: ops, refused: 1, elapsed: time.Second, lat: lat}
	}
	s := combine([]*sample{round(300, 3), round(100, 1), round(200, 2)})
	if got := s.perSecond(); got != 200 {
		t.Errorf("perSecond = %v, want the median round's 200", got)
	}
	if s.ops != 600 || s.refused != 3 || s.elapsed != 3*time.Second || s.goroutines != 2 {
		t.Errorf("combined = %+v, want ops 600, refused 3, elapsed 3s, 2 goroutines", s)
	}
	if want := []time.Duration{1, 2, 3}; len(s.lat) != 3 || s.lat[0] != want[0] || s.lat[2] != want[2] {
		t.Errorf("latencies = %v, want pooled and sorted %v", s.lat, want)
	}
	if got := median([]float64{1, 2, 3, 10}); got != 2.5 {
		t.Errorf("median of an even count = %v, want 2.5", got)
	}
}

// TestMeasureCount runs exactly count decisions across the goroutines and
// counts the refused ones.
func TestMeasureCount(t *testing.T) {
	var calls atomic.Int64
	fn := func(context.Context) (bool, error) {
		n := calls.Add(1)
		return n%4 != 0, nil // every 4th call refused
	}
	s, err := measure(t.Context(), 8, 0, 1000, fn)
	if err != nil {
		t.Fatal(err)
	}
	if s.ops != 1000 || calls.Load() != 1000 {
		t.Errorf("ops %d, calls %d: want exactly 1000 of each", s.ops, calls.Load())
	}
	if s.refused != 250 {
		t.Errorf("refused %d, want 250", s.refused)
	}
	if len(s.lat) != 1000 || s.goroutines != 8 {
		t.Errorf("%d latencies, %d goroutines; want 1000, 8", len(s.lat), s.goroutines)
	}
}

// TestMeasureDuration runs in a synctest bubble: each decision takes 1ms of
// fake time, so four goroutines make about 100 decisions each in 100ms.
func TestMeasureDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fn := func(context.Context) (bool, error) {
			<-time.NewTimer(time.Millisecond).C // 1ms of the bubble's fake clock
			return true, nil
		}
		s, err := measure(t.Context(), 4, 100*time.Millisecond, 0, fn)
		if err != nil {
			t.Fatal(err)
		}
		if s.ops < 400 || s.ops > 404 {
			t.Errorf("ops %d, want 400 (4 goroutines × 100ms / 1ms), at most one more each", s.ops)
		}
		if p := s.percentile(50); p != time.Millisecond {
			t.Errorf("p50 %v, want 1ms", p)
		}
		if s.elapsed < 100*time.Millisecond || s.elapsed > 101*time.Millisecond {
			t.Errorf("elapsed %v, want 100ms to 101ms", s.elapsed)
		}
		if r := s.perSecond(); r < 3900 || r > 4050 {
			t.Errorf("%.0f decisions/s, want about 4000", r)
		}
	})
}

// TestMeasureError stops every goroutine at the first error and returns it.
func TestMeasureError(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int64
	fn := func(context.Context) (bool, error) {
		if calls.Add(1) == 50 {
			return false, boom
		}
		return true, nil
	}
	_, err := measure(t.Context(), 4, 0, 1_000_000, fn)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if n := calls.Load(); n >= 1_000_000 {
		t.Errorf("%d calls: the error did not stop the run", n)
	}
}

func TestMeasureArgs(t *testing.T) {
	fn := func(context.Context) (bool, error) { return true, nil }
	if _, err := measure(t.Context(), 0, time.Second, 0, fn); err == nil {
		t.Error("0 goroutines: no error")
	}
	if _, err := measure(t.Context(), 1, 0, 0, fn); err == nil {
		t.Error("no duration and no count: no error")
	}
}

func TestThousandsAndLatency(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", 100000: "100,000"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[time.Duration]string{84200 * time.Nanosecond: "84.2 µs", 2500 * time.Microsecond: "2.50 ms"} {
		if got := latency(in); got != want {
			t.Errorf("latency(%v) = %q, want %q", in, got, want)
		}
	}
}
