package quotactl_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/internal/testkit/overspend"
	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
	"github.com/quotactl/quotactl/quota/redisstore"
	"github.com/quotactl/quotactl/quota/sqlitestore"
	"github.com/quotactl/quotactl/quota/storeurl"
)

// TestBadInput is the library's table of bad inputs: each call must fail
// with the sentinel a caller branches on (errors.Is) and a message that
// names what is wrong, and must change nothing.
//
// Not repeated here: the CLI's exit codes for bad flags and arguments are
// tabled with the CLI (TestBadInput in cmd/quotactl/internal/cli), and
// cost-table files that do not parse, with the line and field named, in
// costs (TestParseErrorsNameLineAndField).
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	mem := quota.NewMemoryStore()
	hour := quota.Sliding(time.Hour)
	units := quota.Budget{Name: "units", Limit: 100, Window: hour}
	l, err := quota.New(mem, "youtube", []quota.Budget{units, {Name: "search", Limit: 10, Window: hour}}, quota.WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	key := quota.Credential{Secret: "AIzaSy-bad-input", Label: "bad-input"}
	res, err := l.Take(ctx, key, quota.Units("units", 3))
	if err != nil {
		t.Fatal(err)
	}
	refunded, err := l.Take(ctx, key, quota.Units("units", 1))
	if err != nil || l.Refund(ctx, refunded) != nil {
		t.Fatalf("take and refund: %v", err)
	}
	other, err := quota.New(mem, "vimeo", []quota.Budget{units}, quota.WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	otherRes, err := other.Take(ctx, key, quota.Units("units", 1))
	if err != nil {
		t.Fatal(err)
	}
	fp := res.Credential
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte("these are my notes, not a database\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rs := redisstore.New(redistest.Client(t), redisstore.WithPrefix(redistest.Prefix(t)))
	take := func(ch quota.Charge) func() error {
		return func() error { _, err := l.Take(ctx, key, ch); return err }
	}
	newLimiter := func(api string, budgets ...quota.Budget) func() error {
		return func() error { _, err := quota.New(mem, api, budgets); return err }
	}
	parseWindow := func(s string) func() error {
		return func() error { _, err := quota.ParseWindow(s); return err }
	}
	parseID := func(s string) func() error {
		return func() error { _, err := quota.ParseReservationID(s); return err }
	}
	openSQLite := func(path string) func() error {
		return func() error {
			s, err := sqlitestore.Open(path)
			if err == nil {
				s.Close()
			}
			return err
		}
	}
	openURL := func(u string) func() error {
		return func() error {
			s, err := storeurl.Open(ctx, u)
			if err == nil {
				s.Close()
			}
			return err
		}
	}
	storeTake := func(req *backend.TakeRequest) func() error {
		return func() error { _, err := rs.Take(ctx, req); return err }
	}
	long := strings.Repeat("x", 65)

	for _, tc := range []struct {
		name string
		call func() error
		want error
		frag string // the message must contain it (each part, when split by " … ")
	}{
		// quota.New
		{"New: nil store", func() error { _, err := quota.New(nil, "youtube", []quota.Budget{units}); return err }, quota.ErrInvalid, "nil store"},
		{"New: empty api", newLimiter("", units), quota.ErrInvalid, "empty api name"},
		{"New: api with a space", newLimiter("you tube", units), quota.ErrInvalid, `api name "you tube"`},
		{"New: api name too long", newLimiter(long, units), quota.ErrInvalid, "longer than 64 bytes"},
		{"New: no budgets", newLimiter("youtube"), quota.ErrInvalid, "no budgets"},
		{"New: limit 0", newLimiter("youtube", quota.Budget{Name: "units", Window: hour}), quota.ErrInvalid, `budget "units": limit is 0, must be > 0`},
		{"New: negative limit", newLimiter("youtube", quota.Budget{Name: "units", Limit: -5, Window: hour}), quota.ErrInvalid, "limit is -5"},
		{"New: zero window", newLimiter("youtube", quota.Budget{Name: "units", Limit: 1}), quota.ErrInvalid, `budget "units": zero window`},
		{"New: zero sliding window", newLimiter("youtube", quota.Budget{Name: "units", Limit: 1, Window: quota.Sliding(0)}), quota.ErrInvalid, "sliding window of 0s"},
		{"New: daily window without a zone", newLimiter("youtube", quota.Budget{Name: "units", Limit: 1, Window: quota.Daily(nil)}), quota.ErrInvalid, "daily window without a time zone"},
		{"New: duplicate budget", newLimiter("youtube", units, units), quota.ErrInvalid, `duplicate budget name "units"`},
		{"New: budget name with a slash", newLimiter("youtube", quota.Budget{Name: "a/b", Limit: 1, Window: hour}), quota.ErrInvalid, `budget name "a/b"`},
		{"New: empty budget name", newLimiter("youtube", quota.Budget{Limit: 1, Window: hour}), quota.ErrInvalid, "empty budget name"},

		// Limiter.Take
		{"Take: zero cost", take(quota.Units("units", 0)), quota.ErrInvalid, `cost 0 for budget "units": must be > 0`},
		{"Take: negative cost", take(quota.Units("units", -5)), quota.ErrInvalid, `cost -5 for budget "units"`},
		{"Take: unknown budget", take(quota.Units("nope", 1)), quota.ErrInvalid, `unknown budget "nope" for api "youtube"`},
		{"Take: unknown budget beside a known one", take(quota.Charge{Units: map[string]int64{"units": 1, "nope": 1}}), quota.ErrInvalid, `unknown budget "nope"`},
		{"Take: charge naming no budget", take(quota.Charge{Method: "videos.list"}), quota.ErrInvalid, `charge "videos.list" names no budget`},
		{"Take: cost over the limit", take(quota.Units("search", 11)), quota.ErrCostExceedsLimit, "youtube/search: cost 11 > limit 10"},
		{"Take: empty credential", func() error { _, err := l.Take(ctx, quota.Credential{}, quota.Units("units", 1)); return err }, quota.ErrInvalid, "empty credential"},
		{"Take: unknown label", func() error {
			_, err := l.Take(ctx, quota.Credential{Label: "ghost"}, quota.Units("units", 1))
			return err
		}, quota.ErrUnknownCredential, `no credential labelled "ghost" for api "youtube"`},
		{"Take: allocation to a budget the limiter lacks", func() error {
			_, err := l.Take(quota.ContextWithAllocation(ctx, "backfill", "units"), key, quota.Units("units", 1))
			return err
		}, quota.ErrInvalid, `"backfill"`},

		// Refund, Adjust, Exhaust, Entries, Load
		{"Refund: nil", func() error { return l.Refund(ctx, nil) }, quota.ErrInvalid, "nil reservation"},
		{"Refund: another API's reservation", func() error { return l.Refund(ctx, otherRes) }, quota.ErrInvalid, `is for api "vimeo", not "youtube"`},
		{"Refund: twice", func() error { return l.Refund(ctx, refunded) }, quota.ErrNotFound, "already refunded"},
		{"Refund: a reservation with no ID", func() error { return l.Refund(ctx, &quota.Reservation{API: "youtube"}) }, quota.ErrInvalid, "has no ID"},
		{"ParseReservationID: a malformed ID", func() error { _, err := quota.ParseReservationID("nonsense"); return err }, quota.ErrInvalid, `reservation ID "nonsense"`},
		{"Adjust: negative", func() error { return l.Adjust(ctx, key, "units", -1) }, quota.ErrInvalid, `used -1 for budget "units": must be between 0 and the limit 100`},
		{"Adjust: over the limit", func() error { return l.Adjust(ctx, key, "units", 101) }, quota.ErrInvalid, "used 101"},
		{"Adjust: unknown budget", func() error { return l.Adjust(ctx, key, "nope", 1) }, quota.ErrInvalid, `unknown budget "nope"`},
		{"Exhaust: unknown budget", func() error { return l.Exhaust(ctx, key, "nope", t0.Add(time.Hour)) }, quota.ErrInvalid, `unknown budget "nope"`},
		{"Exhaust: empty credential", func() error { return l.Exhaust(ctx, quota.Credential{}, "units", t0.Add(time.Hour)) }, quota.ErrInvalid, "empty credential"},
		{"Entries: unknown budget", func() error { _, err := l.Entries(ctx, key, "nope"); return err }, quota.ErrInvalid, `unknown budget "nope"`},
		{"Load: API with no budgets", func() error { _, err := quota.Load(ctx, mem, "twitch"); return err }, quota.ErrNotFound, `api "twitch" has no budgets`},

		// ParseWindow
		{"ParseWindow: empty", parseWindow(""), quota.ErrInvalid, `window ""`},
		{"ParseWindow: bad duration", parseWindow("sliding:forever"), quota.ErrInvalid, `window "sliding:forever": bad duration`},
		{"ParseWindow: zero", parseWindow("sliding:0s"), quota.ErrInvalid, "must be at least 1µs"},
		{"ParseWindow: negative", parseWindow("-1h"), quota.ErrInvalid, `window "-1h"`},
		{"ParseWindow: daily without a zone", parseWindow("daily:"), quota.ErrInvalid, "daily needs a zone"},
		{"ParseWindow: unknown zone", parseWindow("daily:Mars/Olympus_Mons"), quota.ErrInvalid, `unknown time zone "Mars/Olympus_Mons"`},
		{"ParseWindow: unknown kind", parseWindow("weekly:1"), quota.ErrInvalid, "kind must be sliding, daily or monthly"},

		// ParseReservationID
		{"ParseReservationID: empty", parseID(""), quota.ErrInvalid, "want API/ACCOUNT/TIME.NONCE"},
		{"ParseReservationID: two parts", parseID("youtube/" + fp), quota.ErrInvalid, "want API/ACCOUNT/TIME.NONCE"},
		{"ParseReservationID: bad api", parseID("you tube/" + fp + "/1.a"), quota.ErrInvalid, `api name "you tube"`},
		{"ParseReservationID: bad account", parseID("youtube/my project/1.a"), quota.ErrInvalid, `owner name "my project"`},
		{"ParseReservationID: empty account", parseID("youtube//1.a"), quota.ErrInvalid, "empty owner name"},
		{"ParseReservationID: no nonce", parseID("youtube/" + fp + "/1k2j3"), quota.ErrInvalid, "bad TIME.NONCE part"},
		{"ParseReservationID: bad time", parseID("youtube/" + fp + "/!!.a"), quota.ErrInvalid, "bad TIME.NONCE part"},
		{"ParseReservationID: time zero", parseID("youtube/" + fp + "/0.a"), quota.ErrInvalid, "bad TIME.NONCE part"},

		// Store openers and stores used directly
		{"sqlitestore.Open: empty path", openSQLite(""), quota.ErrInvalid, "empty path"},
		{"sqlitestore.Open: a directory", openSQLite(dir), quota.ErrInvalid, dir + " … is a directory"},
		{"sqlitestore.Open: not a database", openSQLite(notDB), sqlitestore.ErrNotDatabase, notDB + " … not an SQLite database"},
		{"sqlitestore.Open: not a database is invalid", openSQLite(notDB), quota.ErrInvalid, notDB},
		{"sqlitestore.Open: missing directory", openSQLite(filepath.Join(dir, "no", "such", "dir", "q.db")), quota.ErrStoreUnavailable, filepath.Join(dir, "no", "such", "dir", "q.db")},
		{"storeurl.Open: unknown scheme", openURL("ftp://example.com/q"), quota.ErrInvalid, `"ftp"`},
		{"storeurl.Open: sqlite without a path", openURL("sqlite:"), quota.ErrInvalid, "path"},
		{"storeurl.Open: sqlite with a host", openURL("sqlite://host/q.db"), quota.ErrInvalid, "host"},
		{"storeurl.Open: unknown redis option", openURL("redis://127.0.0.1:6379/0?frobnicate=1"), quota.ErrInvalid, "frobnicate"},
		{"storeurl.Open: bad redis db", openURL("redis://127.0.0.1:6379/x"), quota.ErrInvalid, `"x"`},
		{"storeurl.Open: nothing listening", openURL("redis://" + deadStoreAddr(t) + "/0?dial_timeout=1s&max_retries=-1"), quota.ErrStoreUnavailable, "storeurl"},
		{"redisstore: empty fingerprint", storeTake(&backend.TakeRequest{API: "youtube", Nonce: "n1", Debits: []backend.Debit{{Budget: units, Cost: 1}}}), quota.ErrInvalid, "empty credential fingerprint"},
		{"redisstore: brace in fingerprint", storeTake(&backend.TakeRequest{API: "youtube", Owner: "ab}cd", Nonce: "n1", Debits: []backend.Debit{{Budget: units, Cost: 1}}}), quota.ErrInvalid, `"ab}cd" holds a brace`},
		{"redisstore: no debits", storeTake(&backend.TakeRequest{API: "youtube", Owner: fp, Nonce: "n1"}), quota.ErrInvalid, "names no budget"},
		{"redisstore: cost over the limit", storeTake(&backend.TakeRequest{API: "youtube", Owner: fp, Nonce: "n1", Debits: []backend.Debit{{Budget: units, Cost: 101}}}), quota.ErrInvalid, `cost 101 for budget "units"`},
		{"redisstore: colon in nonce", storeTake(&backend.TakeRequest{API: "youtube", Owner: fp, Nonce: "a:b", Debits: []backend.Debit{{Budget: units, Cost: 1}}}), quota.ErrInvalid, `nonce "a:b"`},
		{"redisstore: zero window", storeTake(&backend.TakeRequest{API: "youtube", Owner: fp, Nonce: "n1", Debits: []backend.Debit{{Budget: quota.Budget{Name: "units", Limit: 1}, Cost: 1}}}), quota.ErrInvalid, "zero window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v; want one wrapping %v", err, tc.want)
			}
			for _, frag := range strings.Split(tc.frag, " … ") {
				if !strings.Contains(err.Error(), frag) {
					t.Fatalf("err = %q; want it to name the problem: %q", err, frag)
				}
			}
			if tc.want != quota.ErrExhausted && errors.Is(err, quota.ErrExhausted) {
				t.Fatalf("err = %v also matches ErrExhausted: a caller would wait and retry a call that can never succeed", err)
			}
			if m := err.Error(); m != strings.ToLower(m[:1])+m[1:] {
				t.Errorf("err = %q: errors start lower-case", m)
			}
		})
	}
	// None of it changed anything.
	if us := overspend.Used(t, l, key); us["units"] != 3 || us["search"] != 0 {
		t.Fatalf("bad input changed usage: %v, want units 3, search 0", us)
	}
}
