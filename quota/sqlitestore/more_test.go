package sqlitestore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// TestHostClock: with no injected clock the store decides on the host's
// clock.
func TestHostClock(t *testing.T) {
	st, _ := openTemp(t)
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	before := time.Now().Truncate(time.Microsecond)
	res, err := st.Take(context.Background(), &backend.TakeRequest{API: "api", Owner: "c", Nonce: "n", Debits: []backend.Debit{{Budget: b, Cost: 4}}})
	after := time.Now()
	if err != nil || !res.OK {
		t.Fatalf("Take = %+v, %v", res, err)
	}
	if res.At.Before(before) || res.At.After(after) || res.At.Nanosecond()%1000 != 0 {
		t.Fatalf("At = %v, want a microsecond instant between %v and %v", res.At, before, after)
	}
	if !res.Usage[0].Reset.Equal(res.At.Add(time.Hour)) {
		t.Fatalf("Reset = %v, want At+1h", res.Usage[0].Reset)
	}
}

// TestNoSecretInFile: the database holds the credential's fingerprint and
// label, never the secret.
func TestNoSecretInFile(t *testing.T) {
	st, path := openTemp(t)
	const secret = "AIzaSyD-very-secret-api-key-0123456789"
	l, err := quota.New(st, "youtube", []quota.Budget{{Name: "units", Limit: 100, Window: quota.Sliding(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: secret, Label: "yt-key-1"}
	ctx := context.Background()
	if _, err := l.Take(ctx, key, quota.Units("units", 5)); err != nil {
		t.Fatal(err)
	}
	if err := l.Exhaust(ctx, key, "units", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil { // checkpoints the WAL into the file
		t.Fatal(err)
	}
	var all []byte
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	fp := quota.DefaultFingerprint(secret)
	if bytes.Contains(all, []byte(secret)) || bytes.Contains(all, []byte(secret[8:24])) {
		t.Fatal("the database file holds the secret")
	}
	if !bytes.Contains(all, []byte(fp)) || !bytes.Contains(all, []byte("yt-key-1")) {
		t.Fatal("the database file lacks the fingerprint or the label; is this test reading the right file?")
	}
}

func TestRecordsAndStreams(t *testing.T) {
	st, _ := openTemp(t)
	ctx := context.Background()
	for i, s := range []string{"jobs/b/runs", "jobs/a/runs", "jobs\xffz", "jobsx", "other", "jobs/a/runs"} {
		if err := st.AppendRecord(ctx, s, []byte{byte('0' + i)}, 0); err != nil {
			t.Fatal(err)
		}
	}
	for prefix, want := range map[string][]string{
		"":         {"jobs/a/runs", "jobs/b/runs", "jobsx", "jobs\xffz", "other"},
		"jobs/":    {"jobs/a/runs", "jobs/b/runs"},
		"jobs":     {"jobs/a/runs", "jobs/b/runs", "jobsx", "jobs\xffz"},
		"jobs\xff": {"jobs\xffz"},
		"nope":     nil,
	} {
		got, err := st.Streams(ctx, prefix)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Streams(%q) = %q, %v; want %q", prefix, got, err, want)
		}
	}
	// keep <= 0 keeps everything; a later keep trims the oldest.
	recs, err := st.Records(ctx, "jobs/a/runs", -1)
	if err != nil || len(recs) != 2 || string(recs[0]) != "5" || string(recs[1]) != "1" {
		t.Fatalf("Records = %q, %v", recs, err)
	}
	if err := st.AppendRecord(ctx, "jobs/a/runs", nil, 1); err != nil {
		t.Fatal(err)
	}
	if recs, err := st.Records(ctx, "jobs/a/runs", 0); err != nil || len(recs) != 1 || len(recs[0]) != 0 {
		t.Fatalf("after keep 1: %q, %v", recs, err)
	}
	if err := st.SaveState(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if v, err := st.LoadState(ctx, "empty"); err != nil || len(v) != 0 {
		t.Fatalf("LoadState(empty) = %q, %v", v, err)
	}
	if _, err := st.LoadState(ctx, "missing"); !errors.Is(err, quota.ErrNotFound) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("LoadState(missing) = %v", err)
	}
}

// TestStoreValidates: the store refuses malformed requests itself, whoever
// calls it, naming what is wrong.
func TestStoreValidates(t *testing.T) {
	st, _ := openTemp(t)
	ctx := context.Background()
	b := quota.Budget{Name: "units", Limit: 10, Window: quota.Sliding(time.Hour)}
	take := func(cred string, ds ...backend.Debit) error {
		_, err := st.Take(ctx, &backend.TakeRequest{API: "api", Owner: cred, Nonce: "n", Now: t0, Debits: ds})
		return err
	}
	for name, tc := range map[string]struct {
		err  error
		want error
		says string
	}{
		"empty credential": {take("", backend.Debit{Budget: b, Cost: 1}), quota.ErrInvalid, "empty credential"},
		"no debits":        {take("c"), quota.ErrInvalid, "no budget"},
		"zero cost":        {take("c", backend.Debit{Budget: b, Cost: 0}), quota.ErrInvalid, "cost 0"},
		"over the limit":   {take("c", backend.Debit{Budget: b, Cost: 11}), quota.ErrCostExceedsLimit, "cost 11 > limit 10"},
		"twice":            {take("c", backend.Debit{Budget: b, Cost: 1}, backend.Debit{Budget: b, Cost: 1}), quota.ErrInvalid, "twice"},
		"zero window":      {take("c", backend.Debit{Budget: quota.Budget{Name: "w", Limit: 5}, Cost: 1}), quota.ErrInvalid, `"w"`},
		"nil zone":         {take("c", backend.Debit{Budget: quota.Budget{Name: "d", Limit: 5, Window: quota.Daily(nil)}, Cost: 1}), quota.ErrInvalid, `"d"`},
		"fixed zone": {st.DefineBudgets(ctx, "api", []quota.Budget{{Name: "f", Limit: 5, Window: quota.Daily(time.FixedZone("X", 3600))}}),
			quota.ErrInvalid, "IANA"},
		"bad api name":      {st.DefineBudgets(ctx, "a b", []quota.Budget{b}), quota.ErrInvalid, "api name"},
		"empty fingerprint": {second(st.UpdateCredential(ctx, "api", backend.CredentialUpdate{Label: "x"})), quota.ErrInvalid, "fingerprint"},
		"negative adjust": {st.Adjust(ctx, &backend.AdjustRequest{API: "api", Owner: "c", Budget: b, Used: -1, Now: t0}),
			quota.ErrInvalid, "used -1"},
	} {
		if !errors.Is(tc.err, tc.want) || !strings.Contains(tc.err.Error(), tc.says) || !strings.HasPrefix(tc.err.Error(), "sqlitestore: ") {
			t.Errorf("%s: err = %v, want %v saying %q", name, tc.err, tc.want, tc.says)
		}
	}
	if n, err := st.Entries(ctx, &backend.EntriesRequest{API: "api", Owner: "c", Budget: b, Now: t0}); err != nil || len(n) != 0 {
		t.Fatalf("bad requests recorded entries: %v, %v", n, err)
	}
}

// second returns the error of a two-result call.
func second[T any](_ T, err error) error { return err }
