package redisstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// hammerResult is what a group of goroutines saw charging one budget.
type hammerResult struct {
	Accepted int64      `json:"accepted"` // units granted
	Refused  [][3]int64 `json:"refused"`  // {used, cost, limit} of each refusal
	Errors   []string   `json:"errors"`
}

// concurrencyBudget is the budget every worker charges.
func concurrencyBudget(limit int64) []quota.Budget {
	return []quota.Budget{{Name: "units", Limit: limit, Window: quota.Sliding(time.Hour)}}
}

// hammer runs goroutines that each make attempts charges of random cost
// 1..100 to secret's "units" budget.
func hammer(l *quota.Limiter, seed uint64, goroutines, attempts int) hammerResult {
	var (
		mu  sync.Mutex
		res = hammerResult{Refused: [][3]int64{}, Errors: []string{}}
		wg  sync.WaitGroup
	)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for range attempts {
				cost := rng.Int64N(100) + 1
				_, err := l.Take(context.Background(), secret, quota.Units("units", cost))
				var ee *quota.ExhaustedError
				mu.Lock()
				switch {
				case err == nil:
					res.Accepted += cost
				case errors.As(err, &ee):
					res.Refused = append(res.Refused, [3]int64{ee.Used, ee.Cost, ee.Limit})
				default:
					res.Errors = append(res.Errors, err.Error())
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return res
}

// hammerChild is the main of a worker process of TestConcurrentProcesses
// (the child role "hammer"): it charges the budget and prints its
// hammerResult as JSON. arg is
// "ADDR PREFIX LIMIT SEED GOROUTINES ATTEMPTS T0_UNIX_MICRO [LANES]", with
// LANES > 0 for WithPipelining(LANES), < 0 for WithoutPipelining.
func hammerChild(arg string) int {
	f := strings.Fields(arg)
	if len(f) != 7 && len(f) != 8 {
		fmt.Fprintf(os.Stderr, "hammer child: want 7 or 8 fields, got %q\n", f)
		return 2
	}
	var n [5]int64
	for i := range n {
		v, err := strconv.ParseInt(f[2+i], 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "hammer child: field %d: %v\n", 2+i, err)
			return 2
		}
		n[i] = v
	}
	c := redis.NewClient(&redis.Options{Addr: f[0]})
	defer c.Close()
	t0 := time.UnixMicro(n[4])
	opts := []redisstore.Option{redisstore.WithPrefix(f[1])}
	if len(f) == 8 {
		lanes, err := strconv.Atoi(f[7])
		if err != nil {
			fmt.Fprintf(os.Stderr, "hammer child: field 7: %v\n", err)
			return 2
		}
		switch {
		case lanes > 0:
			opts = append(opts, redisstore.WithPipelining(lanes))
		case lanes < 0:
			opts = append(opts, redisstore.WithoutPipelining())
		}
	}
	l, err := quota.New(redisstore.New(c, opts...), "api", concurrencyBudget(n[0]),
		quota.WithClock(func() time.Time { return t0 }))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	res := hammer(l, uint64(n[1]), int(n[2]), int(n[3]))
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}
