// Package obslabel turns quota events into the bounded owner and method
// label values, and the per-budget gauges, that quota/promquota and
// quota/otelquota both export, so the two adapters never disagree on a
// label or a gauge.
package obslabel

import (
	"sync"

	"github.com/quotactl/quotactl/quota"
)

// Other is the value that stands for owners and methods past the bounds.
const Other = "other"

// Unlabelled is the owner value of a credential with neither an owner name
// nor a label.
const Unlabelled = "unlabelled"

// Set bounds the distinct owner and method values it hands out: the first
// MaxOwners owners and MaxMethods methods keep their own value, later ones
// become Other. Its zero value needs MaxOwners and MaxMethods set before
// use; it is safe for concurrent use.
type Set struct {
	MaxOwners, MaxMethods int

	mu      sync.Mutex
	owners  map[string]bool
	methods map[string]bool
}

// Of returns e's owner value (the owner name, else the credential label,
// else Unlabelled) and method value, each bounded.
func (s *Set) Of(e quota.Event) (owner, method string) {
	owner = e.Owner
	if owner == "" {
		owner = e.Label
	}
	if owner == "" {
		owner = Unlabelled
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owners == nil {
		s.owners, s.methods = map[string]bool{}, map[string]bool{}
	}
	return bounded(s.owners, s.MaxOwners, owner), bounded(s.methods, s.MaxMethods, e.Method)
}

func bounded(seen map[string]bool, max int, v string) string {
	if seen[v] {
		return v
	}
	if len(seen) >= max {
		return Other
	}
	seen[v] = true
	return v
}
