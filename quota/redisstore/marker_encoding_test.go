package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestMarkerIsHashTable: the store-loss marker holds a field per process
// bucket that admitted (up to 256) and every decision reads nine of its
// fields. Kept as a listpack (Redis's form of a small hash), each lookup
// scans the fields: a lone decision cost 5% more on a marker of 7 fields,
// 17% more on one of 107 (bench/callgrind, issue 26). The first decision
// makes the marker a hash table; a marker made before (a listpack) becomes
// one the next time its lifetime grows.
func TestMarkerIsHashTable(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	c := testkit.NewClock(t0)
	st := redisstore.New(rdb, redisstore.WithPrefix(prefix))
	l, err := quota.New(st, "api", []quota.Budget{{Name: "units", Limit: 1000, Window: quota.Daily(time.UTC)}},
		quota.WithClock(c.Now))
	if err != nil {
		t.Fatal(err)
	}
	take(t, l, 1)
	keys, err := rdb.Keys(ctx, prefix+"*:mark").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("markers under %s: %v, %v", prefix, keys, err)
	}
	mk := keys[0]
	encoding := func() string {
		t.Helper()
		enc, err := rdb.ObjectEncoding(ctx, mk).Result()
		if err != nil {
			t.Fatal(err)
		}
		return enc
	}
	if enc := encoding(); enc != "hashtable" {
		t.Fatalf("the marker after the first decision is a %s, want a hashtable", enc)
	}

	// a marker as an earlier version left it: the same fields, no pad, a
	// listpack
	fields, err := rdb.HGetAll(ctx, mk).Result()
	if err != nil {
		t.Fatal(err)
	}
	ttl := rdb.PTTL(ctx, mk).Val()
	delete(fields, "pad")
	if err := rdb.Del(ctx, mk).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, mk, fields).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, mk, ttl)
	if enc := encoding(); enc != "listpack" {
		t.Fatalf("the staged old marker is a %s, want a listpack", enc)
	}
	take(t, l, 1) // the same day: the marker's lifetime does not grow
	if enc := encoding(); enc != "listpack" {
		t.Fatalf("a decision that did not grow the marker's lifetime made it a %s", enc)
	}
	c.Set(t0.Add(5 * 24 * time.Hour)) // days on: the marker must live longer
	take(t, l, 1)
	if enc := encoding(); enc != "hashtable" {
		t.Fatalf("the old marker after its lifetime grew is a %s, want a hashtable", enc)
	}
	us, err := l.Status(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Used != 1 {
		t.Fatalf("used %d on the new day, want 1: the restaged marker lost nothing", us[0].Used)
	}
}
