package quota_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quotactl/quotactl/internal/testkit"
	"github.com/quotactl/quotactl/quota"
)

// A request whose context is cancelled, before it is sent or while the
// store is asked, is not sent and not admitted: the error wraps
// context.Canceled, not ErrStoreUnavailable, the limiter's FailOpen does
// not apply and nothing warns about the store. Also for videos.insert,
// whose holds the Transport reads from the store before the charge.
func TestTransportCancelledIsNotAStoreOutage(t *testing.T) {
	for _, tc := range []struct{ when, method, path string }{
		{"before", "GET", "/youtube/v3/videos?id=v"},
		{"during", "GET", "/youtube/v3/videos?id=v"},
		{"before", "POST", "/youtube/v3/videos?part=snippet"},
		{"during", "POST", "/youtube/v3/videos?part=snippet"},
	} {
		when := tc.when
		t.Run(tc.when+"/"+tc.method, func(t *testing.T) {
			rc := newRecorder(t, okJSON)
			e := newTrEnv(t, nil)
			st := &hungStore{MemoryStore: quota.NewMemoryStore()}
			logs := &testkit.Buffer{}
			table := e.table
			lim, err := quota.New(st, table.API, table.Budgets, quota.FailOpen(100), quota.WithOwner("proj-c"),
				quota.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			client := &http.Client{Transport: quota.NewTransport(lim, table,
				quota.WithTransportLogger(slog.New(slog.NewTextHandler(logs, nil))))}
			u := rc.srv.URL + tc.path
			send := func(ctx context.Context) error {
				req, _ := http.NewRequestWithContext(ctx, tc.method, u, nil)
				req.Header.Set("X-Goog-Api-Key", trKey)
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				return err
			}
			if err := send(context.Background()); err != nil { // registers the credential
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			if when == "before" {
				cancel()
			} else {
				st.hung.Store(true)
				time.AfterFunc(20*time.Millisecond, cancel)
			}
			err = send(ctx)
			if !errors.Is(err, context.Canceled) || errors.Is(err, quota.ErrStoreUnavailable) {
				t.Fatalf("cancelled request = %v; want an error wrapping context.Canceled, not ErrStoreUnavailable", err)
			}
			if n := len(rc.requests()); n != 1 {
				t.Fatalf("%d requests reached the upstream, want 1 (the cancelled one is not sent)", n)
			}
			if n := lim.Unmetered(); n != 0 || strings.Contains(logs.String(), "WARN") {
				t.Fatalf("Unmetered() = %d, logs %q; want 0 and no warning", n, logs.String())
			}
		})
	}
}
