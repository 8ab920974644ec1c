// Package simbucket holds what the upstream simulators (openaisim,
// anthropicsim, shopifysim) share: an exact token bucket refilled
// continuously, and the simulators' deterministic tokenizer.
package simbucket

import "time"

// Bucket is a token bucket that holds at most Limit units and refills Limit
// units per Period, continuously, in exact integer arithmetic (the level is
// kept in units × Period nanoseconds). It starts full. It is not safe for
// concurrent use: the simulators lock around it.
type Bucket struct {
	limit  int64
	period int64 // nanoseconds
	scaled int64 // level × period
	at     time.Time
}

// New returns a full bucket of limit units refilled over period. limit must
// be > 0 and limit × period must fit in an int64 (a limit of a billion a
// minute does).
func New(limit int64, period time.Duration, now time.Time) *Bucket {
	return &Bucket{limit: limit, period: int64(period), scaled: limit * int64(period), at: now}
}

// Limit returns the bucket's capacity.
func (b *Bucket) Limit() int64 { return b.limit }

func (b *Bucket) refill(now time.Time) {
	if !now.After(b.at) {
		return
	}
	el := int64(now.Sub(b.at))
	b.at = now
	if el >= b.period {
		b.scaled = b.limit * b.period
		return
	}
	b.scaled = min(b.scaled+el*b.limit, b.limit*b.period)
}

// Available returns the whole units in the bucket at now.
func (b *Bucket) Available(now time.Time) int64 {
	b.refill(now)
	return b.scaled / b.period
}

// Take takes n units if the bucket holds them at now, and reports whether
// it did.
func (b *Bucket) Take(now time.Time, n int64) bool {
	b.refill(now)
	if n*b.period > b.scaled {
		return false
	}
	b.scaled -= n * b.period
	return true
}

// Give puts n units back (a settle to a smaller actual), up to the limit.
func (b *Bucket) Give(now time.Time, n int64) {
	b.refill(now)
	b.scaled = min(b.scaled+n*b.period, b.limit*b.period)
}

// Wait returns how long until the bucket holds n units (0 if it does now).
func (b *Bucket) Wait(now time.Time, n int64) time.Duration {
	b.refill(now)
	need := n*b.period - b.scaled
	if need <= 0 {
		return 0
	}
	return time.Duration((need + b.limit - 1) / b.limit)
}

// UntilFull returns how long until the bucket is full again.
func (b *Bucket) UntilFull(now time.Time) time.Duration { return b.Wait(now, b.limit) }

// Tokens counts the tokens of s by the simulators' rule: each maximal run
// of ASCII letters and digits of n bytes is ceil(n/4) tokens (about four
// characters a token, as OpenAI's guides say of English), and every other
// byte (space, punctuation, each byte of a non-ASCII character) is one
// token: the most a byte-level BPE tokenizer can make of it. Tokens(s) <=
// len(s) always, as for every real tokenizer the meter's bound relies on.
func Tokens(s string) int64 {
	var n, run int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			run++
			continue
		}
		n += (run+3)/4 + 1
		run = 0
	}
	return n + (run+3)/4
}
