package redisstore_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
)

// TestMigrationBeforeOwners writes a store in the layout used before owners
// existed, with raw commands (catalog: creds hash fingerprint -> label;
// data under the legacy fingerprint's hash tag: log member "NONCE:COST"
// scored by µs, running sum), then meters with this code: the usage
// continues, for a process on the legacy fingerprint key and for one on the
// default slow derivation, which takes the legacy record over.
func TestMigrationBeforeOwners(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	b := quota.Budget{Name: "units", Limit: 1000, Window: quota.Sliding(24 * time.Hour)}
	key := quota.Credential{Secret: "AIzaSy-redis-before-owners", Label: "yt-key-1"}
	legacy := quota.Fingerprint([]byte(quota.LegacyFingerprintKey), key.Secret)

	js, _ := json.Marshal(b)
	tag := prefix + redisstore.CredentialTag("youtube", legacy)
	for _, cmd := range [][]any{
		{"SADD", prefix + "apis", "youtube"},
		{"HSET", prefix + "budgets:youtube", "units", string(js)},
		{"HSET", prefix + "creds:youtube", legacy, "yt-key-1"},
		{"ZADD", tag + ":log:units", strconv.FormatInt(t0.UnixMicro(), 10), "oldnonce1:700"},
		{"SET", tag + ":sum:units", "700", "PX", "86400000"},
		{"PEXPIRE", tag + ":log:units", "86400000"},
	} {
		if err := rdb.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	st := redisstore.New(rdb, redisstore.WithPrefix(prefix))
	apis, err := st.List(ctx)
	if err != nil || len(apis) != 1 || len(apis[0].Credentials) != 1 {
		t.Fatalf("List = %+v, %v", apis, err)
	}
	if c := apis[0].Credentials[0]; c.ID != legacy || c.Label != "yt-key-1" || c.Owner != legacy {
		t.Fatalf("legacy record read as %+v; want its own owner, labelled", c)
	}
	now := func() time.Time { return t0.Add(time.Hour) }
	old, err := quota.Load(ctx, st, "youtube", quota.WithClock(now), quota.WithFingerprintKey([]byte(quota.LegacyFingerprintKey)))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := old.Take(ctx, key, quota.Units("units", 10)); err != nil || r.Usage[0].Used != 710 {
		t.Fatalf("legacy-key take: %+v, %v; want used 710", r, err)
	}
	l, err := quota.Load(ctx, st, "youtube", quota.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Take(ctx, key, quota.Units("units", 1))
	if err != nil || r.Usage[0].Used != 711 || r.Owner != legacy || r.Credential == legacy {
		t.Fatalf("default-derivation take: %+v, %v; want used 711 on %s", r, err, legacy)
	}
	// The old entry still expires on time: a refund by the new ID works, and
	// after the window only the new entries count.
	if err := l.Refund(ctx, r); err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return t0.Add(24*time.Hour + time.Microsecond) }
	l2, _ := quota.Load(ctx, st, "youtube", quota.WithClock(later))
	if us, err := l2.Status(ctx, quota.Credential{Label: "yt-key-1"}); err != nil || us[0].Used != 10 {
		t.Fatalf("after the old entry expired: %+v, %v; want 10", us, err)
	}
}

// TestBudgetsBeforeUnits: a budget definition written before budgets had
// units (JSON without "unit") reads in the default unit; one written now
// carries its unit in the same JSON, which a build before units reads as
// before (encoding/json skips the field it does not know).
func TestBudgetsBeforeUnits(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	if err := rdb.HSet(ctx, prefix+"budgets:youtube", "units", `{"name":"units","limit":1000,"window":"sliding:24h0m0s"}`).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.SAdd(ctx, prefix+"apis", "youtube").Err(); err != nil {
		t.Fatal(err)
	}
	st := redisstore.New(rdb, redisstore.WithPrefix(prefix))
	apis, err := st.List(ctx)
	if err != nil || len(apis) != 1 || len(apis[0].Budgets) != 1 || apis[0].Budgets[0].Unit != "" || apis[0].Budgets[0].Limit != 1000 {
		t.Fatalf("List of a definition without a unit = %+v, %v", apis, err)
	}
	if err := st.DefineBudgets(ctx, "openai", []quota.Budget{{Name: "tokens", Limit: 30000, Window: quota.Sliding(time.Minute), Unit: "tokens"}}); err != nil {
		t.Fatal(err)
	}
	raw, err := rdb.HGet(ctx, prefix+"budgets:openai", "tokens").Result()
	if err != nil {
		t.Fatal(err)
	}
	var old struct {
		Name  string `json:"name"`
		Limit int64  `json:"limit"`
	}
	if err := json.Unmarshal([]byte(raw), &old); err != nil || old.Name != "tokens" || old.Limit != 30000 || !strings.Contains(raw, `"unit":"tokens"`) {
		t.Fatalf("stored %s: read by an older build as %+v, %v", raw, old, err)
	}
}
