package quota_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/backend"
)

// A key the store records as its own owner (charged before with no owner)
// keeps that account through a transport that names no owner: its spent
// budget keeps counting and the requests are refused, unsent. The unnamed
// owner is only for keys the store does not know; it never re-registers a
// recorded key under "unnamed-project" with nothing used.
func TestTransportKeepsAKeyOnItsOwnAccount(t *testing.T) {
	const secret = "AIza-key-1"
	table := anyHost(t, "youtube")
	tests := []struct {
		name   string
		fpKey  []byte // the fingerprint key the spending process used
		opts   []quota.TransportOption
		header bool // send the key in X-Goog-Api-Key, not ?key=
	}{
		{name: "key parameter"},
		{name: "X-Goog-Api-Key", header: true},
		{name: "WithCredential label", opts: []quota.TransportOption{quota.WithCredential(quota.Credential{Label: "yt-key-1"})}},
		{name: "WithCredential secret", opts: []quota.TransportOption{quota.WithCredential(quota.Credential{Secret: secret})}},
		{name: "WithLabel", opts: []quota.TransportOption{quota.WithLabel("yt-key-1")}},
		{name: "legacy fingerprint", fpKey: []byte(quota.LegacyFingerprintKey)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			store := quota.NewMemoryStore()
			var opts []quota.Option
			if tt.fpKey != nil {
				opts = append(opts, quota.WithFingerprintKey(tt.fpKey))
			}
			spender, err := quota.New(store, table.API, table.Budgets, opts...)
			if err != nil {
				t.Fatal(err)
			}
			r, err := spender.Take(ctx, quota.Credential{Secret: secret, Label: "yt-key-1"}, quota.Units("units", 10000))
			if err != nil {
				t.Fatal(err)
			}
			account := r.Owner
			var sent atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				sent.Add(1)
				_, _ = io.WriteString(w, `{"items":[]}`)
			}))
			t.Cleanup(srv.Close)
			// The same limiter, and another process's.
			other, err := quota.New(store, table.API, table.Budgets)
			if err != nil {
				t.Fatal(err)
			}
			for _, lim := range []*quota.Limiter{spender, other} {
				if tt.fpKey != nil && lim == spender {
					continue // the legacy derivation is migrated by a default limiter
				}
				logger := slog.New(slog.DiscardHandler)
				client := &http.Client{Transport: quota.NewTransport(lim, table, append([]quota.TransportOption{quota.WithTransportLogger(logger)}, tt.opts...)...)}
				for i := range 20 {
					u := srv.URL + "/youtube/v3/videos?part=id&id=x&key=" + secret
					if tt.header {
						u = srv.URL + "/youtube/v3/videos?part=id&id=x"
					}
					req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
					if tt.header {
						req.Header.Set("X-Goog-Api-Key", secret)
					}
					resp, err := client.Do(req)
					if err == nil {
						resp.Body.Close()
					}
					if !errors.Is(err, quota.ErrExhausted) {
						t.Fatalf("request %d: %v; want refused, the key's budget is spent", i, err)
					}
				}
			}
			if n := sent.Load(); n != 0 {
				t.Fatalf("%d requests sent on a spent budget", n)
			}
			apis, err := other.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range apis {
				for _, c := range a.Credentials {
					if a.Name == table.API && c.Owner != account {
						t.Errorf("credential %s (%q) listed under owner %q, want %q: moved off its account", c.ID, c.Label, c.Owner, account)
					}
				}
			}
			us, err := other.StatusOf(ctx, account)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range us {
				if u.Budget == "units" && u.Used != 10000 {
					t.Errorf("account %s used %d units, want 10000", account, u.Used)
				}
			}
		})
	}
}

// An owner named explicitly still moves a key the store records (README:
// owners), so does WithOwnerFunc through the transport: only the implicit
// unnamed owner leaves recorded keys where they are.
func TestTransportOwnerFuncMovesARecordedKey(t *testing.T) {
	ctx := context.Background()
	table := anyHost(t, "youtube")
	store := quota.NewMemoryStore()
	lim, err := quota.New(store, table.API, table.Budgets, quota.WithFingerprintKey([]byte("k")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Take(ctx, quota.Credential{Secret: "AIza-key-1"}, quota.Units("units", 10000)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{}`) }))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: quota.NewTransport(lim, table, quota.WithOwnerFunc(func(*http.Request) string { return "proj-b" }))}
	resp, err := client.Get(srv.URL + "/youtube/v3/videos?part=id&id=x&key=AIza-key-1")
	if err != nil {
		t.Fatalf("the key moved to proj-b: %v", err)
	}
	resp.Body.Close()
	us, err := lim.StatusOf(ctx, "proj-b")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if u.Budget == "units" && u.Used != 1 {
			t.Fatalf("proj-b used %d, want 1", u.Used)
		}
	}
	apis, err := lim.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := apis[0].Credentials; len(c) != 1 || c[0].Owner != "proj-b" {
		t.Fatalf("credentials %+v, want the key under proj-b", c)
	}
}

// listFails is a store whose catalog cannot be read; every other call works.
type listFails struct{ quota.Store }

func (listFails) List(context.Context) ([]quota.APIInfo, error) {
	return nil, fmt.Errorf("%w: catalog unreadable", quota.ErrStoreUnavailable)
}

// The transport never guesses "unnamed-project" from a catalog read (which
// could move a recorded key off its account): it does not read the
// catalog at all, its registration applies the unnamed owner only to a key
// the store does not record, in one atomic step. So a catalog that cannot
// be listed changes nothing: the key stays on its own account, whose spent
// budget refuses the request unsent, and the catalog is left as it was.
func TestTransportUnreadableCatalogMovesNothing(t *testing.T) {
	ctx := context.Background()
	table := anyHost(t, "youtube")
	mem := quota.NewMemoryStore()
	lim, err := quota.New(mem, table.API, table.Budgets, quota.WithFingerprintKey([]byte("k")))
	if err != nil {
		t.Fatal(err)
	}
	r, err := lim.Take(ctx, quota.Credential{Secret: "AIza-key-1"}, quota.Units("units", 10000))
	if err != nil {
		t.Fatal(err)
	}
	lim2, err := quota.New(listFails{mem}, table.API, table.Budgets, quota.WithFingerprintKey([]byte("k")))
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { sent.Add(1) }))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: quota.NewTransport(lim2, table, quota.WithTransportLogger(slog.New(slog.DiscardHandler)))}
	_, err = client.Get(srv.URL + "/youtube/v3/videos?part=id&id=x&key=AIza-key-1")
	var ue *url.Error // http.Client puts the URL in it (documented): look at what the transport said
	if !errors.Is(err, quota.ErrExhausted) || !errors.As(err, &ue) || strings.Contains(ue.Err.Error(), "AIza-key-1") {
		t.Fatalf("err = %v; want ErrExhausted (the key's own spent budget), no secret", err)
	}
	if sent.Load() != 0 {
		t.Fatal("the request was sent")
	}
	apis, err := mem.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := apis[0].Credentials; len(c) != 1 || c[0].Account() != r.Owner {
		t.Fatalf("credentials %+v, want the key on its own account %s", c, r.Owner)
	}
}

// racingStore runs before, once, when the first credential registration
// reaches the store, ahead of it: another process registering the same
// credential after the transport saw the key as new, and before the
// transport's own registration.
type racingStore struct {
	quota.Store
	once   sync.Once
	before func()
}

func (s *racingStore) UpdateCredential(ctx context.Context, api string, u backend.CredentialUpdate) (quota.CredentialInfo, error) {
	s.once.Do(s.before)
	return s.Store.UpdateCredential(ctx, api, u)
}

// A brand-new key whose owner another process names (quotactl take
// --owner, a limiter given the owner) just before the transport registers
// it keeps that owner: the transport's implicit unnamed owner applies only
// to a key the store does not record when the registration lands, so it
// never overrides an owner named concurrently, and the request is metered
// under that owner.
func TestTransportUnnamedOwnerYieldsToAConcurrentOwner(t *testing.T) {
	const secret = "AIza-key-1"
	ctx := context.Background()
	table := anyHost(t, "youtube")
	fpKey := quota.WithFingerprintKey([]byte("k"))
	mem := quota.NewMemoryStore()
	other, err := quota.New(mem, table.API, table.Budgets, fpKey)
	if err != nil {
		t.Fatal(err)
	}
	st := &racingStore{Store: mem, before: func() {
		if _, err := other.Take(ctx, quota.Credential{Secret: secret, Label: "yt-key-1", Owner: "proj-x"}, quota.Units("units", 1)); err != nil {
			t.Errorf("the other process's take: %v", err)
		}
	}}
	lim, err := quota.New(st, table.API, table.Budgets, fpKey)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{}`) }))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: quota.NewTransport(lim, table, quota.WithTransportLogger(slog.New(slog.NewTextHandler(&logs, nil))))}
	resp, err := client.Get(srv.URL + "/youtube/v3/videos?part=id&id=x&key=" + secret)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	apis, err := mem.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := apis[0].Credentials; len(c) != 1 || c[0].Owner != "proj-x" || c[0].Label != "yt-key-1" {
		t.Fatalf("credentials %+v, want the key labelled yt-key-1 under proj-x", c)
	}
	for owner, want := range map[string]int64{"proj-x": 2, "unnamed-project": 0} {
		us, err := other.StatusOf(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			if u.Budget == "units" && u.Used != want {
				t.Errorf("%s used %d units, want %d", owner, u.Used, want)
			}
		}
	}
	if strings.Contains(logs.String(), "none is named") {
		t.Errorf("logged the unnamed owner for a key whose owner was named:\n%s", logs.String())
	}
}

// A request whose context carries values of its own (a job's name, a
// ChargeFunc) still registers a new key under the unnamed owner, with the
// job recorded: the Transport's values join the request's.
func TestTransportUnnamedOwnerUnderAJobContext(t *testing.T) {
	e := newTrEnv(t, nil)
	var charged int
	ctx := quota.ContextWithChargeFunc(quota.ContextWithJob(context.Background(), "ingest"), func(_ *quota.Reservation, refund bool) {
		if !refund {
			charged++
		}
	})
	if _, _, err := e.do(ctx, "GET", e.url("/youtube/v3/videos", "id", "v"), nil); err != nil {
		t.Fatal(err)
	}
	apis, err := e.store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := apis[0].Credentials; len(c) != 1 || c[0].Owner != trOwner {
		t.Fatalf("credentials %+v, want the key under %s", c, trOwner)
	}
	rows, err := e.store.Breakdown(context.Background(), &backend.BreakdownRequest{API: e.table.API, Owner: trOwner, Since: e.clk.Now().Add(-time.Hour), Now: e.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Job != "ingest" || rows[0].Units != 1 || charged != 1 {
		t.Fatalf("breakdown %+v, %d charges seen; want 1 unit under job ingest, seen once", rows, charged)
	}
}
