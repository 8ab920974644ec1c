package simbucket

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestTokensAtMostBytes(t *testing.T) {
	for _, c := range []struct {
		s    string
		want int64
	}{{"", 0}, {"a", 1}, {"abcd", 1}, {"abcde", 2}, {"hi there", 4}, {"é", 2}, {"a,b", 3}} {
		if got := Tokens(c.s); got != c.want {
			t.Errorf("Tokens(%q) = %d, want %d", c.s, got, c.want)
		}
	}
	r := rand.New(rand.NewPCG(1, 1))
	for range 10000 {
		b := make([]byte, r.IntN(64))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		if n := Tokens(string(b)); n > int64(len(b)) || n < 0 {
			t.Fatalf("Tokens(%q) = %d > %d bytes", b, n, len(b))
		}
	}
}

func TestBucket(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := New(60, time.Minute, t0)
	if !b.Take(t0, 60) || b.Take(t0, 1) || b.Wait(t0, 1) != time.Second || b.UntilFull(t0) != time.Minute {
		t.Fatalf("after taking all: wait %v full %v", b.Wait(t0, 1), b.UntilFull(t0))
	}
	if b.Available(t0.Add(999*time.Millisecond)) != 0 || b.Available(t0.Add(time.Second)) != 1 {
		t.Fatal("refill is not 1 a second")
	}
	b.Give(t0.Add(time.Second), 100)
	if b.Available(t0.Add(time.Second)) != 60 {
		t.Fatal("Give past the limit")
	}
}

// Whatever a sliding window of limit L over W admits, a bucket of L
// refilled L per W admits too: the simulators never refuse what an exact
// sliding-window meter with the same limit lets through.
func TestSlidingWindowFitsBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	const L, W = 1000, time.Minute
	for trial := range 200 {
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		b := New(L, W, t0)
		type entry struct {
			at time.Time
			n  int64
		}
		var log []entry
		now := t0
		for range 500 {
			now = now.Add(time.Duration(r.Int64N(int64(3 * time.Second))))
			n := 1 + r.Int64N(L/3)
			var used int64
			for _, e := range log {
				if now.Sub(e.at) < W {
					used += e.n
				}
			}
			if used+n > L {
				continue // the meter refuses it
			}
			log = append(log, entry{now, n})
			if !b.Take(now, n) {
				t.Fatalf("trial %d: the window admits %d at %v (used %d) but the bucket has %d", trial, n, now.Sub(t0), used, b.Available(now))
			}
		}
	}
}
