package quotactl_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/internal/ytsim"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// secret is a recognisable raw credential, unique to this run.
type secret struct {
	raw  string
	tail string // the random part alone
}

func newSecret(t *testing.T, kind string) secret {
	t.Helper()
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	tail := hex.EncodeToString(b[:])
	return secret{raw: "AIzaSy-SECRET-" + kind + "-" + tail, tail: tail}
}

// leaks reports the forms of s that data holds: the raw secret, its random
// part, or the secret in hex or base64.
func (s secret) leaks(data []byte) []string {
	forms := map[string]string{
		"raw":         s.raw,
		"random part": s.tail,
		"hex":         hex.EncodeToString([]byte(s.raw)),
		"base64":      base64.StdEncoding.EncodeToString([]byte(s.raw)),
		"base64url":   base64.RawURLEncoding.EncodeToString([]byte(s.raw)),
	}
	var found []string
	for name, form := range forms {
		if bytes.Contains(data, []byte(form)) || bytes.Contains(bytes.ToLower(data), []byte(strings.ToLower(form))) {
			found = append(found, name)
		}
	}
	return found
}

// exposure collects everything a run exposed: stored bytes, logs, error
// strings, printed values.
type exposure struct {
	what []string
	data [][]byte
}

func (e *exposure) add(what string, data []byte) {
	e.what = append(e.what, what)
	e.data = append(e.data, data)
}

// addErr records err's text, its %+v and %#v forms, and the text of every
// error it wraps (a caller may log any of them).
func (e *exposure) addErr(what string, err error) {
	if err == nil {
		return
	}
	e.add(what+": error", []byte(err.Error()+"\n"+fmt.Sprintf("%+v\n%#v", err, err)))
	var walk func(err error, depth int)
	walk = func(err error, depth int) {
		if err == nil || depth > 20 {
			return
		}
		e.add(fmt.Sprintf("%s: wrapped error %T", what, err), []byte(err.Error()))
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, w := range u.Unwrap() {
				walk(w, depth+1)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap(), depth+1)
		}
	}
	walk(err, 0)
}

func (e *exposure) addValue(what string, v any) {
	js, _ := json.Marshal(v)
	e.add(what, []byte(fmt.Sprintf("%v\n%+v\n%#v\n%s", v, v, v, js)))
}

// check fails the test for every place that holds a form of any secret.
func (e *exposure) check(t *testing.T, secrets ...secret) {
	t.Helper()
	for i, data := range e.data {
		for _, s := range secrets {
			if f := s.leaks(data); len(f) > 0 {
				t.Errorf("%s holds the credential %q (%s)", e.what[i], s.raw, strings.Join(f, ", "))
			}
		}
	}
}

// redisExposure adds every key under prefix on c, by name, by DUMP (on a
// real Redis: miniredis dumps strings only), and by its contents read back
// by type.
func redisExposure(t *testing.T, c redis.UniversalClient, prefix string, e *exposure) int {
	t.Helper()
	ctx := context.Background()
	dumpable := redistest.IsReal(t)
	var keys []string
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		e.add("redis key name "+k, []byte(k))
		if dumpable {
			dump, err := c.Dump(ctx, k).Result()
			if err != nil {
				t.Fatalf("DUMP %s: %v", k, err)
			}
			e.add("redis DUMP of "+k, []byte(dump))
		}
		typ, err := c.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch typ {
		case "string":
			v, err = c.Get(ctx, k).Result()
		case "zset":
			v, err = c.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "hash":
			v, err = c.HGetAll(ctx, k).Result()
		case "list":
			v, err = c.LRange(ctx, k, 0, -1).Result()
		case "set":
			v, err = c.SMembers(ctx, k).Result()
		default:
			t.Fatalf("key %s has type %s, which this test cannot read", k, typ)
		}
		if err != nil {
			t.Fatalf("read %s %s: %v", typ, k, err)
		}
		e.add(fmt.Sprintf("redis %s %s", typ, k), []byte(fmt.Sprintf("%v", v)))
	}
	return len(keys)
}

// fileExposure adds the bytes of path and its -wal and -shm companions.
func fileExposure(t *testing.T, path, when string, e *exposure) {
	t.Helper()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		e.add(fmt.Sprintf("%s (%d bytes, %s)", filepath.Base(p), len(b), when), b)
	}
}

// TestCredentialSecrecy drives recognisable raw credentials through
// everything that handles them — the Limiter's every operation, the metered
// http.RoundTripper against the simulated YouTube API (served, retried on
// 503 and dropped connections, refused by the upstream's 403
// quotaExceeded, refused locally, a dial error), the failure policy with an
// unreachable store — on Redis and on SQLite. Then no Redis key or value
// under the test's prefix, no byte of the SQLite file (with its -wal and
// -shm), no log line at any level, no error string (nor any error it
// wraps) and no printed reservation holds a credential, raw or encoded.
//
// The canary subtests show the scan finds a secret that is there.
func TestCredentialSecrecy(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		c := redistest.Client(t)
		store := redisstore.New(c, redisstore.WithPrefix(prefix))
		var e exposure
		secrets := secrecyRun(t, store, &e)
		if n := redisExposure(t, c, prefix, &e); n == 0 {
			t.Fatal("no Redis key under the prefix: the run stored nothing to inspect")
		}
		e.check(t, secrets...)
	})
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "quota.db")
		store, err := sqlitestore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var e exposure
		secrets := secrecyRun(t, store, &e)
		fileExposure(t, path, "open", &e)
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		fileExposure(t, path, "closed", &e)
		e.check(t, secrets...)
	})
	t.Run("canary", func(t *testing.T) {
		// A secret stored on purpose, as a state value, is found in Redis
		// and in the SQLite file: the scans above can fail.
		s := newSecret(t, "canary")
		prefix := redistest.Prefix(t)
		c := redistest.Client(t)
		path := filepath.Join(t.TempDir(), "canary.db")
		lite, err := sqlitestore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range []quota.StateStore{redisstore.New(c, redisstore.WithPrefix(prefix)), lite} {
			if err := st.SaveState(context.Background(), "canary", []byte(s.raw)); err != nil {
				t.Fatal(err)
			}
			if err := st.AppendRecord(context.Background(), "canary", []byte(s.raw), 10); err != nil {
				t.Fatal(err)
			}
		}
		var re, fe exposure
		redisExposure(t, c, prefix, &re)
		fileExposure(t, path, "open", &fe)
		_ = lite.Close()
		for name, e := range map[string]*exposure{"redis": &re, "sqlite": &fe} {
			found := false
			for _, d := range e.data {
				found = found || len(s.leaks(d)) > 0
			}
			if !found {
				t.Errorf("%s: the scan missed a secret stored on purpose", name)
			}
		}
	})
}

// secrecyRun uses store in every way that handles a raw credential and
// records what it exposes. It returns the secrets used.
func secrecyRun(t *testing.T, store quota.Store, e *exposure) []secret {
	t.Helper()
	ctx := context.Background()
	var logs testkit.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var text testkit.Buffer
	textLogger := slog.New(slog.NewTextHandler(&text, &slog.HandlerOptions{Level: slog.LevelDebug}))

	labelled, bare, bearer := newSecret(t, "labelled"), newSecret(t, "bare"), newSecret(t, "bearer")
	secrets := []secret{labelled, bare, bearer}
	table, err := costs.Builtin("youtube")
	if err != nil {
		t.Fatal(err)
	}
	spec := table.Spec()
	l, err := quota.New(store, spec.API, spec.Budgets, quota.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}

	// The limiter, directly. A Credential nested in a logged struct goes
	// through encoding/json, not LogValue.
	key := quota.Credential{Secret: labelled.raw, Label: "yt-key-1"}
	anon := quota.Credential{Secret: bare.raw}
	e.addValue("credential", key)
	textLogger.Info("credential", "key", key, "anon", anon)
	type jobConfig struct {
		Name string
		Key  quota.Credential
	}
	logger.Info("job config", "config", jobConfig{"trending", key}, "keys", []quota.Credential{key, anon})
	textLogger.Info("job config", "config", jobConfig{"trending", key}, "keys", []quota.Credential{key, anon})
	for _, c := range []quota.Credential{key, anon} {
		r, err := l.Take(ctx, c, quota.Charge{Method: "search.list", Units: map[string]int64{"search": 1, "units": 1}})
		if err != nil {
			t.Fatal(err)
		}
		e.addValue("reservation", r)
		p, err := quota.ParseReservationID(r.ID())
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Refund(ctx, p); err != nil {
			t.Fatal(err)
		}
		e.addErr("second refund", l.Refund(ctx, r))
		if _, err := l.Take(ctx, c, quota.Units("units", 40)); err != nil {
			t.Fatal(err)
		}
		_, err = l.Take(ctx, c, quota.Units("units", 9990))
		if !errors.Is(err, quota.ErrExhausted) {
			t.Fatalf("a charge over the limit: %v, want ErrExhausted", err)
		}
		e.addErr("refusal", err)
		e.addErr("cost over the limit", func() error { _, err := l.Take(ctx, c, quota.Units("units", 10001)); return err }())
		e.addErr("unknown budget", func() error { _, err := l.Take(ctx, c, quota.Units("nope", 1)); return err }())
		e.addErr("zero cost", func() error { _, err := l.Take(ctx, c, quota.Units("units", 0)); return err }())
		e.addErr("adjust out of range", l.Adjust(ctx, c, "units", 10001))
		if err := l.Adjust(ctx, c, "uploads", 3); err != nil {
			t.Fatal(err)
		}
		until := time.Now().Add(time.Hour)
		if err := l.Exhaust(ctx, c, "stats", until); err != nil {
			t.Fatal(err)
		}
		_, err = l.Take(ctx, c, quota.Units("stats", 1))
		if !errors.Is(err, quota.ErrExhausted) {
			t.Fatalf("a charge to an exhausted budget: %v", err)
		}
		e.addErr("refusal while exhausted", err)
		us, err := l.Status(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		e.addValue("status", us)
		ents, err := l.Entries(ctx, c, "units")
		if err != nil {
			t.Fatal(err)
		}
		e.addValue("entries", ents)
	}
	apis, err := l.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.addValue("list", apis)
	_, err = l.Take(ctx, quota.Credential{Label: "no-such-label"}, quota.Units("units", 1))
	e.addErr("unknown label", err)
	if st, ok := store.(quota.StateStore); ok {
		recs, _ := st.Records(ctx, "", 0)
		e.addValue("records", recs)
	}

	// The metered transport against the simulated YouTube API: the key in
	// the query, in X-Goog-Api-Key, and as a Bearer token.
	sim := ytsim.New(ytsim.WithLimit("units", 30))
	defer sim.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	// The simulator (and the dead port below) play the API at loopback
	// hosts: a copy of the table prices any host.
	anyHost, err := table.WithHosts()
	if err != nil {
		t.Fatal(err)
	}
	tr := quota.NewTransport(l, anyHost,
		quota.WithBase(base), quota.WithTransportLogger(logger),
		// Labels are unique per API: one per way of carrying a credential.
		quota.WithLabelFunc(func(r *http.Request) string {
			switch {
			case r.URL.Query().Get("key") != "":
				return "sim-key"
			case r.Header.Get("X-Goog-Api-Key") != "":
				return "sim-header"
			}
			return "sim-bearer"
		}),
		quota.WithBackOff(func() backoff.BackOff { return &backoff.ZeroBackOff{} }))
	client := &http.Client{Transport: tr}
	videos := sim.URL() + "/youtube/v3/videos?part=snippet&chart=mostPopular&regionCode=US&maxResults=5"
	sim.Inject(ytsim.Fault{Status: 503}, ytsim.Fault{Drop: true}, ytsim.Fault{Status: 500})
	request := func(url string, header, value string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if header != "" {
			req.Header.Set(header, value)
		}
		return tr.RoundTrip(req)
	}
	sent := 0
	for _, how := range []struct{ url, header, value string }{
		{videos + "&key=" + labelled.raw, "", ""},
		{videos, "X-Goog-Api-Key", bare.raw},
		{videos, "Authorization", "Bearer " + bearer.raw},
	} {
		var last error
		for range 40 { // until the upstream's 30 units run out
			resp, err := request(how.url, how.header, how.value)
			if err != nil {
				last = err
				break
			}
			sent++
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the simulator answered %s", resp.Status)
			}
		}
		if !errors.Is(last, quota.ErrExhausted) {
			t.Fatalf("after the upstream's quota ran out: %v, want an error wrapping ErrExhausted", last)
		}
		e.addErr("transport refusal", last)
		_, err := request(how.url, how.header, how.value) // refused locally now, not sent
		e.addErr("transport local refusal", err)
	}
	if sent == 0 {
		t.Fatal("no request went through the transport")
	}
	// The table as shipped prices Google's hosts alone: a credential bound
	// for another host (here the simulator's) is refused, not sent.
	shipped := quota.NewTransport(l, table, quota.WithBase(base), quota.WithTransportLogger(logger))
	for _, how := range []struct{ url, header, value string }{
		{videos + "&key=" + labelled.raw, "", ""},
		{videos, "X-Goog-Api-Key", bare.raw},
		{videos, "Authorization", "Bearer " + bearer.raw},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, how.url, nil)
		if how.header != "" {
			req.Header.Set(how.header, how.value)
		}
		_, err := shipped.RoundTrip(req)
		if !errors.Is(err, quota.ErrForeignHost) {
			t.Fatalf("a credential to a host the table does not price: %v, want ErrForeignHost", err)
		}
		e.addErr("foreign host refusal", err)
	}
	// The same through an http.Client with the key in a header (a key in
	// the URL is in http.Client's own *url.Error by design: see
	// quota.Transport's doc).
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, videos, nil)
	req.Header.Set("X-Goog-Api-Key", bare.raw)
	_, err = client.Do(req)
	e.addErr("http.Client refusal", err)
	// A dial error: nothing listens there.
	dead := ytsim.New()
	deadURL := dead.URL()
	dead.Close()
	_, err = request(deadURL+"/youtube/v3/videos?part=id&id=x&key="+labelled.raw, "", "")
	if err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
	e.addErr("dial error", err)
	_, err = request(sim.URL()+"/youtube/v3/noSuchThing?key="+labelled.raw, "", "")
	e.addErr("unpriceable request", err)

	// The failure policy: an unreachable store, failing closed and open.
	down := redis.NewClient(&redis.Options{Addr: deadStoreAddr(t), MaxRetries: -1, DialTimeout: time.Second, DialerRetries: 1})
	defer down.Close()
	for _, opts := range [][]quota.Option{{quota.WithLogger(logger)}, {quota.WithLogger(logger), quota.FailOpen(5)}} {
		dl, err := quota.New(redisstore.New(down, redisstore.WithPrefix("qt:unreachable:")), "youtube", spec.Budgets, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []quota.Credential{key, anon} {
			r, err := dl.Take(ctx, c, quota.Units("units", 1))
			e.addErr("unreachable store", err)
			if err == nil {
				e.addValue("unmetered reservation", r)
			}
			_, err = dl.Status(ctx, c)
			e.addErr("unreachable store status", err)
		}
	}
	if !bytes.Contains(logs.Bytes(), []byte("unmetered")) {
		t.Fatalf("the fail-open limiter logged no unmetered decision; logs:\n%s", logs.Bytes())
	}

	e.add("JSON log", logs.Bytes())
	e.add("text log", text.Bytes())
	return secrets
}

// deadStoreAddr returns a loopback address nothing listens on.
func deadStoreAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", freePort(t))
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
