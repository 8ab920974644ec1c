package quota_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/quotactl/quotactl/costs"
	"github.com/quotactl/quotactl/quota"
)

// A key the store records as its own owner (charged before with no owner)
// keeps that account through a transport that names no owner: its spent
// budget keeps counting and the requests are refused, unsent. The unnamed
// owner is only for keys the store does not know; it never re-registers a
// recorded key under "unnamed-project" with nothing used.
func TestTransportKeepsAKeyOnItsOwnAccount(t *testing.T) {
	const secret = "AIza-key-1"
	table, err := costs.Builtin("youtube")
	if err != nil {
		t.Fatal(err)
	}
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
		{name: "legacy fingerprint", fpKey: []byte(quota.DefaultFingerprintKey)},
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
	table, err := costs.Builtin("youtube")
	if err != nil {
		t.Fatal(err)
	}
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

// When the transport cannot read whether the store records a key, it does
// not guess "unnamed-project" (which could move a recorded key off its
// account): the request is not sent and the catalog is left as it was.
func TestTransportUnreadableCatalogMovesNothing(t *testing.T) {
	ctx := context.Background()
	table, err := costs.Builtin("youtube")
	if err != nil {
		t.Fatal(err)
	}
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
	if !errors.Is(err, quota.ErrStoreUnavailable) || !errors.As(err, &ue) || strings.Contains(ue.Err.Error(), "AIza-key-1") {
		t.Fatalf("err = %v; want ErrStoreUnavailable, no secret", err)
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
