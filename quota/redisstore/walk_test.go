package redisstore_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestRefusalWalksDeepLog: a sliding budget whose limit was lowered far
// under what its log holds refuses with the retry time of the entry whose
// expiry covers the deficit, thousands of entries in. The walk reads the
// log in batches by rank past the first few entries (an offset into
// ZRANGEBYSCORE made it quadratic); the memory store is the reference, and
// the deficits put the covering entry in the first batch, the second, at a
// batch's edge and at the last entry.
func TestRefusalWalksDeepLog(t *testing.T) {
	onBoth(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		st := redisstore.New(c, redisstore.WithPrefix(redistest.Prefix(t)))
		ref := quota.NewMemoryStore()
		b := quota.Budget{Name: "units", Limit: 10000, Window: quota.Sliding(time.Hour)}
		now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		// 2,600 entries, one a second, with costs 1 to 3, and a few
		// expired ones before them
		for i := range 2610 {
			req := &backend.TakeRequest{API: "yt", Owner: "o", Nonce: fmt.Sprint("n", i), Now: now,
				Debits: []backend.Debit{{Budget: b, Cost: 1 + int64(i%3)}}}
			if i == 10 {
				now = now.Add(time.Hour) // the first 10 expire
			}
			want, err := ref.Take(ctx, req)
			if err != nil || !want.OK {
				t.Fatal(want, err)
			}
			if _, err := st.Take(ctx, req); err != nil {
				t.Fatal(err)
			}
			now = now.Add(time.Second)
		}
		// the log now counts 2,600 entries, 5,200 units
		for _, limit := range []int64{5199, 5190, 3000, 2000, 1, 2} {
			low := b
			low.Limit = limit
			req := &backend.TakeRequest{API: "yt", Owner: "o", Nonce: fmt.Sprint("low", limit), Now: now,
				Debits: []backend.Debit{{Budget: low, Cost: 1}}}
			want, errW := ref.Take(ctx, req)
			got, errG := st.Take(ctx, req)
			if errW != nil || errG != nil {
				t.Fatal(errW, errG)
			}
			if got.OK || !reflect.DeepEqual(utcResult(want), utcResult(got)) {
				t.Fatalf("limit %d:\nmemory: %+v\nredis:  %+v", limit, want, got)
			}
		}
	})
}

// utcResult returns r with its instants in UTC, for comparing stores that
// answer in different locations.
func utcResult(r *backend.TakeResult) backend.TakeResult {
	c := *r
	c.At = c.At.UTC()
	c.Usage = append([]quota.Usage(nil), r.Usage...)
	for i := range c.Usage {
		u := &c.Usage[i]
		u.Reset, u.ExhaustedUntil, u.RetryAt = u.Reset.UTC(), u.ExhaustedUntil.UTC(), u.RetryAt.UTC()
	}
	return c
}

// BenchmarkDeepRefusal times a refusal that walks a whole log: 20,000
// entries of a sliding budget whose limit was then lowered to 1. It was
// quadratic in the entries walked (ZRANGEBYSCORE with a growing offset).
//
//	go test -run '^$' -bench DeepRefusal -benchtime 200x ./quota/redisstore/
func BenchmarkDeepRefusal(b *testing.B) {
	srv := redistest.Server(b)
	ctx := context.Background()
	st := redisstore.New(srv.Client(b))
	bu := quota.Budget{Name: "units", Limit: 1 << 40, Window: quota.Sliding(time.Hour)}
	now := time.Now()
	for i := range 20000 {
		req := &backend.TakeRequest{API: "yt", Owner: "o", Nonce: fmt.Sprint("n", i), Now: now.Add(time.Duration(i) * time.Millisecond),
			Debits: []backend.Debit{{Budget: bu, Cost: 1}}}
		if _, err := st.Take(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	bu.Limit = 1
	req := &backend.TakeRequest{API: "yt", Owner: "o", Nonce: "low", Now: now.Add(time.Minute), Debits: []backend.Debit{{Budget: bu, Cost: 1}}}
	for b.Loop() {
		res, err := st.Take(ctx, req)
		if err != nil || res.OK {
			b.Fatal(res, err)
		}
	}
}
