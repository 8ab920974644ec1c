package main

import (
	"bytes"
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quotactl/quotactl/internal/redistest"
	"github.com/quotactl/quotactl/quota/storeurl"
)

// TestSharedTokenNeverRefused: CI, unmetered, spends 40% of the user's core
// quota while the job runs; the job learns it from GitHub's x-ratelimit-*
// reports, never draws a 403 or 429, stops on a local refusal when GitHub's
// remaining is 0, and the store counts what GitHub counts. On the memory
// store, an SQLite file and a real Redis.
func TestSharedTokenNeverRefused(t *testing.T) {
	_, addr := redistest.Shared(t)
	stores := map[string]string{
		"memory": "memory:",
		"sqlite": storeurl.SQLiteURL(filepath.Join(t.TempDir(), "quota.db")),
		"redis":  "redis://" + addr + "/0?prefix=" + url.QueryEscape(redistest.Prefix(t)),
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			cfg := config{store: store, limit: 200, ciEvery: 1}
			if err := run(context.Background(), &out, cfg); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				"job: 120 calls; CI (unmetered, same user): 80 calls",
				"meter learned 80 units from GitHub's reports; 403/429 received: 0",
				"GitHub counts 200 of 200 used; the store counts 200",
				`stopped: budget "core" spent`,
			} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}
