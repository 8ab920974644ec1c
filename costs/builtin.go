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

// Builtins returns the names of the built-in tables, sorted:
// "youtube" (Google's current YouTube Data API v3 rules) and
// "youtube-legacy" (the older single-pool rules).
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
//   - "youtube": the YouTube Data API v3 under Google's current published
//     rules: budget "units", 10,000 a day shared by every method except
//     those with buckets of their own — "search" (search.list, 100 calls a
//     day), "uploads" (videos.insert, 100 calls a day) and "stats"
//     (videos.batchGetStats, 10,000 calls a day) — all reset at midnight
//     America/Los_Angeles. A 403 quotaExceeded or dailyLimitExceeded marks the
//     method's budgets spent; a 429 rateLimitExceeded marks its own bucket
//     spent.
//   - "youtube-legacy": the older rules, one 10,000-unit daily pool in which
//     search.list costs 100 units and videos.insert 1,600.
//
// Both use the API name "youtube", so they address the same stored budgets.
// The profiles' YAML is in the package source (profiles/), with the sources
// of its numbers. An unknown name is an error listing the known ones.
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
