package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// dump returns every key under prefix with its whole content as text.
func dump(t *testing.T, c redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	iter := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		var v any
		var err error
		switch typ := c.Type(ctx, k).Val(); typ {
		case "string":
			v, err = c.Get(ctx, k).Result()
		case "zset":
			v, err = c.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "hash":
			v, err = c.HGetAll(ctx, k).Result()
		case "set":
			v, err = c.SMembers(ctx, k).Result()
		case "list":
			v, err = c.LRange(ctx, k, 0, -1).Result()
		default:
			t.Fatalf("key %s has unexpected type %q", k, typ)
		}
		if err != nil {
			t.Fatal(err)
		}
		out[k] = fmt.Sprint(v)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNoSecretStored drives every operation with a credential, then scans
// every key under the test's prefix: the secret appears in no key name and
// no value; its fingerprint and label do.
func TestNoSecretStored(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t)
	st := redisstore.New(c, redisstore.WithPrefix(prefix))
	la, _ := time.LoadLocation("America/Los_Angeles")
	l, err := quota.New(st, "youtube", []quota.Budget{
		{Name: "units", Limit: 10000, Window: quota.Daily(la)},
		{Name: "search", Limit: 100, Window: quota.Sliding(24 * time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := take(t, l, 100)
	if _, err := l.Take(ctx, secret, quota.Charge{Method: "search.list", Units: map[string]int64{"units": 1, "search": 1}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Refund(ctx, r); err != nil {
		t.Fatal(err)
	}
	take(t, l, 3)
	if err := l.Exhaust(ctx, secret, "search", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := l.Adjust(ctx, secret, "units", 42); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveState(ctx, "jobs/trending/checkpoint", []byte(`{"page":"CAUQAA"}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendRecord(ctx, "jobs/trending/runs", []byte(`{"units":101}`), 10); err != nil {
		t.Fatal(err)
	}

	keys := dump(t, c, prefix)
	if len(keys) < 8 {
		t.Fatalf("scan found only %d keys: %v", len(keys), keys)
	}
	fp := fingerprint(secret)
	seenFP, seenLabel := false, false
	for k, v := range keys {
		for _, s := range []string{secret.Secret, secret.Secret[len(secret.Secret)/2:], secret.Secret[:len(secret.Secret)/2]} {
			if strings.Contains(k, s) || strings.Contains(v, s) {
				t.Fatalf("key %s = %s holds (part of) the secret", k, v)
			}
		}
		seenFP = seenFP || strings.Contains(k, fp)
		seenLabel = seenLabel || strings.Contains(v, secret.Label)
	}
	if !seenFP || !seenLabel {
		t.Fatalf("the fingerprint (%v) or label (%v) is missing from the store: %v", seenFP, seenLabel, keys)
	}
}
