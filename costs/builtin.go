package costs

import (
	"embed"
	"fmt"
	"slices"
	"strings"
	"sync"

	// The built-in YouTube profiles use America/Los_Angeles; embed the zone
	// database so they load on hosts without one (distroless images).
	_ "time/tzdata"

	"github.com/quotactl/quotactl/quota"
)

//go:embed profiles/*.yaml
var profiles embed.FS

var builtins sync.Map // name -> *Table, parsed once

// Builtins returns the names of the built-in tables, sorted: "anthropic",
// "github" (GitHub's REST and GraphQL rate limits), "openai",
// "ratelimit-headers" (any API sending the IETF RateLimit fields),
// "shopify-admin", "youtube" (Google's current YouTube Data API v3 rules),
// "youtube-2025-12" and "youtube-legacy" (the dated single-pool rules
// before them).
func Builtins() []string {
	entries, _ := profiles.ReadDir("profiles")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(names)
	return names
}

// Builtin returns the named built-in table (see Builtins):
//
//   - "youtube": the YouTube Data API v3 under Google's rules since
//     2026-06-01: budget "units", 10,000 a day shared by every method except
//     those with buckets of their own — "search" (search.list, 100 calls a
//     day), "uploads" (videos.insert, 100 calls a day) and "stats"
//     (videos.batchGetStats, 10,000 calls a day) — all reset at midnight
//     America/Los_Angeles, kept per Cloud project (Owner "project"). A 403
//     quotaExceeded or dailyLimitExceeded, or a 429 naming a daily limit,
//     marks the method's budgets spent; any other 429 (a per-minute
//     throttle) is retried; a 400 uploadLimitExceeded holds videos.insert
//     for the credential (the channel) for 24 hours.
//     comments.markAsSpam is deprecated upstream: Price refuses it.
//   - "youtube-2025-12": the rules from 2025-12-04 to 2026-05-31, one
//     10,000-unit daily pool in which search.list costs 100 units and
//     videos.insert about 100 (priced 100).
//   - "youtube-legacy": the rules before 2025-12-04, one 10,000-unit daily
//     pool in which search.list costs 100 units and videos.insert 1,600.
//   - "github": api.github.com, kept per user (Owner "user": every token of
//     one user shares its quota): "core" 5,000 REST requests an hour,
//     "search" 30 and "code_search" 10 a minute, "graphql" 5,000 points an
//     hour (a query priced at the minimum, 1), and the secondary limits,
//     "secondary" 900 points a minute for REST (GET, HEAD, OPTIONS 1 point,
//     POST, PATCH, PUT, DELETE 5) and "graphql_secondary" 2,000, all sliding
//     windows. A 403 or 429 with x-ratelimit-remaining: 0 marks the
//     request's resource spent until x-ratelimit-reset; a secondary-limit
//     403 or 429 is transient (retry-after).
//   - "ratelimit-headers": any host, one budget "requests" of a provisional
//     60 a minute, one unit per request, for an upstream whose
//     RateLimit-Policy says its real quota; a 429 marks it spent.
//
// The YouTube tables all use the API name "youtube", so they address the
// same stored budgets, and the same owner kind and response rules.
//
// Tables whose cost is read from the body (Method.Body; see
// Table.EstimateRequest and Table.ActualUnits):
//
//   - "openai": Chat Completions, Responses and Embeddings; budgets
//     "requests" and "tokens" per sliding minute, kept per project.
//   - "anthropic": the Messages API; budgets "requests", "input_tokens" and
//     "output_tokens" per sliding minute, kept per organization.
//   - "shopify-admin": Admin GraphQL; budget "points", Shopify's leaky
//     bucket (2,000 points restored at 100 a second) as 2,000 points per
//     sliding 20 seconds, each query estimated at 1,000 points (or the
//     caller's WithQueryCost) and settled to its actualQueryCost. It names
//     no hosts: take a copy for the shop (WithHosts).
//
// Their limits are one usage tier's (see each profile): set the account's
// own. The profiles' YAML is in the
// package source (profiles/), with the source of every number. An unknown
// name is an error listing the known ones.
func Builtin(name string) (*Table, error) {
	if t, ok := builtins.Load(name); ok {
		return t.(*Table).clone(), nil
	}
	data, err := profiles.ReadFile("profiles/" + name + ".yaml")
	if err != nil || strings.ContainsAny(name, "/\\.") {
		return nil, fmt.Errorf("%w: costs: no built-in table %q (built-in: %s)", quota.ErrInvalid, name, strings.Join(Builtins(), ", "))
	}
	t, err := Parse("profiles/"+name+".yaml", data)
	if err != nil {
		return nil, err
	}
	v, _ := builtins.LoadOrStore(name, t)
	return v.(*Table).clone(), nil
}

// clone returns a Table sharing t's immutable internals with its own copy
// of the exported fields.
func (t *Table) clone() *Table {
	c := *t
	c.Budgets = slices.Clone(t.Budgets)
	return &c
}
